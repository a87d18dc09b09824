"""``python -m spade_envs.cli``: the same as ``spade-envs``."""

from spade_envs.cli.main import entrypoint

entrypoint()
