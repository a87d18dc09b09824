"""Stage 0, the environment contract: what an environment is, how its source loads, how an episode ends.

Everything above builds on these modules; they import nothing else of ``spade_envs`` (docs/architecture.md).
"""
