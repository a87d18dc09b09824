"""Adversarial step logs: a damaged line that makes the JSON decoder itself fail is a StepLogError naming path:line."""

from __future__ import annotations

import pytest

from spade_envs.browse.step_log import StepLogError, cut_after

DEEP = "[" * 100_000 + "]" * 100_000  # deeper than the decoder's recursion limit
HUGE = "9" * 5_000  # more digits than int() converts by default


@pytest.mark.parametrize("value", [DEEP, HUGE], ids=["deep_nesting", "huge_integer"])
def test_damaged_middle_line_that_breaks_the_decoder_is_a_step_log_error(tmp_path, value):
    log = tmp_path / "spade_metrics.jsonl"
    log.write_text('{"step": 1, "x": ' + value + '}\n{"step": 2}\n', encoding="utf-8")
    with pytest.raises(StepLogError, match=r"spade_metrics\.jsonl:1: not valid JSON"):
        cut_after(log, "step", 3)


@pytest.mark.parametrize("value", [DEEP[:50_000], HUGE], ids=["deep_nesting", "huge_integer"])
def test_unfinished_last_line_that_breaks_the_decoder_is_dropped(tmp_path, value):
    log = tmp_path / "spade_metrics.jsonl"
    log.write_text('{"step": 1}\n{"step": 2, "x": ' + value, encoding="utf-8")
    assert cut_after(log, "step", 3) == [1]
    assert log.read_text(encoding="utf-8") == '{"step": 1}\n'
