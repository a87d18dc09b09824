"""The asyncio client's calls go through the pool's one I/O thread (issue 39): any number in flight, each checked.

What must hold: calls of many episodes run at the same time (their step intervals overlap, read on the system-wide
monotonic clock inside the envs) on one thread, not one executor thread each; a failing call fails only its own
episode; a call cancelled mid-flight leaves a worker that closes cleanly; shutting the pool down fails the calls in
flight with ``pool_closed`` and leaves no worker. Both levels whose worker is the host's child or grandchild run.
"""

from __future__ import annotations

import asyncio
import threading
import time

import pytest

from spade_envs.sandbox import AsyncSandboxEnv, EnvCrashed, EnvRaised, SandboxConfig, SandboxUnavailable, WorkerPool

LEVELS = ("bwrap", "landlock")

ENV = """
import gc, os, time


class SlowEnv:
    max_turns = 1000

    def reset(self, seed=None):
        self.seed = seed
        return f"seed {seed}", {}

    def step(self, action):
        started = time.monotonic()
        if action.startswith("sleep:"):
            time.sleep(float(action[6:]))
        elif action == "raise":
            raise KeyError("boom")
        elif action == "crash":
            os._exit(9)
        elif action == "drip":  # this call's own reply (seq 3: init, reset, step), 1.5 KiB every 0.1 s, then silence
            fd = next(o for o in gc.get_objects() if type(o).__name__ == "_Server").wfd
            data = b'{"seq":3,"ok":true,"result":["' + b"x" * 21000 + b'",0.0,false,false,{}]}\\n'
            for i in range(0, len(data), 1500):
                os.write(fd, data[i : i + 1500])
                time.sleep(0.1)
            time.sleep(30)
        return f"{self.seed}:{action}", 0.0, False, False, {"ran": [started, time.monotonic()]}

    def solution(self):
        return []
"""


@pytest.fixture(params=LEVELS)
def pool(request):
    config = SandboxConfig(isolation=request.param, pool_size=0, preload_numpy=False)
    with WorkerPool(config) as pool:
        yield pool


async def _clients(pool: WorkerPool, n: int) -> list[AsyncSandboxEnv]:
    clients = [await AsyncSandboxEnv.create(ENV, pool) for _ in range(n)]
    for seed, client in enumerate(clients):
        await client.reset(seed)
    return clients


def _io_threads() -> int:
    return sum(t.name == "spade-sandbox-io" for t in threading.enumerate())


def test_many_episodes_step_at_once_on_one_thread(pool):
    async def main():
        clients = await _clients(pool, 12)
        before = {t.name for t in threading.enumerate() if t.name.startswith("spade-env")}
        results = await asyncio.gather(*(c.step("sleep:0.4") for c in clients))
        after = {t.name for t in threading.enumerate() if t.name.startswith("spade-env")}
        for client in clients:
            await client.close()
        return results, before, after

    results, before, after = asyncio.run(main())
    spans = [r[4]["ran"] for r in results]
    assert max(s for s, _ in spans) < min(e for _, e in spans)  # all twelve slept at the same time
    assert [r[0] for r in results] == [f"{i}:sleep:0.4" for i in range(12)]
    assert _io_threads() == 1 and after == before  # one I/O thread; no executor thread started for the steps


def test_a_failing_call_fails_only_its_episode(pool):
    async def main():
        clients = await _clients(pool, 3)
        results = await asyncio.gather(*(c.step(a) for c, a in zip(clients, ["raise", "crash", "ok"])),
                                       return_exceptions=True)  # fmt: skip
        again = await clients[0].step("ok")  # an env exception leaves its worker usable
        for client in clients:
            await client.close()
        return results, again

    results, again = asyncio.run(main())
    assert isinstance(results[0], EnvRaised) and isinstance(results[1], EnvCrashed)
    assert results[2][0] == "2:ok" and again[0] == "0:ok"


def test_a_cancelled_call_lets_close_wait_for_it(pool, procs):
    async def main():
        client = (await _clients(pool, 1))[0]
        pid = client.remote.worker.proc.pid
        task = asyncio.ensure_future(client.step("sleep:0.5"))
        await asyncio.sleep(0.1)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        started = time.monotonic()
        await client.close()  # waits for the step still running in the worker, then kills it
        return pid, time.monotonic() - started

    pid, took = asyncio.run(main())
    assert took > 0.2  # the close waited for the reply of the cancelled step
    procs.assert_gone([pid])
    assert pool.live_count == 0


def test_shutdown_fails_calls_in_flight_and_leaves_no_worker(procs):
    config = SandboxConfig(isolation="bwrap", pool_size=0, preload_numpy=False)
    pool = WorkerPool(config)

    async def main():
        clients = await _clients(pool, 3)
        pids = [c.remote.worker.proc.pid for c in clients]
        steps = [asyncio.ensure_future(c.step("sleep:5")) for c in clients]
        await asyncio.sleep(0.2)
        started = time.monotonic()
        await asyncio.get_running_loop().run_in_executor(None, pool.shutdown)
        results = await asyncio.gather(*steps, return_exceptions=True)
        with pytest.raises(SandboxUnavailable):
            await clients[0].step("ok")
        return pids, results, time.monotonic() - started

    pids, results, took = asyncio.run(main())
    assert all(isinstance(r, SandboxUnavailable) and r.code == "pool_closed" for r in results)
    assert took < 4  # not after the 5 s sleeps
    procs.assert_gone(pids)


def test_a_worker_that_drips_its_reply_holds_up_only_its_own_call(pool):
    async def main():
        dripping, quick = await _clients(pool, 2)
        drip = asyncio.ensure_future(dripping.step("drip"))
        await asyncio.sleep(0.15)  # its first pieces are in
        quick_steps = [(await quick.step(f"q{i}"))[0] for i in range(5)]
        drip_done_when_quick_was = drip.done()
        result = await drip
        for client in (dripping, quick):
            await client.close()
        return quick_steps, drip_done_when_quick_was, result

    quick_steps, drip_done_when_quick_was, result = asyncio.run(main())
    assert quick_steps == [f"1:q{i}" for i in range(5)]
    assert not drip_done_when_quick_was  # five steps of another episode finished while the drip went on
    assert result[0] == "x" * 21000  # and the dripped reply, read piece by piece, is whole and checked
