"""Many concurrent episodes against one small pool: no deadlock, bounded threads and workers, no leaked slot.

Regression for the deadlock of issue 17 (item 10): ``AsyncSandboxEnv.create`` used to block an executor thread in
``pool.acquire()`` without a timeout; past ``max_workers`` + threads concurrent episodes every thread waited there
and the live episodes' calls queued behind them forever. Waiting episodes now wait on the event loop.
"""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import pytest

from spade_envs.sandbox import AsyncSandboxEnv, SandboxConfig, SandboxUnavailable, WorkerPool, probe_isolation

COUNTER_ENV = """
class CounterEnv:
    max_turns = 5

    def reset(self, seed=None):
        self.seed, self.count = seed, 0
        return f"count to 3 (episode {seed})", {}

    def step(self, action):
        self.count += action == "up"
        won = self.count >= 3
        return f"count {self.count}", float(won), won, False, {}

    def solution(self):
        return ["up"] * 3
"""

EPISODES = 1000
MAX_WORKERS = 4


def _cheapest_real_level() -> str:
    """Landlock starts workers fastest; bubblewrap where Landlock is missing (never the unsandboxed ``none``)."""
    try:
        return probe_isolation(SandboxConfig(isolation="landlock", preload_numpy=False))
    except SandboxUnavailable:
        return probe_isolation(SandboxConfig(preload_numpy=False))


@pytest.fixture(scope="module")
def small_pool():
    config = SandboxConfig(isolation=_cheapest_real_level(), preload_numpy=False, pool_size=2, max_workers=MAX_WORKERS)
    with WorkerPool(config) as pool:
        yield pool


async def fake_generate(observation: str) -> str:
    """Stands in for the rollout server: yields to the loop, as a real generate call would, then acts."""
    await asyncio.sleep(0)
    return "up"


async def episode(pool: WorkerPool, seed: int) -> float:
    env = await AsyncSandboxEnv.create(COUNTER_ENV, pool)
    try:
        obs, _ = await env.reset(seed)
        assert obs == f"count to 3 (episode {seed})"
        reward = 0.0
        for _ in range(env.max_turns):
            obs, reward, terminated, truncated, _ = await env.step(await fake_generate(obs))
            if terminated or truncated:
                break
        return reward
    finally:
        await env.close()


def test_a_thousand_concurrent_episodes_finish_with_bounded_threads_and_workers(small_pool, procs):
    peaks: dict[str, int] = {"threads": 0, "live": 0, "workers": 0, "waiting": 0}
    threads_before = threading.active_count()

    async def watch(stop: asyncio.Event) -> None:
        while not stop.is_set():
            peaks["threads"] = max(peaks["threads"], threading.active_count())
            peaks["live"] = max(peaks["live"], small_pool.live_count)
            peaks["waiting"] = max(peaks["waiting"], small_pool.waiting_count)
            interpreters = [cmd for cmd in procs.workers().values() if not cmd.split()[0].endswith(("bwrap", "sh"))]
            peaks["workers"] = max(peaks["workers"], len(interpreters))  # one per worker (bwrap adds two wrappers)
            await asyncio.sleep(0.05)

    async def main() -> list[Any]:
        stop = asyncio.Event()
        watcher = asyncio.create_task(watch(stop))
        try:  # a deadlock fails here instead of hanging the suite
            return await asyncio.wait_for(
                asyncio.gather(*(episode(small_pool, seed) for seed in range(EPISODES))), timeout=600
            )
        finally:
            stop.set()
            await watcher

    rewards = asyncio.run(main())
    assert rewards == [1.0] * EPISODES
    assert peaks["live"] <= MAX_WORKERS
    assert peaks["waiting"] >= EPISODES // 2, "the episodes were expected to queue for slots (without threads)"
    # Threads: the pool's executor (min(64, max_workers)), its refill and spawner threads, asyncio's own.
    assert peaks["threads"] <= threads_before + MAX_WORKERS + 4, peaks
    # Workers: max_workers live + pool_size ready (+1 being started by the refill thread).
    assert peaks["workers"] <= MAX_WORKERS + small_pool.config.pool_size + 1, peaks
    assert small_pool.live_count == 0 and small_pool.waiting_count == 0
    assert small_pool._slots.free == MAX_WORKERS  # every slot came back


def test_waiting_for_a_slot_times_out_with_a_typed_error_and_cancelling_leaks_nothing(small_pool, procs):
    async def main() -> None:
        held = [await AsyncSandboxEnv.create(COUNTER_ENV, small_pool) for _ in range(MAX_WORKERS)]
        try:
            with pytest.raises(SandboxUnavailable) as info:
                await AsyncSandboxEnv.create(COUNTER_ENV, small_pool, timeout=0.2)
            assert info.value.code == "acquire_timeout"
            waiters = [asyncio.create_task(AsyncSandboxEnv.create(COUNTER_ENV, small_pool)) for _ in range(5)]
            await asyncio.sleep(0.1)
            assert small_pool.waiting_count == 5
            for task in waiters:
                task.cancel()
            await asyncio.gather(*waiters, return_exceptions=True)
            assert small_pool.waiting_count == 0
            # A slot handed to a waiter that is cancelled at the same moment is passed on, not lost.
            late = asyncio.create_task(AsyncSandboxEnv.create(COUNTER_ENV, small_pool))
            await asyncio.sleep(0.05)
            await held.pop().close()
            late.cancel()
            (outcome,) = await asyncio.gather(late, return_exceptions=True)
            if isinstance(outcome, AsyncSandboxEnv):  # it got its slot before the cancellation arrived
                await outcome.close()
        finally:
            for env in held:
                await env.close()
        fresh = [await AsyncSandboxEnv.create(COUNTER_ENV, small_pool, timeout=30) for _ in range(MAX_WORKERS)]
        for env in fresh:
            await env.close()

    asyncio.run(main())
    procs.wait_until(lambda: small_pool._slots.free == MAX_WORKERS)  # a cancelled start is released on a thread
    assert small_pool.live_count == 0 and small_pool._slots.free == MAX_WORKERS


def test_an_env_outliving_its_pool_fails_typed_and_closes_quietly():
    async def main() -> None:
        with WorkerPool(SandboxConfig(isolation=_cheapest_real_level(), preload_numpy=False, pool_size=0)) as pool:
            env = await AsyncSandboxEnv.create(COUNTER_ENV, pool)
            await env.reset(0)
        with pytest.raises(SandboxUnavailable) as info:
            await env.step("up")
        assert info.value.code == "pool_closed"
        await env.close()
        with pytest.raises(SandboxUnavailable) as info:
            await AsyncSandboxEnv.create(COUNTER_ENV, pool)
        assert info.value.code == "pool_closed"

    asyncio.run(main())
