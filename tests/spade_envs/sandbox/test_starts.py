"""Starts off the episodes' critical path (issue 31): what a worker loads before it is ready, and how many wait.

A worker started on demand (an episode is waiting for it) loads only what ``init`` needs; a pre-started one has
also loaded numpy and the modules env code commonly uses, after hardening. The pool's ready queue grows to the
demand it has seen, so an agent loop that runs N episodes at once finds N started workers at its next step.
"""

from __future__ import annotations

import json
import time

from spade_envs.sandbox import SandboxConfig, SandboxUnavailable, WorkerPool, probe_isolation
from spade_envs.sandbox.process import Worker

LOADED_ENV = """
import sys


class LoadedEnv:
    max_turns = 1

    def reset(self, seed=None):
        names = ("numpy", "spade_envs.envs.tooluse", "dataclasses", "traceback", "spade_envs.envs.contract")
        return json.dumps([name for name in names if name in sys.modules]), {}

    def step(self, action):
        return "", 0.0, True, False, {}

    def solution(self):
        return ["x"]
""".replace("import sys", "import json\nimport sys")


def _level() -> str:
    """The cheapest real level to start workers at: Landlock, else bubblewrap (never the unsandboxed ``none``)."""
    try:
        return probe_isolation(SandboxConfig(isolation="landlock", preload_numpy=False))
    except SandboxUnavailable:
        return probe_isolation(SandboxConfig(preload_numpy=False))


def _loaded(worker: Worker) -> list[str]:
    try:
        worker.call("init", source=LOADED_ENV)
        return json.loads(worker.call("reset", seed=0)[0])
    finally:
        worker.kill()


def test_a_worker_started_on_demand_loads_only_what_init_needs_and_a_pre_started_one_the_rest():
    config = SandboxConfig(isolation=_level(), preload_numpy=True)
    assert _loaded(Worker(config, config.isolation)) == ["spade_envs.envs.contract"]
    assert _loaded(Worker(config, config.isolation, warm=True)) == [
        "numpy", "spade_envs.envs.tooluse", "dataclasses", "traceback", "spade_envs.envs.contract"
    ]  # fmt: skip


def _wait_ready(pool: WorkerPool, count: int, timeout: float = 60.0) -> int:
    deadline = time.monotonic() + timeout
    while pool.ready_count < count and time.monotonic() < deadline:
        time.sleep(0.02)
    time.sleep(0.3)  # and no more than that follow
    return pool.ready_count


def test_the_ready_queue_grows_to_the_most_workers_in_use_at_once():
    config = SandboxConfig(isolation=_level(), pool_size=1, pool_max_ready=8, max_workers=6, preload_numpy=False)
    with WorkerPool(config) as pool:
        assert _wait_ready(pool, 1) == 1
        workers = [pool.acquire() for _ in range(3)]
        assert _wait_ready(pool, 1) == 1  # in use + ready may reach the demand seen (3): one ready
        for worker in workers:
            pool.release(worker)
        assert _wait_ready(pool, 3) == 3  # none in use: as many ready as were in use at once
        assert pool.ready_count + pool.live_count <= config.max_workers + config.pool_size


def test_the_ready_queue_covers_a_burst_of_workers_used_one_after_another():
    """Workers are used once: a burst that takes six, two at a time (a validation's workers in turn beside an agent's
    episode), finds six started at its next occurrence, not just the two it held at once."""
    config = SandboxConfig(isolation=_level(), pool_size=1, pool_max_ready=8, max_workers=6, preload_numpy=False)
    with WorkerPool(config) as pool:
        assert _wait_ready(pool, 1) == 1
        anchor = pool.acquire()  # in use throughout: one burst
        for _ in range(5):
            pool.release(pool.acquire())
        assert pool.live_count == 1
        pool.release(anchor)  # idle: the burst took 6
        assert _wait_ready(pool, 6) == 6
        for _ in range(2):  # a smaller burst later lowers nothing: the most one burst took stays the demand
            pool.release(pool.acquire())
        assert _wait_ready(pool, 6) == 6


def test_a_burst_longer_than_the_slots_keeps_within_max_workers():
    """A thousand episodes queued on a few slots are one long burst (CI once caught 8 processes on 4 slots + 2): the
    burst measure never keeps more than ``max_workers`` in use and ready together."""
    config = SandboxConfig(isolation=_level(), pool_size=1, pool_max_ready=8, max_workers=3, preload_numpy=False)
    with WorkerPool(config) as pool:
        anchor = pool.acquire()
        for _ in range(10):
            pool.release(pool.acquire())
        pool.release(anchor)  # the burst took 11; 3 slots
        assert _wait_ready(pool, 3) == 3
        assert pool.ready_count + pool.live_count <= config.max_workers


def test_pool_max_ready_bounds_the_ready_queue():
    config = SandboxConfig(isolation=_level(), pool_size=0, pool_max_ready=2, max_workers=6, preload_numpy=False)
    with WorkerPool(config) as pool:
        workers = [pool.acquire() for _ in range(4)]
        for worker in workers:
            pool.release(worker)
        assert _wait_ready(pool, 2) == 2


SLOW_ENV = """
import time


class SlowEnv:
    max_turns = 1000

    def reset(self, seed=None):
        return "start", {}

    def step(self, action):
        time.sleep(0.002)
        return "ok", 0.0, False, False, {}

    def solution(self):
        return ["x"]
"""


class _CountingPoller:
    """Counts non-blocking polls of the reply pipe: a spin makes at least one (the unsolicited check polls another)."""

    def __init__(self, inner: object) -> None:
        self.inner, self.zero = inner, 0

    def poll(self, timeout: int | None = None) -> list[tuple[int, int]]:
        self.zero += timeout == 0
        return self.inner.poll(timeout)


def test_the_reply_spin_stops_for_a_slow_env_and_is_retried_every_few_calls():
    """A 2 ms step never replies within the 100 us spin: spinning on every call takes a core for nothing, and never
    spinning again after a slow reply would cost every later fast reply its spin (the estimate must come from spun
    waits only: a sleep's wake-up latency, under load, would keep it above the spin for good)."""
    config = SandboxConfig(isolation=_level(), preload_numpy=False, reply_spin_us=100, follow_caller_cpu=False)
    worker = Worker(config, config.isolation)
    try:
        worker.call("init", source=SLOW_ENV)
        worker.call("reset", seed=0)
        worker._wait.poller = poller = _CountingPoller(worker._wait.poller)
        spun = []
        for _ in range(45):
            before = poller.zero
            worker.call("step", action="x")
            spun.append(poller.zero - before >= 1)
    finally:
        worker.kill()
    assert 3 <= sum(spun) <= 8, spun  # a probe every 8th call (5 in 45): not every call, not never
