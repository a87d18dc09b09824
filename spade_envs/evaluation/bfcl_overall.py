"""BFCL-v4's "Overall Acc", the paper's BFCL-v4 column, from the three BFCL suites' scores.

bfcl-eval 2026.3.23 (``eval_checker/eval_runner_helper.py``) weighs, in percent: non-live 10 (its Non-Live
Overall Acc), live 10 (Live Overall Acc), irrelevance 10 (the unweighted mean of non-live and live irrelevance),
multi-turn 30 (Multi Turn Overall Acc) and agentic 40 (web search and memory). A category that was not evaluated
counts as 0 there. The reference harness (``spade-rl/spade`` ``eval_offline``, ``configs/tool_use.yaml``) runs
``bfcl evaluate`` on non-live, live and multi-turn only and reports this Overall Acc, so its agentic part is 0; the
same holds here, where web search (SerpAPI) and memory (a hub embedding model) cannot run offline.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from spade_envs.evaluation.records import SampleRecord

__all__ = ["PARTS", "WEIGHTS", "overall_aggregate", "overall_from_scores"]

#: The suites whose scores make up the overall accuracy.
PARTS = ("bfcl_non_live", "bfcl_live", "bfcl_multi_turn")
#: BFCL's weights (percent); ``agentic`` is never run here, so it always contributes 0.
WEIGHTS = {"non_live": 10, "live": 10, "irrelevance": 10, "multi_turn": 30, "agentic": 40}


def overall_from_scores(non_live: Mapping[str, float], live: Mapping[str, float], multi_turn: Mapping[str, float]
                        ) -> float:  # fmt: skip
    """Overall accuracy from the three suites' ``aggregate`` dicts (a missing part counts 0, as in BFCL)."""
    irrelevance = (non_live.get("irrelevance", 0.0) + live.get("live_irrelevance", 0.0)) / 2
    parts = {"non_live": non_live.get("score", 0.0), "live": live.get("score", 0.0), "irrelevance": irrelevance,
             "multi_turn": multi_turn.get("score", 0.0), "agentic": 0.0}  # fmt: skip
    return sum(WEIGHTS[k] * v for k, v in parts.items()) / sum(WEIGHTS.values())


def overall_aggregate(records: Sequence[SampleRecord]) -> dict[str, float]:
    """``{"score": overall accuracy}`` over records of the three suites (told apart by ``record.suite``)."""
    from spade_envs.evaluation.suites.bfcl import BfclMultiTurnSuite
    from spade_envs.evaluation.suites.bfcl_single import BfclLiveSuite, BfclNonLiveSuite

    by_suite: dict[str, list[SampleRecord]] = {name: [] for name in PARTS}
    for record in records:
        by_suite.setdefault(record.suite, []).append(record)
    return {"score": overall_from_scores(BfclNonLiveSuite().aggregate(by_suite["bfcl_non_live"]),
                                         BfclLiveSuite().aggregate(by_suite["bfcl_live"]),
                                         BfclMultiTurnSuite().aggregate(by_suite["bfcl_multi_turn"]))}  # fmt: skip
