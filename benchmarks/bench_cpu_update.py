"""One update of ``make learn``'s shape through verl's FSDP engine on CPU, under settings that change its speed.

Run: ``.venv/bin/python benchmarks/bench_cpu_update.py [--settings NAME ...] [--model DIR] [--rounds 3]
[--batches 3] [--threads 2]``. Prints a table. A minute or two per setting with SmolLM2 (``make learn`` converts it
to ``~/.cache/spade/smollm2-135m``; the tiny random Qwen3 otherwise, too small for either effect to show).

Each round starts one fresh process per setting, in alternating order: it builds verl 0.9.1's FSDP engine on the
model and runs ``--batches`` mini-batches of ``make learn``'s shape (32 rows of ~160 prompt and 8-64 response
tokens, micro-batches of 8, bf16 autocast as the engine's default) through ``forward_backward_batch`` with
``ppo_loss``; one warm-up mini-batch first. Columns: seconds per mini-batch; minor page faults per mini-batch
(``ru_minflt``, each a page the kernel found and zeroed); peak RSS; RSS growth from the first timed mini-batch to the
last, per process (a heap that keeps freed memory without reusing it grows by about a step's allocations a step).

Settings (issue 39, docs/cpu.md):

- ``default``: glibc's malloc, nice 0, nothing else running.
- ``no mmap``: ``MALLOC_MMAP_MAX_=0`` and no trim. perf showed ``make learn``'s update worker 31% in the kernel,
  20% zeroing fresh pages: glibc serves an allocation over 32 MiB (SmolLM2's logits and their copies) with an mmap
  of its own and unmaps it on free. Without mmap the pages stay, but glibc sometimes grows the heap instead of
  reusing a freed block: not shipped.
- ``nice 15 + neighbour`` / ``nice 0 + neighbour``: the process at Ray's worker nice (15) or at 0, next to a nice-0
  neighbour that keeps one CPU half busy (5 ms of work, 5 ms of sleep), as a run's other processes do; at nice 15
  the OpenMP team's threads lose their CPU to it and the others wait at the barrier. The CPU backend now takes its
  Ray workers to nice 0 (``recipe/spade/cpu/worker_priority.py``).
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


#: name: (environment, nice, a half-busy nice-0 neighbour); glibc reads the environment at start-up
SETTINGS: dict[str, tuple[dict[str, str], int, bool]] = {
    "default": ({}, 0, False),
    "no mmap": ({"MALLOC_MMAP_MAX_": "0", "MALLOC_TRIM_THRESHOLD_": "68719476736"}, 0, False),
    "nice 15 + neighbour": ({}, 15, True),
    "nice 0 + neighbour": ({}, 0, True),
}
#: the neighbour: 5 ms of work, 5 ms of sleep, forever (killed after the measurement)
NEIGHBOUR = (
    "import time\nwhile True:\n    t = time.perf_counter()\n    while time.perf_counter() - t < 0.005:\n"
    "        pass\n    time.sleep(0.005)\n"
)


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


def run_child(setting: tuple[dict[str, str], int, bool], args: argparse.Namespace) -> dict:
    env, nice, neighbour = setting
    base = {k: v for k, v in os.environ.items() if not k.startswith("MALLOC_")}
    command = ["nice", "-n", str(nice), sys.executable, __file__, "--child", "--model", args.model,
               "--batches", str(args.batches), "--threads", str(args.threads)]  # fmt: skip
    other = subprocess.Popen([sys.executable, "-c", NEIGHBOUR]) if neighbour else None
    try:
        out = subprocess.run(command, env={**base, "VERL_PLATFORM": "cpu", **env}, capture_output=True, text=True)
    finally:
        if other is not None:
            other.kill()
            other.wait()
    if out.returncode != 0:
        raise RuntimeError(f"benchmark process failed (rc {out.returncode}): {out.stderr[-2000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--model", default=str(SMOLLM2) if SMOLLM2.is_dir() else "tiny")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--batches", type=int, default=3, help="timed mini-batches per process (after one warm-up)")
    parser.add_argument("--threads", type=int, default=2, help="torch threads (make learn: every core)")
    parser.add_argument("--settings", nargs="+", choices=list(SETTINGS), default=list(SETTINGS))
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        child(args.model, args.batches, args.threads)
        return 0
    sys.path.insert(0, str(ROOT))
    from spade_envs.cli.table import format_table

    settings = {name: SETTINGS[name] for name in args.settings}
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
    headers = ["setting", "update s p50", "min", f"vs {next(iter(settings))}", "faults / update", "peak RSS MiB",
               "RSS growth MiB"]  # fmt: skip
    print(format_table(headers, table))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
