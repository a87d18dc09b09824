"""Suite names, the ``games`` / ``tool_use`` / ``all`` groups, and resolving a ``--suite`` value."""

from __future__ import annotations

from collections.abc import Callable

from spade_envs.evaluation.suite import Suite

__all__ = ["GROUPS", "SUITES", "make_suite", "resolve_suites"]


def _aime25() -> Suite:
    from spade_envs.evaluation.suites.math import AimeSuite

    return AimeSuite(2025)


def _aime26() -> Suite:
    from spade_envs.evaluation.suites.math import AimeSuite

    return AimeSuite(2026)


def _gpqa() -> Suite:
    from spade_envs.evaluation.suites.math import GpqaDiamondSuite

    return GpqaDiamondSuite()


def _lcb() -> Suite:
    from spade_envs.evaluation.suites.livecodebench import LiveCodeBenchSuite

    return LiveCodeBenchSuite()


def _rg(group: str) -> Callable[[], Suite]:
    def make() -> Suite:
        from spade_envs.evaluation.suites.reasoning_gym import ReasoningGymSuite

        return ReasoningGymSuite(group)

    return make


def _bfcl() -> Suite:
    from spade_envs.evaluation.suites.bfcl import BfclMultiTurnSuite

    return BfclMultiTurnSuite()


#: Every suite by name, in table order. Factories import lazily: a missing optional package only fails its suite.
SUITES: dict[str, Callable[[], Suite]] = {
    "aime25": _aime25,
    "aime26": _aime26,
    "gpqa_diamond": _gpqa,
    "livecodebench_v6": _lcb,
    "rg_math": _rg("rg_math"),
    "rg_algorithmic": _rg("rg_algorithmic"),
    "rg_cognition": _rg("rg_cognition"),
    "rg_logic": _rg("rg_logic"),
    "bfcl_multi_turn": _bfcl,
}
#: The paper's two settings: the eight held-out games benchmarks, and the tool-use benchmarks.
GROUPS: dict[str, tuple[str, ...]] = {
    "games": (
        "aime25",
        "aime26",
        "gpqa_diamond",
        "livecodebench_v6",
        "rg_math",
        "rg_algorithmic",
        "rg_cognition",
        "rg_logic",
    ),  # fmt: skip
    "tool_use": ("bfcl_multi_turn",),
}


def resolve_suites(spec: str) -> list[str]:
    """``games``, ``tool_use``, ``all`` or comma-separated names -> suite names, deduplicated, in table order."""
    wanted: set[str] = set()
    for part in (p.strip() for p in spec.split(",")):
        if part == "all":
            wanted |= set(SUITES)
        elif part in GROUPS:
            wanted |= set(GROUPS[part])
        elif part in SUITES:
            wanted.add(part)
        else:
            raise ValueError(f"unknown suite {part!r}; use games, tool_use, all or names from: {', '.join(SUITES)}")
    return [name for name in SUITES if name in wanted]


def make_suite(name: str) -> Suite:
    """A fresh suite object by registry name."""
    if name not in SUITES:
        raise ValueError(f"unknown suite {name!r}; known: {', '.join(SUITES)}")
    return SUITES[name]()
