"""Environments running in a sandbox worker: a synchronous proxy, a gymnasium env and an asyncio client.

All three speak the contract of :mod:`spade_envs.envs.contract`; faults of the environment surface as
:mod:`~spade_envs.sandbox.errors` exceptions, never as agent rewards. Every result was checked by the worker and
again on the host (:mod:`~spade_envs.sandbox.replies`); the worker and its pool slot are released on every path.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import functools
from collections.abc import Sequence
from typing import Any

from spade_envs.envs.contract import StepResult
from spade_envs.envs.gym_adapter import TextEnv
from spade_envs.sandbox.batch import call_many
from spade_envs.sandbox.dispatch import CallDispatcher
from spade_envs.sandbox.errors import SandboxError, SandboxUnavailable
from spade_envs.sandbox.pool import WorkerPool, shielded
from spade_envs.sandbox.process import Worker

__all__ = ["AsyncSandboxEnv", "RemoteEnv", "SandboxedEnv", "step_all"]


class RemoteEnv:
    """The contract's methods, forwarded to a worker that loaded ``source``. Not thread-safe; one episode.

    ``worker``: one already acquired from ``pool`` (the asyncio client acquires it without holding a thread);
    by default one is acquired here. Either way it is released if loading the env fails. The worker loads every
    env the same way (:mod:`spade_envs.envs.loader`): nothing the caller passes tells env code who is asking.
    """

    def __init__(self, source: str, pool: WorkerPool, *, worker: Worker | None = None) -> None:
        self.pool = pool
        self.worker: Worker = worker if worker is not None else pool.acquire()
        try:
            meta = self.worker.call("init", timeout=pool.config.start_timeout_s, source=source)
            self.class_name: str = meta["class_name"]
            self.setting: str = meta["setting"]
            self.max_turns: int = meta["max_turns"]
        except BaseException:
            pool.release(self.worker)
            raise

    def reset(self, seed: int | None = None) -> tuple[str, dict[str, Any]]:
        return self._reset_result(self.worker.call("reset", seed=seed))

    def _reset_result(self, result: list[Any]) -> tuple[str, dict[str, Any]]:
        obs, info, max_turns = result
        if max_turns is not None:
            self.max_turns = max_turns  # some environments size their turn budget per episode
        return obs, info

    def step(self, action: str) -> StepResult:
        return self._checked(self.worker.call("step", action=action))

    def step_calls(self, calls: list[dict[str, Any]], answer: str | None = None) -> StepResult:
        return self._checked(self.worker.call("step_calls", calls=calls, answer=answer))

    def _checked(self, result: tuple[str, float, bool, bool, dict[str, Any]]) -> StepResult:
        obs, reward, terminated, truncated, info = result
        return obs, reward, terminated, truncated, info

    def call_tool(self, name: str, arguments: Any) -> str:
        return self.worker.call("call_tool", name=name, arguments=arguments)

    def tools(self) -> list[dict[str, Any]]:
        return self.worker.call("tools")

    def solution(self) -> list[str]:
        return self.worker.call("solution")

    def close(self) -> None:
        self.pool.release(self.worker)


def step_all(envs: Sequence[RemoteEnv], actions: Sequence[str]) -> list[StepResult | SandboxError]:
    """``env.step(action)`` for every pair at once (:func:`~spade_envs.sandbox.batch.call_many`), in order.

    A step that failed holds its :class:`SandboxError` (its worker is then dead, as after a failed ``step``); the
    others are unaffected.
    """
    if len(envs) != len(actions):
        raise ValueError(f"step_all: {len(envs)} envs but {len(actions)} actions")
    results = call_many([(env.worker, "step", {"action": action}) for env, action in zip(envs, actions)])
    return [r if isinstance(r, SandboxError) else env._checked(r) for env, r in zip(envs, results)]


class SandboxedEnv(TextEnv):
    """A gymnasium env whose code runs in a sandbox worker (``gymnasium.utils.env_checker.check_env`` passes).

    Closing it (or leaving a ``with`` block) kills the worker; ``close`` is safe to call twice.
    """

    def __init__(self, source: str, pool: WorkerPool, max_turns: int | None = None) -> None:
        remote = RemoteEnv(source, pool)
        super().__init__(remote, max_turns=max_turns, setting=remote.setting)

    def close(self) -> None:
        self.env.close()

    def __enter__(self) -> SandboxedEnv:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()


class AsyncSandboxEnv:
    """asyncio client for agent loops: no call blocks the event loop.

    Create with ``await AsyncSandboxEnv.create(source, pool)``. Waiting for a free worker slot holds no thread, so
    any number of episodes may wait while the live ones keep running. Calls go through the pool's one I/O thread
    (``dispatch.py``; any number in flight), starting the env and closing it through the pool's executor. ``step``
    takes what the env's ``step`` takes (the extracted command for games, raw text for tool use).
    """

    def __init__(self, remote: RemoteEnv, executor: Any, dispatcher: CallDispatcher | None = None) -> None:
        self.remote, self._executor, self._dispatcher = remote, executor, dispatcher
        self.setting, self.class_name = remote.setting, remote.class_name
        self._inflight: concurrent.futures.Future[Any] | None = None  # the last call sent through the dispatcher

    @classmethod
    async def create(cls, source: str, pool: WorkerPool, timeout: float | None = None) -> AsyncSandboxEnv:
        """Acquire a worker (at most ``timeout`` s of waiting, default ``acquire_timeout_s``) and load ``source``."""
        worker = await pool.acquire_async(timeout)
        loop = asyncio.get_running_loop()
        try:
            future = loop.run_in_executor(pool.executor, functools.partial(RemoteEnv, source, pool, worker=worker))
        except BaseException:
            pool.release(worker)
            raise
        remote = await shielded(future, lambda r: r.close())
        return cls(remote, pool.executor, pool.dispatcher)

    @property
    def max_turns(self) -> int:
        return self.remote.max_turns

    async def _run(self, fn: Any, *args: Any) -> Any:
        try:
            future = asyncio.get_running_loop().run_in_executor(self._executor, functools.partial(fn, *args))
        except RuntimeError as exc:  # the pool shut down (its executor with it); its workers are gone
            raise SandboxUnavailable("the worker pool is shut down", code="pool_closed") from exc
        return await future

    async def _call(self, op: str, **payload: Any) -> Any:
        if self._dispatcher is None:
            return await self._run(functools.partial(self.remote.worker.call, op, **payload))
        self._inflight = self._dispatcher.submit(self.remote.worker, op, payload)
        return await asyncio.wrap_future(self._inflight)

    async def reset(self, seed: int | None = None) -> tuple[str, dict[str, Any]]:
        return self.remote._reset_result(await self._call("reset", seed=seed))

    async def step(self, action: str) -> StepResult:
        return self.remote._checked(await self._call("step", action=action))

    async def step_calls(self, calls: list[dict[str, Any]], answer: str | None = None) -> StepResult:
        return self.remote._checked(await self._call("step_calls", calls=calls, answer=answer))

    async def call_tool(self, name: str, arguments: Any) -> str:
        return await self._call("call_tool", name=name, arguments=arguments)

    async def tools(self) -> list[dict[str, Any]]:
        return await self._call("tools")

    async def solution(self) -> list[str]:
        return await self._call("solution")

    async def close(self) -> None:
        inflight = self._inflight

        def release() -> None:
            if inflight is not None:  # a call whose awaiting task was cancelled may still run: let it end first
                concurrent.futures.wait([inflight])
            self.remote.close()

        try:
            await self._run(release)
        except SandboxUnavailable:
            self.remote.close()  # after shutdown: releasing is quick and safe to repeat
