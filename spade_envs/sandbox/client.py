"""Environments running in a sandbox worker: a synchronous proxy, a gymnasium env and an asyncio client.

All three speak the contract of :mod:`spade_envs.contract`; faults of the environment surface as
:mod:`~spade_envs.sandbox.errors` exceptions, never as agent rewards.
"""

from __future__ import annotations

import asyncio
import functools
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from spade_envs.contract import StepResult
from spade_envs.gym_adapter import TextEnv
from spade_envs.sandbox.errors import ProtocolViolation
from spade_envs.sandbox.pool import WorkerPool
from spade_envs.sandbox.process import Worker
from spade_envs.sandbox.protocol import check_step_result

__all__ = ["AsyncSandboxEnv", "RemoteEnv", "SandboxedEnv"]


class RemoteEnv:
    """The contract's methods, forwarded to a worker that loaded ``source``. Not thread-safe; one episode."""

    def __init__(self, source: str, pool: WorkerPool, filename: str = "<env>") -> None:
        self.pool = pool
        self.worker: Worker = pool.acquire()
        try:
            meta = self.worker.call("init", timeout=pool.config.start_timeout_s, source=source, filename=filename)
        except BaseException:
            pool.release(self.worker)
            raise
        self.class_name: str = meta["class_name"]
        self.setting: str = meta["setting"]
        self.max_turns: int = meta["max_turns"]

    def reset(self, seed: int | None = None) -> tuple[str, dict[str, Any]]:
        obs, info, max_turns = self.worker.call("reset", seed=seed)
        if isinstance(max_turns, int) and not isinstance(max_turns, bool) and max_turns > 0:
            self.max_turns = max_turns  # some environments size their turn budget per episode
        return obs, info

    def step(self, action: str) -> StepResult:
        return self._checked(self.worker.call("step", action=action))

    def step_calls(self, calls: list[dict[str, Any]], answer: str | None = None) -> StepResult:
        return self._checked(self.worker.call("step_calls", calls=calls, answer=answer))

    def _checked(self, result: Any) -> StepResult:
        """The worker already checked this; a reply that fails the host's check means env code subverted it."""
        try:
            return check_step_result(result)
        except ValueError as exc:
            self.worker.kill()
            raise ProtocolViolation(f"the worker returned an invalid step result: {exc}") from exc

    def call_tool(self, name: str, arguments: Any) -> str:
        return self.worker.call("call_tool", name=name, arguments=arguments)

    def tools(self) -> list[dict[str, Any]]:
        return self.worker.call("tools")

    def solution(self) -> list[str]:
        return self.worker.call("solution")

    def close(self) -> None:
        self.pool.release(self.worker)


class SandboxedEnv(TextEnv):
    """A gymnasium env whose code runs in a sandbox worker (``gymnasium.utils.env_checker.check_env`` passes).

    Closing it (or leaving a ``with`` block) kills the worker; ``close`` is safe to call twice.
    """

    def __init__(self, source: str, pool: WorkerPool, filename: str = "<env>", max_turns: int | None = None) -> None:
        remote = RemoteEnv(source, pool, filename)
        super().__init__(remote, max_turns=max_turns, setting=remote.setting)

    def close(self) -> None:
        self.env.close()

    def __enter__(self) -> SandboxedEnv:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()


class AsyncSandboxEnv:
    """asyncio client for agent loops: every call runs on a thread of a shared executor, never blocking the loop.

    Create with ``await AsyncSandboxEnv.create(source, pool)``. ``step`` takes what the env's ``step`` takes (the
    extracted command for games, raw text for tool use).
    """

    _executors: dict[int, ThreadPoolExecutor] = {}

    def __init__(self, remote: RemoteEnv, executor: ThreadPoolExecutor) -> None:
        self.remote, self._executor = remote, executor
        self.setting, self.class_name = remote.setting, remote.class_name

    @classmethod
    async def create(cls, source: str, pool: WorkerPool, filename: str = "<env>") -> AsyncSandboxEnv:
        executor = cls._executors.get(id(pool))
        if executor is None:
            executor = ThreadPoolExecutor(max_workers=min(64, pool.config.max_workers), thread_name_prefix="spade-env")
            cls._executors[id(pool)] = executor
        loop = asyncio.get_running_loop()
        remote = await loop.run_in_executor(executor, functools.partial(RemoteEnv, source, pool, filename))
        return cls(remote, executor)

    @property
    def max_turns(self) -> int:
        return self.remote.max_turns

    async def _run(self, fn: Any, *args: Any) -> Any:
        return await asyncio.get_running_loop().run_in_executor(self._executor, functools.partial(fn, *args))

    async def reset(self, seed: int | None = None) -> tuple[str, dict[str, Any]]:
        return await self._run(self.remote.reset, seed)

    async def step(self, action: str) -> StepResult:
        return await self._run(self.remote.step, action)

    async def step_calls(self, calls: list[dict[str, Any]], answer: str | None = None) -> StepResult:
        return await self._run(self.remote.step_calls, calls, answer)

    async def call_tool(self, name: str, arguments: Any) -> str:
        return await self._run(self.remote.call_tool, name, arguments)

    async def tools(self) -> list[dict[str, Any]]:
        return await self._run(self.remote.tools)

    async def solution(self) -> list[str]:
        return await self._run(self.remote.solution)

    async def close(self) -> None:
        await self._run(self.remote.close)
