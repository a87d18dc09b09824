"""The top of ``spade_envs``: the ``spade-envs`` command (``main``), its machine and run checks, terminal output.

May import every stage below (docs/architecture.md).
"""

__all__ = ["entrypoint"]


def entrypoint() -> None:
    """The ``spade-envs`` console script; the command's modules load only when it runs."""
    from spade_envs.cli.main import entrypoint as run

    run()
