"""``benchmarks/bench_spade_step.py``'s split of each step into the rollout engine's work and the rest.

The benchmark itself takes minutes (three verl runs); this checks what it computes from the engine's stats file
(``rollout.custom.hf_stats_path``, written by the real server in ``tests/recipe/test_hf_generation_stats.py``).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))

import bench_spade_step  # noqa: E402


def _line(step: int, replica: int, busy: float, generated: int) -> str:
    return json.dumps({"step": step, "replica": replica, "requests": 2, "prompt_tokens": 100,
                       "generated_tokens": generated, "busy_s": busy})  # fmt: skip


def test_replicas_are_summed_per_step_and_attached_to_the_steps_logged(tmp_path):
    path = tmp_path / "gen.jsonl"
    path.write_text("\n".join([_line(0, 0, 0.0, 0), _line(1, 0, 0.5, 10), _line(1, 1, 0.25, 6), _line(2, 0, 1.0, 3)]))
    assert bench_spade_step.generation_work(path)[1] == {"requests": 4, "prompt_tokens": 200,
                                                         "generated_tokens": 16, "busy_s": 0.75}  # fmt: skip
    steps = bench_spade_step._with_generation({1: {"timing_s/step": 2.0}, 2: {"timing_s/step": 3.0}}, path)
    assert steps[1]["gen/busy_s"] == 0.75 and steps[2]["gen/generated_tokens"] == 3
    assert 0 not in steps  # a step the console did not log (verl's step 0 sync) is not invented


def test_the_rest_of_a_step_is_its_time_less_the_engines_per_trained_token():
    base = [{"timing_s/step": 2.0, "gen/busy_s": 0.5, "perf/total_num_tokens": 1000.0, "gen/requests": 8,
             "gen/prompt_tokens": 4000, "gen/generated_tokens": 100}]  # fmt: skip
    spade = [{**base[0], "timing_s/step": 3.0, "gen/busy_s": 1.2, "perf/total_num_tokens": 1200.0}]
    assert bench_spade_step._idle_per_token(base) == pytest.approx(1.5)
    assert bench_spade_step._idle_per_token(spade) == pytest.approx(1.5)  # 1.8 s over 1.2k tokens
    table = bench_spade_step.generation_table([("base", base), ("spade", spade), ("none", [])], base)
    rows = {line.split("  ")[0]: line.split() for line in table.splitlines()[2:]}
    assert set(rows) == {"base", "spade"}  # a run with no steps of its kind is left out
    assert rows["spade"][-2:] == ["2.00x", "1.00x"]  # busy 1.0 vs 0.5 s per 1k tokens; the rest alike
    assert rows["base"][-2:] == ["1.00x", "1.00x"]
