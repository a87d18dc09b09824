"""An episode's close kills its worker at once and leaves the clean-up to the pool's reaper thread (issue 39).

What must hold: ``AsyncSandboxEnv.close`` does not wait for the reap, the scratch unmount or the uid; the worker's
processes are gone by the time its clean-up starts; its slot is not handed out again before the clean-up ends (so
``max_workers`` and the uid and scratch leases still bound what is live); the pool's shutdown waits for every
pending clean-up; and a worker killed from two threads at once is cleaned up exactly once.
"""

from __future__ import annotations

import asyncio
import os
import threading
import time

import pytest

from spade_envs.sandbox import AsyncSandboxEnv, SandboxConfig, SandboxUnavailable, WorkerPool
from spade_envs.sandbox.process import Worker

LEVELS = ("bwrap", "landlock")

ENV = """
class EchoEnv:
    max_turns = 100

    def reset(self, seed=None):
        return "ready", {}

    def step(self, action):
        return action, 0.0, False, False, {}

    def solution(self):
        return []
"""


def _config(level: str, **extra: object) -> SandboxConfig:
    return SandboxConfig(isolation=level, pool_size=0, preload_numpy=False, **extra)


def _level_or_skip(level: str) -> None:
    try:
        Worker(_config(level), level).kill()
    except Exception as exc:  # noqa: BLE001
        pytest.skip(f"{level} unavailable here: {exc}")


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def _held_scratch(worker: Worker) -> tuple[threading.Event, threading.Event]:
    """Make this worker's scratch removal (the clean-up's last host step) wait; (started, let go)."""
    started, let_go = threading.Event(), threading.Event()
    remove = worker._scratch.remove

    def held() -> None:
        started.set()
        let_go.wait(30)
        remove()

    worker._scratch.remove = held  # type: ignore[method-assign]
    return started, let_go


@pytest.mark.parametrize("level", LEVELS)
def test_close_returns_before_the_clean_up_which_frees_the_slot_when_done(level):
    _level_or_skip(level)
    pool = WorkerPool(_config(level, max_workers=1))

    async def scenario() -> None:
        env = await AsyncSandboxEnv.create(ENV, pool)
        assert (await env.step("hi"))[0] == "hi"
        worker = env.remote.worker
        started, let_go = _held_scratch(worker)
        try:
            await asyncio.wait_for(env.close(), 5)  # a close that waited for the clean-up would hang here
            assert worker.dead
            assert started.wait(10), "the reaper never started the clean-up"
            assert not _alive(worker.proc.pid), "the worker outlived its SIGKILL into its clean-up"
            with pytest.raises(SandboxUnavailable):  # the one slot is still the cleaning worker's
                await pool.acquire_async(timeout=0.3)
            assert os.path.isdir(worker._scratch.path)
        finally:
            let_go.set()
        again = await AsyncSandboxEnv.create(ENV, pool, timeout=10)  # the slot comes back after the clean-up
        assert (await again.step("again"))[0] == "again"
        assert not os.path.exists(worker._scratch.path)
        await again.close()

    try:
        asyncio.run(scenario())
    finally:
        pool.shutdown()


@pytest.mark.parametrize("level", LEVELS)
def test_shutdown_waits_for_every_pending_clean_up(level):
    _level_or_skip(level)
    pool = WorkerPool(_config(level))
    fds = len(os.listdir("/proc/self/fd"))

    async def scenario() -> list[Worker]:
        envs = await asyncio.gather(*(AsyncSandboxEnv.create(ENV, pool) for _ in range(6)))
        await asyncio.gather(*(e.step("x") for e in envs))
        workers = [e.remote.worker for e in envs]
        let_go = [_held_scratch(w)[1] for w in workers[:2]]  # two clean-ups still running at shutdown
        await asyncio.gather(*(e.close() for e in envs))
        threading.Timer(0.5, lambda: [e.set() for e in let_go]).start()
        return workers

    workers = asyncio.run(scenario())
    pool.shutdown()
    assert all(w._cleaned for w in workers)
    assert not [w._scratch.path for w in workers if os.path.exists(w._scratch.path)]
    assert not [w.proc.pid for w in workers if _alive(w.proc.pid)]
    deadline = time.monotonic() + 5  # the dispatcher's and executor's threads let go of their fds as they end
    while len(os.listdir("/proc/self/fd")) > fds + 2 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert len(os.listdir("/proc/self/fd")) <= fds + 2  # the I/O thread's wake pipe may stay (closed on timeout)


@pytest.mark.parametrize("level", LEVELS)
def test_a_worker_killed_from_two_threads_is_cleaned_up_once_and_the_second_kill_waits_for_it(level):
    """The pool's shutdown and the reaper can both kill one worker: the one that returns second must find its fds
    closed and its scratch gone (never closing fds a second time, which could close a new worker's)."""
    _level_or_skip(level)
    worker = Worker(_config(level), level)
    calls, started = [], threading.Event()
    remove = worker._scratch.remove

    def counted() -> None:
        calls.append(threading.get_ident())
        started.set()
        time.sleep(0.3)  # the other thread's kill arrives meanwhile
        remove()

    worker._scratch.remove = counted  # type: ignore[method-assign]
    first = threading.Thread(target=worker.kill)
    first.start()
    assert started.wait(10)
    worker.kill()  # the second kill
    assert not os.path.exists(worker._scratch.path), "the second kill returned before the clean-up was done"
    first.join(10)
    assert len(calls) == 1
    assert worker._fds == [] and not _alive(worker.proc.pid)
