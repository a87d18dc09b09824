"""Import names that generated environments use, kept stable while the code behind them moves.

A designer writes ``from spade_envs.tooluse import ToolUseEnv`` (the prompt says so, memory files and imported pools
hold such code, and a trained model keeps writing it): that name is the designer's contract, not a path in this
tree. The module lives at ``spade_envs.envs.tooluse``; a finder on ``sys.meta_path`` answers the public name with
that same module object (never a second copy, so ``isinstance`` checks hold), loaded only when env code asks.
"""

from __future__ import annotations

import importlib
import sys
from importlib.machinery import ModuleSpec
from types import ModuleType

__all__ = ["PUBLIC_NAMES", "install"]

#: Public import name -> the module that answers it.
PUBLIC_NAMES: dict[str, str] = {"spade_envs.tooluse": "spade_envs.envs.tooluse"}


class _PublicNameFinder:
    """A meta-path finder and its loader: the import system's protocols, duck-typed.

    Subclassing ``importlib.abc``'s classes would pull ``importlib.resources``, ``pathlib`` and ``tempfile`` into
    every sandbox worker's start (~8 ms of a cold start, issue 39).
    """

    def find_spec(self, fullname: str, path: object = None, target: object = None) -> ModuleSpec | None:
        if fullname not in PUBLIC_NAMES:
            return None
        return ModuleSpec(fullname, self)

    def create_module(self, spec: ModuleSpec) -> ModuleType:
        return importlib.import_module(PUBLIC_NAMES[spec.name])

    def exec_module(self, module: ModuleType) -> None:
        """Nothing to run: the module was executed under its own name."""


def install() -> None:
    """Put the finder on ``sys.meta_path`` once (idempotent; the host package and the sandbox worker both call it)."""
    if not any(isinstance(finder, _PublicNameFinder) for finder in sys.meta_path):
        sys.meta_path.insert(0, _PublicNameFinder())
