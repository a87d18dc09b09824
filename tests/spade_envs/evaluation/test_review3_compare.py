"""Review 3: ``compare`` flags runs that stopped, failed samples or had refusals, and adjusts for multiplicity."""

from __future__ import annotations

import json

import numpy as np
import pytest
from conftest import StubOpenAI
from eval_oracle import DATA, Oracle

from spade_envs.evaluation.bootstrap import holm, stratified_bootstrap
from spade_envs.evaluation.cli import main
from spade_envs.evaluation.suites.math import GpqaDiamondSuite

OVERFLOW = ("This model's maximum context length is 100 tokens. However, you requested 164 tokens (100 in the "
            "messages, 64 in the completion). Please reduce the length of the messages or completion.")  # fmt: skip


def _gpqa(out, responder, model):
    server = StubOpenAI(responder)
    try:
        return main(["--base-url", server.base_url, "--model", model, "--suite", "gpqa_diamond", "--data-dir",
                     str(DATA), "--out", str(out), "--quiet", "--retries", "0", "--samples", "2"])  # fmt: skip
    finally:
        server.close()


@pytest.fixture(scope="module")
def folders(tmp_path_factory):
    root = tmp_path_factory.mktemp("review3_compare")
    good = Oracle()
    first = GpqaDiamondSuite().load(DATA)[0].prompt

    def first_only(body):  # every question but the first fails on a 503: an incomplete run
        return good(body) if first in body["messages"][-1]["content"] else (503, "overloaded")

    def overflow_first(body):  # the first question is over the context length: scored wrong, counted
        return (400, json.dumps({"message": OVERFLOW})) if first in body["messages"][-1]["content"] else good(body)

    codes = {name: _gpqa(root / name, responder, model) for name, responder, model in [
        ("stopped", lambda _b: (404, '{"error": {"message": "The model `base` does not exist."}}'), "base"),
        ("base", good, "base"), ("run", good, "run"), ("flaky", first_only, "run"), ("long", overflow_first, "run"),
    ]}  # fmt: skip
    assert codes == {"stopped": 1, "base": 0, "run": 0, "flaky": 1, "long": 0}
    return root


def _compare(folders, base, run, capsys):
    code = main(["compare", str(folders / base), str(folders / run)])
    return code, capsys.readouterr().out


def _gpqa_row(table):
    line = next(line for line in table.splitlines() if line.startswith("| GPQA"))
    return [cell.strip() for cell in line.strip("|").split("|")]


def test_a_base_that_stopped_on_a_404_is_flagged_not_published_as_all_wrong(folders, capsys):
    code, table = _compare(folders, "stopped", "run", capsys)
    row = _gpqa_row(table)
    assert code == 0 and row[0] == "GPQA-Diamond (incomplete)" and row[1] == "-" and row[3] == "-"
    assert "- note: GPQA-Diamond: base is incomplete: stopped:" in table and "HTTP 404" in table
    assert "0 of 6 samples scored" in table


def test_an_incomplete_run_is_flagged_with_its_failures(folders, capsys):
    code, table = _compare(folders, "base", "flaky", capsys)
    row = _gpqa_row(table)
    assert code == 0 and row[0] == "GPQA-Diamond (incomplete)" and row[1:3] == ["100.0", "100.0"]
    assert "GPQA-Diamond: run is incomplete: 2 of 6 samples scored, 4 failed (rerun to retry them)" in table


def test_refused_samples_scored_wrong_are_counted_under_the_table(folders, capsys):
    code, table = _compare(folders, "base", "long", capsys)
    assert code == 0 and _gpqa_row(table)[0] == "GPQA-Diamond"  # complete: not flagged, but its refusals noted
    assert "GPQA-Diamond: run has 2 of 6 samples the endpoint refused (over the context length), scored wrong" in table


def test_the_table_says_its_intervals_are_per_row_and_gives_holm_adjusted_p_values(folders, capsys):
    code, table = _compare(folders, "base", "run", capsys)
    assert code == 0 and "p (Holm)" in table.splitlines()[0] and _gpqa_row(table)[-1] == "1.00"
    assert "not adjusted for the 2 rows" in table and "family-wise" in table


def test_holm_adjusts_as_the_step_down_procedure_does():
    # sorted p 0.01, 0.02, 0.03, 0.5: x4, x3 (max with before), x2, x1
    assert holm([0.03, 0.01, 0.5, 0.02]) == pytest.approx([0.06, 0.04, 0.5, 0.06])
    assert holm([0.4, 0.6]) == pytest.approx([0.8, 0.8]) and holm([]) == []


def test_holm_keeps_the_family_wise_error_near_five_percent_at_the_papers_sizes():
    """Review 3's simulation: the same model twice at the paper's twelve suite sizes. Unadjusted, 44% of tables
    show a row whose interval excludes zero; with Holm-adjusted bootstrap p-values, about 5%."""
    sizes = [(30, 64), (30, 64), (198, 8), (1055, 1), (31, 8), (36, 8), (24, 8), (9, 8), (800, 1), (50, 1),
             (1390, 1), (2251, 1)]  # fmt: skip
    tables, rng = 300, np.random.default_rng(1)
    p = np.zeros((tables, len(sizes)))
    unadjusted = np.zeros((tables, len(sizes)), bool)
    for j, (n, k) in enumerate(sizes):
        difficulty = rng.beta(0.7, 0.7, size=(tables, n))
        diff = (rng.binomial(k, difficulty) - rng.binomial(k, difficulty)) / k
        boot = stratified_bootstrap([diff], [1.0], draws=400, seed=0)
        low, high = boot.interval()
        unadjusted[:, j] = (low > 0) | (high < 0)
        p[:, j] = boot.p_value()
    adjusted = np.array([holm(list(row)) for row in p])
    assert unadjusted.any(axis=1).mean() > 0.3  # the problem the adjustment answers
    assert (adjusted < 0.05).any(axis=1).mean() <= 0.08


def test_a_real_difference_survives_the_adjustment():
    rng = np.random.default_rng(0)
    base = rng.binomial(1, 0.4, size=198).astype(float)
    run = np.where(rng.random(198) < 0.3, 1.0, base)  # about +0.18
    p = stratified_bootstrap([run - base], [1.0], draws=1000, seed=0).p_value()
    assert holm([float(p)] + [0.5] * 11)[0] < 0.05
