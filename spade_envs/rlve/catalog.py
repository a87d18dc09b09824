"""Which RLVE environments exist, and the named sets the paper trains on.

The catalog is read from the installed ``rlve-gym`` package *without importing it*: importing
``Gym.environments`` loads all ~400 environments (and torch), which the host never needs. The package's two
registries (``identifier2environment``, ``identifier2controller``) are plain ``from ... import`` lines and a dict
literal, so parsing them with :mod:`ast` gives each id's module and class.
"""

from __future__ import annotations

import ast
import difflib
import functools
import importlib.util
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from spade_envs.envs.ast_parse import parse_source
from spade_envs.envs.errors import SpadeEnvError

__all__ = ["OFFICIAL16", "RLVECatalogError", "RLVEEntry", "UnknownRLVEEnv", "gym_root", "rlve_catalog"]

#: The 16 environments of RLVE's official set (notes/spade-reference.md §10), in the paper's order.
OFFICIAL16: tuple[str, ...] = (
    "Division",
    "EuclidGame",
    "GCDOne_Counting",
    "HamiltonianPath",
    "LampChanging",
    "LargestConvexPolygon",
    "Multiplication",
    "PCPPermutation",
    "Path_NoGoingBack_Counting",
    "SAT",
    "ShortestPath",
    "Sorting",
    "SpiralMatrix",
    "SubsequenceReversalLNDS",
    "UndamagedSubmatrixCounting",
    "WYRLevelingGround",
)


class RLVECatalogError(SpadeEnvError):
    """``rlve-gym`` is missing or its registries cannot be read."""


class UnknownRLVEEnv(SpadeEnvError, KeyError):
    """A set names an RLVE id that the installed package does not have (``env_id`` says which)."""

    def __init__(self, env_id: str, known: Sequence[str]) -> None:
        close = difflib.get_close_matches(env_id, known, n=3)
        hint = f"; did you mean {', '.join(close)}?" if close else ""
        super().__init__(f"unknown RLVE environment {env_id!r} (rlve-gym has {len(known)} ids){hint}")
        self.env_id = env_id

    def __str__(self) -> str:  # KeyError would quote the message
        return str(self.args[0])


@dataclass(frozen=True)
class RLVEEntry:
    """One RLVE environment: where its generator/verifier class and its parameter controller live."""

    env_id: str
    env_module: str
    env_class: str
    controller_module: str
    controller_class: str


def gym_root() -> Path:
    """The installed ``Gym`` package directory (rlve-gym), located without importing it."""
    spec = importlib.util.find_spec("Gym")
    if spec is None or not spec.submodule_search_locations:
        raise RLVECatalogError("rlve-gym is not installed: pip install rlve-gym==0.0.1 (module 'Gym')")
    root = Path(next(iter(spec.submodule_search_locations)))
    if not (root / "environments" / "__init__.py").is_file():
        raise RLVECatalogError(f"{root} is not rlve-gym's Gym package (no environments/__init__.py)")
    return root


def _registry(init_file: Path, dict_name: str) -> dict[str, tuple[str, str]]:
    """``{id: (module, class)}`` from a registry ``__init__.py`` (imports + one dict literal of names)."""
    tree = parse_source(init_file.read_text(encoding="utf-8"), str(init_file))
    where: dict[str, str] = {}
    table: dict[str, str] = {}
    for node in tree.body:
        if isinstance(node, ast.ImportFrom) and node.module:
            for alias in node.names:
                where[alias.asname or alias.name] = node.module
        elif isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == dict_name for t in node.targets):
            if not isinstance(node.value, ast.Dict):
                raise RLVECatalogError(f"{init_file}: {dict_name} is not a dict literal")
            for key, value in zip(node.value.keys, node.value.values):
                if isinstance(key, ast.Constant) and isinstance(key.value, str) and isinstance(value, ast.Name):
                    table[key.value] = value.id
    if not table:
        raise RLVECatalogError(f"{init_file} defines no {dict_name}")
    return {env_id: (where[name], name) for env_id, name in table.items() if name in where}


@functools.lru_cache(maxsize=1)
def rlve_catalog() -> dict[str, RLVEEntry]:
    """Every RLVE id that has both an environment and a parameter controller, in the package's order."""
    root = gym_root()
    envs = _registry(root / "environments" / "__init__.py", "identifier2environment")
    controllers = _registry(root / "parameter_controllers" / "__init__.py", "identifier2controller")
    return {
        env_id: RLVEEntry(env_id, module, cls, *controllers[env_id])
        for env_id, (module, cls) in envs.items()
        if env_id in controllers
    }
