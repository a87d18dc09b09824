"""A first-come, first-served counter of worker slots that threads and asyncio tasks can both wait on.

An asyncio task waits on a future, never on a thread: thousands of episodes can queue for ``max_workers`` slots
while the few executor threads keep serving the live ones. A freed slot is handed straight to the oldest waiter,
so a waiter that gives up (timeout, cancellation) after being handed one passes it on instead of leaking it.
"""

from __future__ import annotations

import asyncio
import threading
from collections import deque

__all__ = ["SlotGate"]


class _Waiter:
    __slots__ = ("event", "future", "granted", "loop")

    def __init__(self, loop: asyncio.AbstractEventLoop | None = None) -> None:
        self.granted = False
        self.loop = loop
        self.future: asyncio.Future[None] | None = loop.create_future() if loop is not None else None
        self.event = threading.Event() if loop is None else None

    def wake(self) -> bool:
        """Tell the waiter it holds a slot now; ``False`` if it can no longer be told (its loop is closed)."""
        if self.event is not None:
            self.event.set()
            return True
        try:
            self.loop.call_soon_threadsafe(_resolve, self.future)  # type: ignore[union-attr]
        except RuntimeError:  # the loop is closed: nobody will ever await this future
            return False
        return True


def _resolve(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)


class SlotGate:
    """``capacity`` slots; :meth:`take` (threads) and :meth:`take_async` (tasks) wait in one FIFO queue."""

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self._free = capacity
        self._waiters: deque[_Waiter] = deque()
        self._lock = threading.Lock()

    @property
    def waiting(self) -> int:
        """Threads and tasks waiting for a slot now."""
        with self._lock:
            return len(self._waiters)

    @property
    def free(self) -> int:
        with self._lock:
            return self._free

    def _try_take(self, waiter: _Waiter) -> bool:
        with self._lock:
            if self._free > 0 and not self._waiters:
                self._free -= 1
                return True
            self._waiters.append(waiter)
            return False

    def _give_up(self, waiter: _Waiter) -> bool:
        """The waiter stops waiting; ``True`` if it was handed a slot meanwhile (it holds it now)."""
        with self._lock:
            if waiter.granted:
                return True
            self._waiters.remove(waiter)
            return False

    def take(self, timeout: float | None) -> bool:
        """Block this thread until a slot is ours (``True``) or ``timeout`` seconds pass (``False``)."""
        waiter = _Waiter()
        if self._try_take(waiter):
            return True
        try:
            if waiter.event.wait(timeout):  # type: ignore[union-attr]
                return True
        except BaseException:
            if self._give_up(waiter):
                self.give()
            raise
        return self._give_up(waiter)

    async def take_async(self, timeout: float | None) -> bool:
        """Wait (without a thread) until a slot is ours (``True``) or ``timeout`` seconds pass (``False``)."""
        waiter = _Waiter(asyncio.get_running_loop())
        if self._try_take(waiter):
            return True
        try:
            await asyncio.wait_for(asyncio.shield(waiter.future), timeout)  # type: ignore[arg-type]
            return True
        except asyncio.TimeoutError:
            return self._give_up(waiter)
        except BaseException:  # cancelled: pass on a slot that was handed over meanwhile
            if self._give_up(waiter):
                self.give()
            raise

    def give(self) -> None:
        """Free one slot: hand it to the oldest waiter that can still take it, else count it free."""
        while True:
            with self._lock:
                if not self._waiters:
                    self._free = min(self._free + 1, self.capacity)
                    return
                waiter = self._waiters.popleft()
                waiter.granted = True
            if waiter.wake():
                return
