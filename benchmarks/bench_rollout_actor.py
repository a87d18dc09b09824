"""The CPU rollout's generation batch in a plain process and inside a Ray actor started as the ``hf`` replica starts it.

Run ``.venv/bin/python benchmarks/bench_rollout_actor.py [--rounds 3] [--batch 16] [--tokens 24] [--hidden 256]``.
It builds a random Qwen3 (``tiny_model.build_tiny_qwen3``; the byte-level tokenizer's vocabulary), then times the
same seeded batch after a weight update (``BatchedGenerator.generate``, concurrent requests, as verl's agent loops
send them) in rounds that alternate: this process, and two async Ray actors made like ``HFReplica.launch_servers``
does (``num_cpus=0``, ``max_concurrency=1000``): one set up as the server was before issue 39, one as it is now
(``Generator``), all with ``--threads`` torch threads. Each row: the median wall seconds, the process's user and
system CPU seconds over the batch, and the ratio to the plain process; above them, what each process runs with
(OMP/MKL variables, nice, affinity, torch threads, live threads). Target: the actor within 1.1x of the plain
process (issue 39: 33 s vs 23 s in ``make learn``, ~1.5x).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import resource
import statistics
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

_ROOT = Path(__file__).resolve().parents[1]
if str(_ROOT) not in sys.path:  # run as a script from a checkout
    sys.path.insert(0, str(_ROOT))

import ray  # noqa: E402
import torch  # noqa: E402

from recipe.spade.cpu.hf_engine import BatchedGenerator, SamplingRequest  # noqa: E402
from recipe.spade.cpu.hf_rollout import load_on_torch_thread  # noqa: E402
from recipe.spade.cpu.tiny_model import build_tiny_qwen3  # noqa: E402

__all__ = ["Generator", "main", "process_facts"]


def process_facts() -> dict[str, Any]:
    """What decides how fast torch's OpenMP regions run in this process."""
    return {
        "pid": os.getpid(),
        "nice": os.nice(0),
        "affinity": sorted(os.sched_getaffinity(0)),
        "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS"),
        "MKL_NUM_THREADS": os.environ.get("MKL_NUM_THREADS"),
        "OMP_WAIT_POLICY": os.environ.get("OMP_WAIT_POLICY"),
        "torch_threads": torch.get_num_threads(),
        "live_threads": len(os.listdir("/proc/self/task")),
    }


class Generator:
    """The rollout server's engine over a model directory; ``run`` loads the weights, then times one seeded batch.

    ``legacy``: the server as it was before issue 39 (torch threads set in the constructor's thread, which loads the
    model; generation on asyncio's default executor, weight updates on the event loop's thread, Ray's nice). Else
    the server's own path (``hf_rollout.load_on_torch_thread``, ``BatchedGenerator.load_weights``).
    """

    def __init__(self, model_dir: str, threads: int, legacy: bool = False) -> None:
        from transformers import AutoModelForCausalLM

        self.legacy = legacy
        if legacy:
            torch.set_num_threads(threads)
            model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32, attn_implementation="sdpa")
            executor: Any = ThreadPoolExecutor(max_workers=min(32, (os.cpu_count() or 1) + 4))  # asyncio's default
        else:
            model, executor = load_on_torch_thread(model_dir, threads)
        self.engine = BatchedGenerator(model, [], 0, max_batch=64, gather_s=0.05, executor=executor)
        self.state = {k: v.detach().clone() for k, v in model.state_dict().items()}  # a weight update per round

    def facts(self) -> dict[str, Any]:
        """This process's facts, as seen from the thread that runs the model (nice and torch threads are per thread)."""
        if self.legacy:  # generation ran on the default executor's threads: a new one starts as its creator was
            return process_facts()
        return self.engine.executor.submit(process_facts).result()

    async def run(self, batch: int, prompt: int, tokens: int, seed: int) -> dict[str, float]:
        if self.legacy:
            self.engine.load_state_dict(self.state, tied_embeddings=True)
        else:
            await self.engine.load_weights(self.state, tied_embeddings=True)
        torch.manual_seed(seed)
        requests = [
            SamplingRequest([(7 * i + j) % 250 + 3 for j in range(prompt)], tokens, ignore_eos=True, logprobs=True)
            for i in range(batch)
        ]
        before, started = resource.getrusage(resource.RUSAGE_SELF), time.perf_counter()
        results = await asyncio.gather(*(self.engine.generate(r) for r in requests))
        wall, after = time.perf_counter() - started, resource.getrusage(resource.RUSAGE_SELF)
        assert all(len(r.token_ids) == tokens for r in results)
        return {"wall_s": wall, "user_s": after.ru_utime - before.ru_utime, "sys_s": after.ru_stime - before.ru_stime,
                "batches": self.engine.batches_run}  # fmt: skip


