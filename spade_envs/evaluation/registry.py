"""Suite names, the ``games`` / ``tool_use`` / ``all`` groups, and resolving a ``--suite`` value."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from spade_envs.envs.llm import ChatClient
from spade_envs.evaluation.suite import Suite

__all__ = ["GROUPS", "SUITES", "SuiteOptions", "make_suite", "resolve_suites"]


@dataclass(frozen=True)
class SuiteOptions:
    """Settings only some suites use; every factory gets them and takes what it needs.

    Attributes:
        acebench_root: the user's ACEBench checkout (``acebench_agent``).
        user_client: the LLM user simulator's endpoint (``acebench_agent`` multi-turn); ``None`` means the model
            under test plays the user.
        user_is_model_under_test: ``user_client`` is the model under test's own endpoint (the CLI's default).
    """

    acebench_root: Path | None = None
    user_client: ChatClient | None = None
    user_is_model_under_test: bool | None = None


def _aime25(_: SuiteOptions) -> Suite:
    from spade_envs.evaluation.suites.math import AimeSuite

    return AimeSuite(2025)


def _aime26(_: SuiteOptions) -> Suite:
    from spade_envs.evaluation.suites.math import AimeSuite

    return AimeSuite(2026)


def _gpqa(_: SuiteOptions) -> Suite:
    from spade_envs.evaluation.suites.math import GpqaDiamondSuite

    return GpqaDiamondSuite()


def _lcb(_: SuiteOptions) -> Suite:
    from spade_envs.evaluation.suites.livecodebench import LiveCodeBenchSuite

    return LiveCodeBenchSuite()


def _rg(group: str) -> Callable[[SuiteOptions], Suite]:
    def make(_: SuiteOptions) -> Suite:
        from spade_envs.evaluation.suites.reasoning_gym import ReasoningGymSuite

        return ReasoningGymSuite(group)

    return make


def _bfcl(_: SuiteOptions) -> Suite:
    from spade_envs.evaluation.suites.bfcl import BfclMultiTurnSuite

    return BfclMultiTurnSuite()


def _bfcl_non_live(_: SuiteOptions) -> Suite:
    from spade_envs.evaluation.suites.bfcl_single import BfclNonLiveSuite

    return BfclNonLiveSuite()


def _bfcl_live(_: SuiteOptions) -> Suite:
    from spade_envs.evaluation.suites.bfcl_single import BfclLiveSuite

    return BfclLiveSuite()


def _acebench(options: SuiteOptions) -> Suite:
    from spade_envs.evaluation.suites.acebench import AceBenchAgentSuite

    return AceBenchAgentSuite(options.acebench_root, options.user_client, options.user_is_model_under_test)


#: Every suite by name, in table order. Factories import lazily: a missing optional package only fails its suite.
SUITES: dict[str, Callable[[SuiteOptions], Suite]] = {
    "aime25": _aime25,
    "aime26": _aime26,
    "gpqa_diamond": _gpqa,
    "livecodebench_v6": _lcb,
    "rg_math": _rg("rg_math"),
    "rg_algorithmic": _rg("rg_algorithmic"),
    "rg_cognition": _rg("rg_cognition"),
    "rg_logic": _rg("rg_logic"),
    "bfcl_non_live": _bfcl_non_live,
    "bfcl_live": _bfcl_live,
    "bfcl_multi_turn": _bfcl,
    "acebench_agent": _acebench,
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
    "tool_use": ("bfcl_non_live", "bfcl_live", "bfcl_multi_turn", "acebench_agent"),
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


def make_suite(name: str, options: SuiteOptions | None = None) -> Suite:
    """A fresh suite object by registry name."""
    if name not in SUITES:
        raise ValueError(f"unknown suite {name!r}; known: {', '.join(SUITES)}")
    return SUITES[name](options or SuiteOptions())
