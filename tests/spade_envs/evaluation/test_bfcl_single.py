"""BFCL non-live and live: real entries judged by bfcl-eval's own AST checker, and BFCL's headline formulas."""

from __future__ import annotations

import sys

import pytest
from eval_oracle import BFCL_LIVE_IDS, BFCL_NON_LIVE_IDS, bfcl_single_calls

from spade_envs.evaluation import GROUPS, SUITES, SampleRecord
from spade_envs.evaluation.scorer_pool import shared_pool
from spade_envs.evaluation.suites.bfcl_single import (
    BfclLiveSuite,
    BfclNonLiveSuite,
    check_entry,
    decoded_calls,
)


def _verdict(item, calls):
    decoded = decoded_calls([(c["name"], c["arguments"]) for c in calls])
    pool = shared_pool(("bfcl_eval",))
    return pool.call(check_entry, item.meta["category"], item.meta["entry"]["function"], decoded, item.answer,
                     timeout_s=60.0)  # fmt: skip


@pytest.fixture(scope="module")
def items():
    loaded = BfclNonLiveSuite(BFCL_NON_LIVE_IDS).load(None) + BfclLiveSuite(BFCL_LIVE_IDS).load(None)
    return {item.id: item for item in loaded}


def test_the_suites_are_registered_in_the_tool_use_group():
    assert {"bfcl_non_live", "bfcl_live"} <= set(SUITES) and GROUPS["tool_use"][:2] == ("bfcl_non_live", "bfcl_live")
    assert len(BfclNonLiveSuite().load(None)) == 400 + 100 + 50 + 200 + 200 + 200 + 240
    assert {i.meta["category"] for i in BfclLiveSuite().load(None)} == {"live_simple", "live_multiple", "live_parallel",
                                                                         "live_parallel_multiple", "live_irrelevance",
                                                                         "live_relevance"}  # fmt: skip


CASES = [
    # (entry, change to the gold calls, BFCL's verdict)
    ("live_simple_0-0-0", lambda c: c, True),
    ("live_simple_0-0-0", lambda c: [{**c[0], "arguments": {**c[0]["arguments"], "user_id": "7890"}}], False),
    ("live_simple_0-0-0", lambda c: [{**c[0], "arguments": {"user_id": 7890}}], False),  # "special" must be "black"
    ("live_simple_0-0-0", lambda c: c + c, False),  # simple: exactly one call
    ("parallel_0", lambda c: c[::-1], True),  # parallel: any order
    ("parallel_0", lambda c: c[:1], False),
    ("simple_java_0", lambda c: c, True),
    ("simple_javascript_0", lambda c: [{**c[0], "arguments": {**c[0]["arguments"], "isComplete": "false"}}], False),
    ("irrelevance_0", lambda c: c, True),
    ("live_relevance_0-0-0", lambda c: [], False),
]


@pytest.mark.parametrize(("entry", "change", "valid"), CASES, ids=[f"{e}-{i}" for i, (e, _c, _v) in enumerate(CASES)])
def test_bfcl_checker_verdicts_on_real_entries(items, entry, change, valid):
    assert _verdict(items[entry], change(bfcl_single_calls(items[entry])))["valid"] is valid


def test_the_checker_never_patches_the_evaluations_own_process(items):
    _verdict(items["simple_python_0"], bfcl_single_calls(items["simple_python_0"]))
    registry = sys.modules.get("bfcl_eval.constants.model_config")
    assert registry is None or hasattr(registry, "ModelConfig")  # the real registry, or none at all


def _records(scores):
    return [SampleRecord("s", f"{cat}_{i}", 0, score, detail={"category": cat}) for cat, values in scores.items()
            for i, score in enumerate(values)]  # fmt: skip


def test_non_live_is_the_unweighted_mean_of_simple_multiple_parallel_parallel_multiple():
    records = _records({"simple_python": [1, 1], "simple_java": [0], "simple_javascript": [1, 0], "multiple": [1],
                        "parallel": [0, 0, 1, 1], "parallel_multiple": [1], "irrelevance": [0, 0]})  # fmt: skip
    scores = BfclNonLiveSuite().aggregate(records)
    simple = (1 + 0 + 0.5) / 3
    assert scores["simple"] == pytest.approx(simple)
    assert scores["score"] == pytest.approx((simple + 1 + 0.5 + 1) / 4)  # irrelevance is not in it
    assert scores["irrelevance"] == 0


def test_live_is_the_entry_weighted_accuracy_over_the_live_ast_categories():
    records = _records(
        {"live_simple": [1, 0, 0], "live_multiple": [1], "live_irrelevance": [1, 1], "live_relevance": [0]}
    )
    scores = BfclLiveSuite().aggregate(records)
    assert scores["score"] == pytest.approx(2 / 4)  # not (1/3 + 1) / 2
    assert scores["live_irrelevance"] == 1 and scores["live_relevance"] == 0