def _table(rows: dict[str, list[dict[str, float]]]) -> str:
    base = statistics.median(r["wall_s"] for r in rows["plain process"])
    lines = [f"{'where':<22} {'wall s':>8} {'user s':>8} {'sys s':>8} {'vs plain':>9}  target"]
    for name, runs in rows.items():
        wall = statistics.median(r["wall_s"] for r in runs)
        user = statistics.median(r["user_s"] for r in runs)
        sys_s = statistics.median(r["sys_s"] for r in runs)
        target = "" if name == "plain process" else f"<= 1.1x [{'ok' if wall / base <= 1.1 else 'MISS'}]"
        lines.append(f"{name:<22} {wall:8.2f} {user:8.2f} {sys_s:8.2f} {wall / base:8.2f}x  {target}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--batch", type=int, default=16)
    parser.add_argument("--prompt", type=int, default=96)
    parser.add_argument("--tokens", type=int, default=24)
    parser.add_argument("--hidden", type=int, default=256)
    parser.add_argument("--layers", type=int, default=6)
    parser.add_argument("--threads", type=int, default=0, help="torch threads in both (0: every core)")
    args = parser.parse_args(argv)
    threads = args.threads or os.cpu_count() or 1
    with tempfile.TemporaryDirectory() as tmp:
        model_dir = str(build_tiny_qwen3(Path(tmp) / "model", hidden_size=args.hidden, num_layers=args.layers,
                                         num_heads=4, num_kv_heads=2, intermediate_size=4 * args.hidden))  # fmt: skip
        plain = Generator(model_dir, threads, legacy=True)
        ray.init(num_cpus=os.cpu_count(), include_dashboard=False, log_to_driver=False)
        try:
            remote = ray.remote(Generator).options(num_cpus=0, max_concurrency=1000)  # as HFReplica.launch_servers
            actors = {"ray actor, before": remote.remote(model_dir, threads, legacy=True),
                      "ray actor, now": remote.remote(model_dir, threads)}  # fmt: skip
            facts = {"plain process": plain.facts(), **{k: ray.get(a.facts.remote()) for k, a in actors.items()}}
            rows: dict[str, list[dict[str, float]]] = {"plain process": [], **{k: [] for k in actors}}
            shape = (args.batch, args.prompt, args.tokens)
            loop = asyncio.new_event_loop()  # one loop for the plain side, as the actor has: the engine keeps its queue
            loop.run_until_complete(plain.run(*shape, seed=0))  # warm-up, all
            ray.get([a.run.remote(*shape, 0) for a in actors.values()])
            for i in range(args.rounds):
                rows["plain process"].append(loop.run_until_complete(plain.run(*shape, seed=i)))
                for name, actor in actors.items():
                    rows[name].append(ray.get(actor.run.remote(*shape, i)))
            for name, actor in actors.items():
                facts[name]["live_threads_after"] = ray.get(actor.facts.remote())["live_threads"]
            pending = asyncio.all_tasks(loop)  # the engine's batching task
            for task in pending:
                task.cancel()
            loop.run_until_complete(asyncio.gather(*pending, return_exceptions=True))
            loop.close()
        finally:
            ray.shutdown()
    for name, f in facts.items():
        print(f"{name}: {f}")
    shape_text = f"batch {args.batch} x prompt {args.prompt} + {args.tokens} tokens"
    model_text = f"hidden {args.hidden} x {args.layers} layers, {threads} torch threads"
    print(f"{shape_text}, {model_text}, {args.rounds} rounds alternating; load {os.getloadavg()[0]:.1f}")
    print(_table(rows))
    return 0


if __name__ == "__main__":
    threading.current_thread().name = "main"
    sys.exit(main())
