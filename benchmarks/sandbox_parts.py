"""Where a sandboxed step's and episode's host time goes: one ``bench_sandbox.py`` row per part.

A step is timed part by part on a live worker, with the same calls ``Worker.call`` makes, in the same order:
``encode`` (the request to bytes), ``write`` (choosing how to wait, pinning the worker to this CPU if that has
been faster for it, and the pipe write, which on a shared core may run the woken worker before it returns),
``wake-up + worker + read`` (until the reply line is in hand: the worker's own time and the scheduler's),
``strict decode`` (bytes to a dict), ``shape checks`` (plain-JSON scan or walk, then the method's shape) and
``accounting + wait policy`` (what ``Worker.call`` spends beyond those: any reply spin, the sequence and
unsolicited-data checks, deadlines, the wall and reply-byte budgets), the last as ``call`` minus the other parts,
so the rows add up.
An episode is timed from acquiring a worker to releasing it: ``acquire`` (pooled: a ready worker; cold: started
now), ``init``, ``reset``, ``steps`` and ``close``.

It uses only what ``Worker`` has had since the host-boundary work (its pipes, sequence number and poller), so the
same file measures an older checkout (copy it there) for a before/after in one run.
"""

from __future__ import annotations

import os
import statistics
import time
from collections.abc import Callable
from typing import Any

from spade_envs.sandbox import RemoteEnv, SandboxConfig, WorkerPool, protocol
from spade_envs.sandbox.process import Worker
from spade_envs.sandbox.replies import MAX_DEPTH, check_json, check_result

__all__ = ["REFERENCE_311D5CE", "episode_parts", "step_parts"]

#: The issue's figures for main at 311d5ce (before the host-boundary work), 2-core machine at load ~2.
REFERENCE_311D5CE = {
    "step 50us env vs in-process, bwrap": "2.10x (target <= 3x, stretch 2x)",
    "step trivial p50, bwrap": "42 us (target <= 100 us, stretch 30 us)",
    "throughput, 40 envs, one host thread": "5,048 steps/s (target >= 5,000)",
    "start cold (start+init), bwrap": "112 ms (target <= 50 ms)",
    "SPADE vs GRPO per 1k trained tokens": "1.48x (target <= 1.3x; bench_spade_step.py)",
    "sandbox share of agent-episode wall time": "0.79 (target <= 0.3; bench_spade_step.py)",
}


def _ns() -> int:
    return time.perf_counter_ns()


def _one_step(worker: Worker, action: str, out: dict[str, list[float]]) -> None:
    """One ``step`` round trip done by hand, part by part (the worker's state advances as in ``Worker.call``)."""
    t0 = _ns()
    data = protocol.encode({"seq": worker._seq + 1, "op": "step", "action": action})
    t1 = _ns()
    worker._seq += 1
    wait = getattr(worker, "_wait", None)  # issue 39: the worker woken on this thread's CPU when that is faster
    if wait is not None:
        wait.unsolicited()
        wait.before_request()
    os.write(worker._req_w, data)
    t2 = _ns()
    buffer = b""
    while b"\n" not in buffer:
        worker._poller.poll(1000)
        buffer += os.read(worker._resp_r, 1 << 16)
    if wait is not None:
        wait.replied()
    t3 = _ns()
    line = buffer.split(b"\n", 1)[0]
    reply = protocol.decode(line)
    t4 = _ns()
    check_json(reply, worker.config.max_observation_chars, MAX_DEPTH + 4, line)
    check_result("step", reply["result"], worker.config.max_observation_chars, walk=False)
    t5 = _ns()
    for name, a, b in (("encode", t0, t1), ("write", t1, t2), ("wake-up + worker + read", t2, t3),
                       ("strict decode", t3, t4), ("shape checks", t4, t5)):  # fmt: skip
        out[name].append((b - a) / 1000.0)


def step_parts(worker: Worker, actions: tuple[str, ...], n: int) -> dict[str, list[float]]:
    """Microseconds of each part of ``n`` ``step`` calls on ``worker`` (an env that is initialised and reset).

    The last part, ``accounting + wait policy``, is one derived value: the whole call's p50 minus the other parts' p50s.
    """
    parts: dict[str, list[float]] = {k: [] for k in ("encode", "write", "wake-up + worker + read", "strict decode",
                                                     "shape checks")}  # fmt: skip
    calls: list[float] = []
    for i in range(n):  # alternate: the by-hand parts and the real call see the same machine state
        _one_step(worker, actions[i % len(actions)], parts)
        t0 = _ns()
        worker.call("step", action=actions[i % len(actions)])
        calls.append((_ns() - t0) / 1000.0)
    rest = statistics.median(calls) - sum(statistics.median(samples) for samples in parts.values())
    rest_name = "accounting + wait policy (call minus the parts)"
    return {**parts, "call (Worker.call, whole)": calls, rest_name: [max(0.01, rest)]}


def _timed(fn: Callable[[], Any]) -> tuple[Any, float]:
    t0 = _ns()
    result = fn()
    return result, (_ns() - t0) / 1000.0


def episode_parts(
    config: SandboxConfig, level: str, source: str, actions: tuple[str, ...], steps: int, episodes: int
) -> dict[str, list[float]]:
    """Microseconds of each part of ``episodes`` episodes of ``steps`` steps, pooled (a ready worker) and cold."""
    samples: dict[str, list[float]] = {}

    def add(name: str, us: float) -> None:
        samples.setdefault(name, []).append(us)

    with WorkerPool(SandboxConfig(**{**config.to_dict(), "isolation": level, "pool_size": 1})) as pool:
        for _ in range(episodes):
            deadline = time.monotonic() + 10
            while pool.ready_count < 1 and time.monotonic() < deadline:
                time.sleep(0.005)
            worker, us = _timed(pool.acquire)
            add("acquire, pooled", us)
            env, us = _timed(lambda w=worker: RemoteEnv(source, pool, worker=w))
            add("init (pooled worker)", us)
            _, us = _timed(lambda e=env: e.reset(0))
            add("reset", us)
            _, us = _timed(lambda e=env: [e.step(actions[i % len(actions)]) for i in range(steps)])
            add(f"{steps} steps", us)
            _, us = _timed(env.close)
            add("close (kill + reap + scratch)", us)
            worker, us = _timed(lambda: Worker(pool.config, level))
            add("acquire, cold (start a worker)", us)
            _, us = _timed(lambda w=worker: w.call("init", source=source))
            add("init (cold worker)", us)
            worker.kill()
    return samples
