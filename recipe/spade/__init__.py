"""SPADE as a verl 0.9.1 recipe: thin glue from verl's extension points onto ``spade_envs``.

The trainer, agent loops and reward manager land here in later work; this package pins the verl version it is
written against (``REQUIRED_VERL.txt``) and checks it at import, so a mismatched install fails early and clearly.
"""

from __future__ import annotations

from importlib import metadata, resources

__all__ = ["REQUIRED_VERL", "check_verl_version"]

REQUIRED_VERL: str = resources.files(__package__).joinpath("REQUIRED_VERL.txt").read_text().strip()


def check_verl_version() -> str:
    """Return the installed verl version, or raise ``RuntimeError`` naming the required one."""
    wanted = REQUIRED_VERL.split("==", 1)[1]
    try:
        found = metadata.version("verl")
    except metadata.PackageNotFoundError:
        raise RuntimeError(f"verl is not installed; this recipe needs {REQUIRED_VERL}") from None
    if found != wanted:
        raise RuntimeError(f"this recipe is written against {REQUIRED_VERL}, but verl {found} is installed")
    return found
