"""The starter ladder: seven tiny games from format-only to three turns, for small models that win no built-in game.

A 135M model wins none of the twelve built-ins (docs/cpu.md), so GRPO on them has no signal. These rungs give
it some: say a named word, send exactly a password, compare, add, count, then two and three turns of named words.
``make learn`` trains on the rungs whose measured baseline sits between 0.1 and 0.6. Each is a plain source file in
the designer's form, played through the sandbox like any other env (the trainer reads them as a fixed pool written
by :func:`write_ladder_pool`). The format rungs are trivial by design, so validation's random agent (which sends
words of the observation) wins some of them: they are starter tasks, not admissible designs.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import cache
from importlib import resources
from pathlib import Path

from spade_envs.envs.loader import load_env_class
from spade_envs.envs.spec import EnvSpec

__all__ = ["LADDER", "Rung", "ladder_source", "ladder_spec", "load_rung", "write_ladder_pool"]


@dataclass(frozen=True)
class Rung:
    """Catalogue row: class name, what the rung asks of the agent, games skill, source file in this package."""

    name: str
    kind: str
    skill: str
    path: str


LADDER: tuple[Rung, ...] = (
    Rung("SayWordEnv", "format: contain a named word", "pattern_recognition", "say_word.py"),
    Rung("PasswordEnv", "format: exactly the named password", "pattern_recognition", "password.py"),
    Rung("CompareEnv", "one step: the larger of two numbers", "mathematical_reasoning", "compare.py"),
    Rung("AddEnv", "one step: sum of two digits", "mathematical_reasoning", "add.py"),
    Rung("CountEnv", "one step: count a word in a list", "mathematical_reasoning", "count.py"),
    Rung("TwoDoorsEnv", "two turns: a named word each turn", "pattern_recognition", "two_doors.py"),
    Rung("ThreeDoorsEnv", "three turns: a named word each turn", "pattern_recognition", "three_doors.py"),
)
_BY_NAME = {r.name: r for r in LADDER}


def _rung(name: str) -> Rung:
    try:
        return _BY_NAME[name]
    except KeyError:
        raise KeyError(f"no ladder rung {name!r}; known: {', '.join(_BY_NAME)}") from None


def ladder_source(name: str) -> str:
    """The source text of a rung, as shipped in the package."""
    return resources.files(__package__).joinpath(_rung(name).path).read_text(encoding="utf-8")


@cache
def load_rung(name: str) -> type:
    """The env class of a rung, through the loader generated code uses (trusted code: in-process is fine)."""
    return load_env_class(ladder_source(name))


def ladder_spec(name: str) -> EnvSpec:
    """The :class:`EnvSpec` of a rung (games setting, written by hand)."""
    rung = _rung(name)
    return EnvSpec(env_id=f"ladder-{rung.name}", setting="games", skill=rung.skill, source=ladder_source(name))


def write_ladder_pool(directory: str | Path, names: list[str]) -> Path:
    """Write ``names`` as a fixed pool (``manifest.jsonl`` + ``envs/``) that ``spade.fixed_env.pool_dir`` reads.

    The same layout ``spade-envs generate`` writes, so the trainer plays the rungs in its sandbox like any pool.
    """
    if not names:
        raise ValueError("write_ladder_pool needs at least one rung name")
    root = Path(directory)
    (root / "envs").mkdir(parents=True, exist_ok=True)
    rows = []
    for name in names:
        spec = ladder_spec(name)
        (root / "envs" / f"{spec.env_id}.py").write_text(spec.source, encoding="utf-8")
        rows.append({"env_id": spec.env_id, "valid": True, "skill": spec.skill, "doc_id": None})
    (root / "manifest.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return root
