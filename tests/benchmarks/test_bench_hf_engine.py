"""``benchmarks/bench_hf_engine.py``: its left-padded baseline answers as the engine does, and a scenario tabulates.

Structure and agreement only; the timings are the benchmark's to print, never asserted.
"""

from __future__ import annotations

import sys
from pathlib import Path

import torch
from transformers import AutoModelForCausalLM

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))

import bench_hf_engine  # noqa: E402

from recipe.spade.cpu.hf_engine import BatchedGenerator, SamplingRequest  # noqa: E402
from recipe.spade.cpu.tiny_model import build_tiny_qwen3  # noqa: E402


def test_the_left_padded_baseline_generates_what_the_engine_generates(tmp_path):
    model = AutoModelForCausalLM.from_pretrained(build_tiny_qwen3(tmp_path / "model"), dtype=torch.float32,
                                                 attn_implementation="sdpa")  # fmt: skip
    requests = [SamplingRequest([407] + [10 + (3 * r + i) % 390 for i in range(n)], k, temperature=0.0,
                                ignore_eos=True) for r, (n, k) in enumerate([(300, 8), (12, 4), (90, 6)])]  # fmt: skip
    before = bench_hf_engine.LeftPadded(model, eos_ids=[], pad_id=406).run_batch(requests)
    now = BatchedGenerator(model, eos_ids=[], pad_id=406).run_batch(requests)
    assert [g.token_ids for g in before] == [g.token_ids for g in now]
    assert [len(g.token_ids) for g in now] == [8, 4, 6]


def test_a_scenario_runs_and_tabulates(capsys):
    assert bench_hf_engine.main(["--repeats", "1", "--scenarios", "8 agent turns"]) == 0
    out = capsys.readouterr().out
    (row,) = [line for line in out.splitlines() if line.startswith("8 agent turns")]
    assert row.split()[3] == "1"  # one group: agent turns of like length
    assert row.split()[-1].endswith("x") and row.split()[-2].endswith("x")
