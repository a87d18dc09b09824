"""``benchmarks/bench_spade_step.py``'s second GRPO baseline: each step's prompts shaped as SPADE's step of that number.

The benchmark itself takes minutes (three verl runs); this checks the part that decides what it compares: which
lengths each step's four prompts get, and that the written prompts have them under the tiny tokenizer's chat template.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pandas as pd
from transformers import AutoTokenizer

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))

import bench_spade_step  # noqa: E402

#: Two steps as the console logger reports them: a design step (designer rows are the longest prompts, agent rows the
#: shortest) and a play-only step.
STEPS = {
    2: {"prompt_length/mean": 860.0, "prompt_length/max": 900.0, "prompt_length/min": 820.0},
    1: {"spade/designer/samples": 4.0, "prompt_length/max": 3990.0, "prompt_length/min": 850.0,
        "prompt_length/mean": 2420.0},
}  # fmt: skip


def test_each_step_gets_its_own_shape_in_order():
    assert bench_spade_step.step_shapes(STEPS) == [[3990.0, 3990.0, 850.0, 850.0], [860.0] * 4]


def test_the_written_prompts_have_those_lengths(tmp_path):
    model = bench_spade_step.build_tiny_qwen3(tmp_path / "model")
    shapes = bench_spade_step.step_shapes(STEPS)
    path = bench_spade_step.write_shaped_dataset(tmp_path / "shaped" / "train.parquet", shapes, model)
    tokenizer = AutoTokenizer.from_pretrained(model)
    frame = pd.read_parquet(path)
    lengths = [len(tokenizer.apply_chat_template(list(p), add_generation_prompt=True)["input_ids"])
               for p in frame["prompt"]]  # fmt: skip
    targets = [t for shape in shapes for t in shape]
    assert len(lengths) == len(targets) == 8
    for length, target in zip(lengths, targets, strict=True):
        assert 0.9 * target <= length <= target  # never over: verl refuses a prompt past max_prompt_length
    assert frame["reward_model"].map(lambda r: r["ground_truth"]).str.isdigit().all()  # still the tiny task
