"""The top of ``spade_envs``: the ``spade-envs`` command (``main``), its machine and run checks, terminal output.

May import every stage below (docs/architecture.md).
"""
