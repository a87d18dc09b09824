"""Seconds of one mini-batch through verl 0.9.1's FSDP engine on CPU, split into micro-batches of 2 rows or 1.

Run: ``VERL_PLATFORM=cpu .venv/bin/python benchmarks/bench_cpu_micro_batches.py [--bf16] [--repeats 3]``. Prints a
table. About a minute. The engine, batch and loss are those of ``tests/recipe/micro_batch_probe.py`` (verl's
``FSDPEngineWithLMHead.forward_backward_batch`` and ``ppo_loss`` on the tiny random Qwen3, one torch thread as the
CPU launchers' trainer workers run); "pairs, by length" is the same rows reordered so that pairs hold similar
lengths, what a length-grouping partitioner would give. Best of ``--repeats`` runs; docs/cpu.md records a run.
"""

from __future__ import annotations

import argparse
import functools
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "recipe"))

import micro_batch_probe as probe  # noqa: E402  (sets VERL_PLATFORM=cpu before verl is imported)
import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
from transformers import AutoModelForCausalLM  # noqa: E402
from verl.utils import tensordict_utils as tu  # noqa: E402
from verl.utils.config import omega_conf_to_dataclass  # noqa: E402
from verl.workers.utils.losses import ppo_loss  # noqa: E402

from spade_envs.cli.table import format_table  # noqa: E402

DESIGNER, AGENT = [[3500, 64], [3450, 64]], [[800, 64], [850, 64]]
#: name: (rows in mini-batch order, rows per micro-batch)
CASES = {
    "design step, pairs (designer with agent)": ([DESIGNER[0], AGENT[0], DESIGNER[1], AGENT[1]], 2),
    "design step, pairs by length": ([*DESIGNER, *AGENT], 2),
    "design step, one row each": ([*DESIGNER, *AGENT], 1),
    "two equal rows, pair": ([[3500, 64], [3500, 64]], 2),
    "two equal rows, one each": ([[3500, 64], [3500, 64]], 1),
    "GRPO 4 x ~1,480, pairs": ([[1400, 64], [1430, 64], [1380, 64], [1450, 64]], 2),
    "GRPO 4 x ~1,480, one each": ([[1400, 64], [1430, 64], [1380, 64], [1450, 64]], 1),
    "8 x ~80, pairs": ([[60, 20], [64, 16], [58, 20], [70, 10], [62, 18], [66, 20], [61, 16], [59, 20]], 2),
    "8 x ~80, one each": ([[60, 20], [64, 16], [58, 20], [70, 10], [62, 18], [66, 20], [61, 16], [59, 20]], 1),
}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--bf16", action="store_true", help="bf16 autocast, as the engine's default mixed precision")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    actor = probe.preset_actor()
    cfg = omega_conf_to_dataclass(actor)
    best: dict[tuple[str, str], float] = {}
    with tempfile.TemporaryDirectory() as tmp:
        dist.init_process_group("gloo", rank=0, world_size=1, init_method=f"file://{tmp}/pg")
        try:
            model = AutoModelForCausalLM.from_pretrained(probe.build_tiny_qwen3(Path(tmp) / "m"), dtype=torch.float32)
            engine = probe.FSDPEngineWithLMHead(probe.ModelConfig(), cfg.engine, cfg.optim, cfg.checkpoint)
            engine.module = model
            engine._autocast_dtype = torch.bfloat16 if args.bf16 else torch.float32
            loss_fn = functools.partial(ppo_loss, config=cfg)
            for _ in range(args.repeats):
                for name, (rows, micro) in CASES.items():
                    for phase in ("old log-probs", "update"):
                        data = probe.make_batch(rows, model.config.vocab_size)
                        tu.assign_non_tensor(data, use_dynamic_bsz=False, micro_batch_size_per_gpu=micro,
                                             calculate_entropy=phase == "old log-probs")  # fmt: skip
                        model.zero_grad(set_to_none=True)
                        start = time.perf_counter()
                        if phase == "update":
                            engine.forward_backward_batch(data, loss_function=loss_fn, forward_only=False)
                        else:
                            with torch.no_grad():
                                engine.forward_backward_batch(data, loss_function=None, forward_only=True)
                        seconds = time.perf_counter() - start
                        best[name, phase] = min(best.get((name, phase), seconds), seconds)
        finally:
            dist.destroy_process_group()
    table = [[name, f"{best[name, 'update']:.3f}", f"{best[name, 'old log-probs']:.3f}"] for name in CASES]
    print(format_table(["mini-batch", "update s", "old log-probs s"], table))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
