"""Stage 2, playing an environment: the agent's prompt and episode loop, and the first episode of a fresh worker.

Imports the contract (``envs``) and the sandbox only (docs/architecture.md).
"""
