"""``spade-eval compare`` on two results folders written by real runs against the stub server."""

from __future__ import annotations

import json
import random
import re

import pytest
from conftest import StubOpenAI
from eval_oracle import ACEBENCH, BFCL_IDS, DATA, RG_TASKS, Oracle

from spade_envs.evaluation import SUITES, SampleRecord
from spade_envs.evaluation.cli import main
from spade_envs.evaluation.compare import compare_runs, paired_bootstrap
from spade_envs.evaluation.suites.bfcl import BfclMultiTurnSuite
from spade_envs.evaluation.suites.math import AimeSuite
from spade_envs.evaluation.suites.reasoning_gym import INSTRUCTION, ReasoningGymSuite

SUITE_LIST = "aime25,aime26,gpqa_diamond,rg_logic,bfcl_multi_turn,acebench_agent"


class PartlyWrong:
    """The oracle, except: the first AIME-25 problem, all GPQA questions and all ``aiw`` episodes are answered wrong."""

    def __init__(self) -> None:
        self.good, self.bad = Oracle(), Oracle(corrupt=True)
        self.aime_first = AimeSuite(2025).load(DATA)[0].prompt
        suite = ReasoningGymSuite("rg_logic", tasks=["aiw"])
        item = suite.load(None)[0]
        self.aiw = {f"{suite.instance(item, k, 2)[1]['question']}\n\n{INSTRUCTION}" for k in range(2)}

    def __call__(self, body):
        users = [m["content"] for m in body["messages"] if m["role"] == "user"]
        first = users[0] if users else ""
        wrong = first == self.aime_first or first in self.aiw or re.search(r"^A\) ", first, re.M) is not None
        return (self.bad if wrong else self.good)(body)


def _run(out, responder, suites=SUITE_LIST, extra=()):
    server = StubOpenAI(responder)
    try:
        argv = ["--base-url", server.base_url, "--model", "m", "--suite", suites, "--out", str(out), "--data-dir",
                str(DATA), "--acebench-root", str(ACEBENCH), "--samples", "2", "--quiet", "--user-base-url",
                server.base_url, "--user-model", "fixed-simulator", *extra]  # fmt: skip
        assert main(argv) == 0
    finally:
        server.close()


@pytest.fixture(scope="module")
def folders(tmp_path_factory):
    root = tmp_path_factory.mktemp("compare")
    with pytest.MonkeyPatch.context() as patch:
        patch.setitem(SUITES, "rg_logic", lambda _o: ReasoningGymSuite("rg_logic", tasks=RG_TASKS["rg_logic"]))
        patch.setitem(SUITES, "bfcl_multi_turn", lambda _o: BfclMultiTurnSuite(BFCL_IDS))
        _run(root / "base", Oracle())
        _run(root / "run", PartlyWrong())
        _run(root / "hot", Oracle(), "aime26", ["--temperature", "0.5"])
        _run(root / "limited", Oracle(), "aime25", ["--limit", "1"])
        patch.setitem(SUITES, "rg_logic", lambda _o: ReasoningGymSuite("rg_logic", tasks=RG_TASKS["rg_logic"],
                                                                      split="modules"))  # fmt: skip
        _run(root / "modules", Oracle(), "rg_logic")
    return root


def _row(table: str, label: str) -> list[str]:
    line = next(line for line in table.splitlines() if line.startswith(f"| {label} "))
    return [cell.strip() for cell in line.strip("|").split("|")]


