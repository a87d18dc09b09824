"""CPU backend: hf rollout generation throughput (batched vs one request at a time), and seconds per GRPO step.

Run: ``.venv/bin/python benchmarks/bench_cpu_backend.py [--requests 16] [--tokens 32] [--grpo]``. Prints tables.
``--grpo`` also runs verl's real trainer (recipe.spade.laptop.main_cpu) for 3 steps per configuration (V1 and the
legacy trainer, two response lengths) and reports the mean time of steps 2-3 (step 1 carries warm-up).
"""

from __future__ import annotations

import argparse
import asyncio
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch
from transformers import AutoModelForCausalLM

from recipe.spade.cpu.hf_engine import BatchedGenerator, SamplingRequest
from recipe.spade.cpu.tiny_model import build_tiny_qwen3


def generation(requests: int, tokens: int, model_dir: Path) -> list[tuple[str, float, float]]:
    torch.set_num_threads(1)
    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32, attn_implementation="sdpa")
    engine = BatchedGenerator(model, eos_ids=[], pad_id=406, max_batch=requests)  # no EOS: every row runs to the end
    prompts = [[407] + [(i * 7 + j) % 300 for j in range(20 + i % 13)] + [408] for i in range(requests)]

    def make() -> list[SamplingRequest]:
        return [SamplingRequest(p, tokens, temperature=1.0, logprobs=True) for p in prompts]

    engine.run_batch(make()[:2])  # warm-up
    start = time.perf_counter()
    for r in make():
        engine.run_batch([r])
    one_by_one = time.perf_counter() - start

    async def together() -> None:
        await asyncio.gather(*(engine.generate(r) for r in make()))

    start = time.perf_counter()
    asyncio.run(together())
    batched = time.perf_counter() - start
    total = requests * tokens
    return [
        ("one request at a time", one_by_one, total / one_by_one),
        ("batched (concurrent)", batched, total / batched),
    ]


def grpo_step_seconds(use_v1: bool, response_length: int, work: Path) -> float:
    command = [sys.executable, "-m", "recipe.spade.laptop.main_cpu", f"spade_cpu.tiny_model_dir={work / 'model'}",
               f"spade_cpu.tiny_data_dir={work / 'data'}", "trainer.total_training_steps=3",
               f"trainer.use_v1={str(use_v1).lower()}", f"data.max_response_length={response_length}",
               f"trainer.default_local_dir={work / 'ckpt'}"]  # fmt: skip
    out = subprocess.run(command, capture_output=True, text=True, timeout=900, cwd=work)
    times = [float(t) for t in re.findall(r"timing_s/step:([\d.]+)", out.stdout + out.stderr)]
    if out.returncode != 0 or len(times) < 3:
        raise RuntimeError(f"GRPO run failed (rc {out.returncode}): {(out.stdout + out.stderr)[-1500:]}")
    return statistics.mean(times[1:3])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=16)
    parser.add_argument("--tokens", type=int, default=32)
    parser.add_argument("--grpo", action="store_true", help="also time GRPO steps of verl's trainer (minutes)")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        model_dir = build_tiny_qwen3(work / "model")
        rows = generation(args.requests, args.tokens, model_dir)
        print(f"hf rollout, tiny Qwen3, {args.requests} requests x {args.tokens} tokens, 1 torch thread")
        print(f"{'mode':<24}{'seconds':>10}{'tokens/s':>12}")
        for name, seconds, rate in rows:
            print(f"{name:<24}{seconds:>10.2f}{rate:>12.0f}")
        print(f"batched / one-at-a-time throughput: {rows[1][2] / rows[0][2]:.1f}x")
        if args.grpo:
            print(f"\n{'trainer':<10}{'response length':>16}{'s/step (steps 2-3)':>20}")
            for use_v1 in (True, False):
                for length in (16, 64):
                    seconds = grpo_step_seconds(use_v1, length, work)
                    print(f"{'V1' if use_v1 else 'legacy':<10}{length:>16}{seconds:>20.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
