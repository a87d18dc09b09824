"""An update's seconds, page faults and heap growth with glibc's default malloc and with mmap turned off (issue 39).

Run: ``.venv/bin/python benchmarks/bench_cpu_malloc.py [--model DIR] [--rounds 3] [--batches 3] [--threads 2]``.
Prints a table. About two minutes with SmolLM2 (``make learn`` converts it to ``~/.cache/spade/smollm2-135m``; the
tiny random Qwen3 otherwise, whose vocabulary is too small for the effect to show).

Each round starts two fresh processes, one per setting, alternating which goes first: the process builds verl
0.9.1's FSDP engine on the model and runs ``--batches`` mini-batches of ``make learn``'s shape (32 rows of ~160
prompt and 8-64 response tokens, micro-batches of 8, bf16 autocast as the engine's default) through
``forward_backward_batch`` with ``ppo_loss``. The first mini-batch warms up and is left out. "faults" are the
process's minor page faults per mini-batch (``ru_minflt``): each is a page the kernel had to find and zero; "RSS
growth" is the resident memory after the last mini-batch minus after the first timed one (a heap that keeps freed
memory but does not reuse it grows by about one step's allocations per step).

Why: perf showed ``make learn``'s update worker 31% in the kernel, 20% zeroing fresh pages: glibc serves an
allocation over 32 MiB (SmolLM2's logits and their copies) with an mmap of its own and unmaps it on free. Turning
mmap off (``MALLOC_MMAP_MAX_=0``, no trim) keeps those pages, but glibc then sometimes fails to reuse a freed block
and grows the heap instead (docs/cpu.md): not shipped in the CPU backend; this benchmark is the evidence.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SMOLLM2 = Path.home() / ".cache" / "spade" / "smollm2-135m"


#: name: environment; glibc reads these at start-up
SETTINGS = {
    "glibc default": {},
    "no mmap, no trim": {"MALLOC_MMAP_MAX_": "0", "MALLOC_TRIM_THRESHOLD_": "68719476736"},
}


def _rss_mib() -> float:
    with open("/proc/self/statm", encoding="ascii") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def child(model_dir: str, batches: int, threads: int) -> None:
    """One process: the engine on ``model_dir``, ``batches`` updates; prints one JSON line."""
    import functools
    import resource
    import tempfile
    import time

    sys.path.insert(0, str(ROOT / "tests" / "recipe"))
    import micro_batch_probe as probe  # sets VERL_PLATFORM=cpu before verl is imported
    import torch
    import torch.distributed as dist
    from transformers import AutoModelForCausalLM
    from verl.utils import tensordict_utils as tu
    from verl.utils.config import omega_conf_to_dataclass
    from verl.workers.utils.losses import ppo_loss

    torch.set_num_threads(threads)
    cfg = omega_conf_to_dataclass(probe.preset_actor())
    gen = torch.Generator().manual_seed(0)
    rows = [[int(torch.randint(150, 170, (1,), generator=gen)), int(torch.randint(8, 65, (1,), generator=gen))]
            for _ in range(32)]  # fmt: skip
    seconds, faults, rss = [], [], []
    with tempfile.TemporaryDirectory() as tmp:
        dist.init_process_group("gloo", rank=0, world_size=1, init_method=f"file://{tmp}/pg")
        try:
            path = model_dir if model_dir != "tiny" else probe.build_tiny_qwen3(Path(tmp) / "m")
            model = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32)
            engine = probe.FSDPEngineWithLMHead(probe.ModelConfig(), cfg.engine, cfg.optim, cfg.checkpoint)
            engine.module = model
            engine._autocast_dtype = torch.bfloat16
            loss_fn = functools.partial(ppo_loss, config=cfg)
            for _ in range(batches + 1):
                data = probe.make_batch(rows, model.config.vocab_size)
                tu.assign_non_tensor(data, use_dynamic_bsz=False, micro_batch_size_per_gpu=8, calculate_entropy=False)
                model.zero_grad(set_to_none=True)
                before, start = resource.getrusage(resource.RUSAGE_SELF).ru_minflt, time.perf_counter()
                engine.forward_backward_batch(data, loss_function=loss_fn, forward_only=False)
                seconds.append(time.perf_counter() - start)
                faults.append(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
                rss.append(_rss_mib())
        finally:
            dist.destroy_process_group()
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    growth = rss[-1] - rss[1]
    print(json.dumps({"seconds": seconds[1:], "faults": faults[1:], "max_rss_mib": peak, "growth_mib": growth}))


def run_child(env: dict[str, str], args: argparse.Namespace) -> dict:
    base = {k: v for k, v in os.environ.items() if not k.startswith("MALLOC_")}
    command = [sys.executable, __file__, "--child", "--model", args.model, "--batches", str(args.batches),
               "--threads", str(args.threads)]  # fmt: skip
    out = subprocess.run(command, env={**base, "VERL_PLATFORM": "cpu", **env}, capture_output=True, text=True)
    if out.returncode != 0:
        raise RuntimeError(f"benchmark process failed (rc {out.returncode}): {out.stderr[-2000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--model", default=str(SMOLLM2) if SMOLLM2.is_dir() else "tiny")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--batches", type=int, default=3, help="timed mini-batches per process (after one warm-up)")
    parser.add_argument("--threads", type=int, default=2, help="torch threads (make learn: every core)")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        child(args.model, args.batches, args.threads)
        return 0
    sys.path.insert(0, str(ROOT))
    from spade_envs.cli.table import format_table

    settings = SETTINGS
    print(f"model {args.model}; {args.rounds} rounds x {args.batches} mini-batches of 32 rows", flush=True)
    results: dict[str, list[dict]] = {name: [] for name in settings}
    for r in range(args.rounds):
        order = list(settings) if r % 2 == 0 else list(reversed(settings))
        for name in order:
            results[name].append(run_child(settings[name], args))
            print(f"  round {r + 1}: {name} {statistics.median(results[name][-1]['seconds']):.2f} s", flush=True)
    table, base = [], None
    for name, runs in results.items():
        secs = [s for run in runs for s in run["seconds"]]
        med = statistics.median(secs)
        base = base or med
        table.append([name, f"{med:.2f}", f"{min(secs):.2f}", f"{med / base:.2f}x",
                      f"{statistics.median(f for run in runs for f in run['faults']):,.0f}",
                      f"{max(run['max_rss_mib'] for run in runs):,.0f}",
                      " ".join(f"{run['growth_mib']:+,.0f}" for run in runs)])  # fmt: skip
    headers = ["malloc", "update s p50", "min", "vs default", "faults / update", "peak RSS MiB", "RSS growth MiB"]
    print(format_table(headers, table))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