def test_compare_prints_and_writes_the_paper_table_with_hand_checked_deltas(folders, capsys):
    out = folders / "report" / "compare.md"
    assert main(["compare", str(folders / "base"), str(folders / "run"), "--out", str(out)]) == 0
    table = capsys.readouterr().out
    assert out.read_text() == table
    labels = [line.split("|")[1].strip() for line in table.splitlines() if line.startswith("| ")][1:]
    assert labels == ["AIME-25", "AIME-26", "GPQA-Diamond", "LCB v6", "RG-Math", "RG-Algorithmic", "RG-Cognition",
                      "RG-Logic", "**Average (4 of 8)**", "BFCL-v4 MT", "ACEBench-Agent"]  # fmt: skip
    # base: every answer right; run: 1 of 3 AIME-25 problems, all GPQA and one of two RG-Logic tasks wrong
    assert _row(table, "AIME-25")[:4] == ["AIME-25", "100.0", "66.7", "-33.3"]
    assert _row(table, "AIME-26")[:5] == ["AIME-26", "100.0", "100.0", "+0.0", "[+0.0, +0.0]"]
    assert _row(table, "GPQA-Diamond")[:6] == ["GPQA-Diamond", "100.0", "0.0", "-100.0", "[-100.0, -100.0]", "3"]
    assert _row(table, "AIME-26")[5] == "2"
    assert _row(table, "RG-Logic")[:4] == ["RG-Logic", "100.0", "50.0", "-50.0"]
    assert _row(table, "LCB v6")[1:4] == ["-", "-", "-"]
    assert _row(table, "**Average (4 of 8)**")[1:4] == ["100.0", "54.2", "-45.8"]  # (-1/3 + 0 - 1 - 1/2) / 4
    assert _row(table, "BFCL-v4 MT")[1:4] == ["100.0", "100.0", "+0.0"]
    assert _row(table, "ACEBench-Agent")[1:4] == ["100.0", "100.0", "+0.0"]
    assert "the average covers the 4 of the eight benchmarks" in table
    assert (folders / "report" / "compare.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_each_interval_contains_the_true_delta(folders):
    rows = {row.label: row for row in compare_runs(folders / "base", folders / "run").rows}
    for label, true_delta in [("AIME-25", -1 / 3), ("RG-Logic", -0.5), ("GPQA-Diamond", -1.0), ("AIME-26", 0.0)]:
        row = rows[label]
        assert row.delta == pytest.approx(true_delta) == row.common_delta
        assert row.low - 1e-9 <= true_delta <= row.high + 1e-9
    assert rows["AIME-25"].low < rows["AIME-25"].high  # 3 items, one wrong: the draws disagree
    assert compare_runs(folders / "base", folders / "run").rows[0] == rows["AIME-25"]  # seeded: the same table


def test_the_paired_bootstrap_interval_covers_a_known_shift_and_excludes_zero():
    """200 items, 20 flipped from wrong to right: the delta is exactly +0.1 and the interval is paired-tight."""
    rng = random.Random(7)
    base_scores = [float(rng.random() < 0.5) for _ in range(200)]
    flipped = [i for i, s in enumerate(base_scores) if s == 0.0][:20]
    run_scores = [1.0 if i in flipped else s for i, s in enumerate(base_scores)]

    def records(scores):
        return {(f"q{i}", 0): SampleRecord("s", f"q{i}", 0, s) for i, s in enumerate(scores)}

    mean = lambda rs: {"score": sum(r.score for r in rs) / len(rs)}  # noqa: E731
    delta, boot, n = paired_bootstrap(records(base_scores), records(run_scores), mean, draws=1000, seed=3)
    low, high = boot.interval()
    assert n == 200 and delta == pytest.approx(0.1)
    assert 0.0 < low < 0.1 < high < 0.2  # unpaired, each run's own spread (about +-0.07) would reach below zero


def test_compare_refuses_different_protocols_unless_asked_and_then_notes_them(folders, capsys):
    assert main(["compare", str(folders / "base"), str(folders / "hot")]) == 2
    err = capsys.readouterr().err
    assert "refusing to compare" in err and "aime26: sampling differs" in err and "'temperature': 0.5" in err
    assert main(["compare", str(folders / "base"), str(folders / "modules")]) == 2
    err = capsys.readouterr().err
    assert "rg_logic: split differs (base paper, run modules)" in err and "split_sha256 differs" in err
    assert main(["compare", str(folders / "base"), str(folders / "limited")]) == 2
    assert "--limit differs (base None, run 1)" in capsys.readouterr().err
    assert main(["compare", str(folders / "limited"), str(folders / "limited")]) == 0
    assert "both runs used --limit 1" in capsys.readouterr().out
    assert main(["compare", str(folders / "base"), str(folders / "hot"), "--allow-mismatch"]) == 0
    table = capsys.readouterr().out
    assert "- note: protocol differs (compared anyway): aime26: sampling differs" in table
    assert "only the base run has" in table


def test_compare_needs_two_results_folders(tmp_path, capsys):
    assert main(["compare", str(tmp_path), str(tmp_path)]) == 2
    assert "results.json does not exist" in capsys.readouterr().err


def test_results_json_of_a_run_carries_what_compare_checks(folders):
    results = json.loads((folders / "base" / "results.json").read_text())
    rg = results["suites"]["rg_logic"]
    assert rg["provenance"]["split"] == "paper" and len(rg["provenance"]["split_sha256"]) == 64
    assert all("sampling" in suite and "data_sha256" in suite for suite in results["suites"].values())
