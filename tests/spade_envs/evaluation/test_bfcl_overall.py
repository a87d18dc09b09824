"""The paper's BFCL-v4 column is BFCL's "Overall Acc": ours against bfcl-eval's own leaderboard code, and in compare."""

from __future__ import annotations

import csv
import importlib
import json
import sys
import types

import pytest

from spade_envs.evaluation.bfcl_overall import overall_aggregate
from spade_envs.evaluation.compare import compare_runs, format_comparison
from spade_envs.evaluation.records import SampleRecord
from spade_envs.evaluation.registry import make_suite
from spade_envs.evaluation.suites.acebench import AceBenchAgentSuite
from spade_envs.evaluation.suites.bfcl import CATEGORIES as MULTI_TURN
from spade_envs.evaluation.suites.bfcl_single import LIVE, NON_LIVE
from spade_envs.evaluation.suites.livecodebench import LiveCodeBenchSuite

#: Per category: (entries, right) -- distinct accuracies and sizes, so that every weight matters.
COUNTS = {"simple_python": (8, 7), "simple_java": (4, 1), "simple_javascript": (5, 2), "multiple": (6, 3),
          "parallel": (4, 4), "parallel_multiple": (5, 1), "irrelevance": (8, 6), "live_simple": (7, 5),
          "live_multiple": (9, 4), "live_parallel": (3, 0), "live_parallel_multiple": (2, 1),
          "live_irrelevance": (6, 5), "live_relevance": (2, 2), "multi_turn_base": (5, 2),
          "multi_turn_miss_func": (4, 1), "multi_turn_miss_param": (6, 3),
          "multi_turn_long_context": (3, 1)}  # fmt: skip
SUITE_OF = {**dict.fromkeys(NON_LIVE, "bfcl_non_live"), **dict.fromkeys(LIVE, "bfcl_live"),
            **dict.fromkeys(MULTI_TURN, "bfcl_multi_turn")}  # fmt: skip


def _records(shift: int = 0) -> dict[tuple[str, int], SampleRecord]:
    out = {}
    for category, (n, right) in COUNTS.items():
        for i in range(n):
            score = float(i < min(n, right + shift))
            out[(f"{category}_{i}", 0)] = SampleRecord(SUITE_OF[category], f"{category}_{i}", 0, score,
                                                       detail={"category": category})  # fmt: skip
    return out


def bfcl_overall_acc(tmp_path) -> float:
    """BFCL's own leaderboard code on the same per-category accuracies: ``Overall Acc`` of data_overall.csv."""
    registry = types.ModuleType("bfcl_eval.constants.model_config")  # the vendor-SDK registry, absent offline
    registry.MODEL_CONFIG_MAPPING = {"spade-test": types.SimpleNamespace(  # type: ignore[attr-defined]
        display_name="spade-test", url="", input_price=None, output_price=None, org="", license="",
        is_fc_model=True, underscore_to_dot=False)}  # fmt: skip
    with pytest.MonkeyPatch.context() as patch:
        patch.setitem(sys.modules, "bfcl_eval.constants.model_config", registry)
        patch.delitem(sys.modules, "bfcl_eval.eval_checker.eval_runner_helper", raising=False)
        helper = importlib.import_module("bfcl_eval.eval_checker.eval_runner_helper")
        sys.modules.pop("bfcl_eval.eval_checker.eval_runner_helper")
        table = {"spade-test": {c: {"accuracy": right / n, "total_count": n} for c, (n, right) in COUNTS.items()}}
        # agentic categories we cannot run: scored 0, as BFCL scores a category it did not evaluate (without it
        # reading their data files to count the entries, which takes seconds)
        for category in ("web_search_base", "web_search_no_snippet", "memory_kv", "memory_vector", "memory_rec_sum"):
            table["spade-test"][category] = {"accuracy": 0.0, "total_count": 1}
        helper.generate_leaderboard_csv(table, tmp_path)
    with open(tmp_path / "data_overall.csv", newline="") as handle:
        row = next(csv.DictReader(handle))
    return float(str(row["Overall Acc"]).rstrip("%")) / 100


def test_our_overall_accuracy_is_bfcls_overall_acc(tmp_path):
    ours = overall_aggregate(list(_records().values()))["score"]
    assert ours == pytest.approx(bfcl_overall_acc(tmp_path), abs=5e-5)  # BFCL's CSV rounds to 0.01%


def _write_run(path, records):
    path.mkdir()
    suites = {}
    for name in ("bfcl_non_live", "bfcl_live", "bfcl_multi_turn"):
        mine = [r for r in records.values() if r.suite == name]
        stamped = [SampleRecord(**{**r.to_json(), "protocol": "p"}) for r in mine]
        (path / f"{name}.jsonl").write_text("".join(json.dumps(r.to_json()) + "\n" for r in stamped))
        scores = make_suite(name).aggregate(mine)
        suites[name] = {"scores": scores, "items": len(mine), "sampling": {}, "data_sha256": {}, "provenance": {},
                        "protocol_sha256": "p"}  # fmt: skip
    (path / "results.json").write_text(json.dumps({"settings": {"limit": None}, "versions": {}, "suites": suites}))


def test_compare_reports_bfcl_overall_as_the_bfcl_v4_row_and_keeps_multi_turn_as_its_own(tmp_path):
    base, run = _records(), _records(shift=1)  # the run gets one more entry right in every category
    _write_run(tmp_path / "base", base)
    _write_run(tmp_path / "run", run)
    rows = {row.label: row for row in compare_runs(tmp_path / "base", tmp_path / "run", draws=200).rows}
    assert rows["BFCL-v4"].base == pytest.approx(overall_aggregate(list(base.values()))["score"])
    assert rows["BFCL-v4"].run == pytest.approx(overall_aggregate(list(run.values()))["score"])
    assert rows["BFCL-v4"].common_items == len(base) and rows["BFCL-v4"].low < rows["BFCL-v4"].delta
    assert {"BFCL-v4 MT", "BFCL-v4 non-live", "BFCL-v4 live"} <= set(rows)
    table = format_comparison(compare_runs(tmp_path / "base", tmp_path / "run", draws=200), "b", "r")
    assert table.index("| BFCL-v4 ") < table.index("| BFCL-v4 MT ")


def test_protocol_defaults_follow_the_reference_harness():
    """spade-rl/spade eval_offline configs: LiveCodeBench release_v6 at 16,384 tokens; ACEBench at 16,384."""
    lcb, ace = LiveCodeBenchSuite.default_sampling, AceBenchAgentSuite.default_sampling
    assert (lcb.n_samples, lcb.temperature, lcb.top_p, lcb.max_tokens) == (1, 0.2, 0.95, 16384)
    assert "test.jsonl, test2.jsonl, ..., test6.jsonl concatenated" in LiveCodeBenchSuite.where
    assert (ace.n_samples, ace.temperature, ace.top_p, ace.max_tokens) == (1, 0.7, 1.0, 16384)
