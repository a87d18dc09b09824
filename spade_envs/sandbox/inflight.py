"""The calls one host thread has in flight to many workers, and the one ``poll`` that moves them all along.

``batch.call_many`` (one batch, then return) and ``dispatch.CallDispatcher`` (a long-lived I/O thread) wait on many
workers from one thread. Neither may block on any one worker: a request that does not fit in its pipe is written
as the worker takes it (``Worker.push``), a reply is read as its pieces arrive (``Worker.pump``), and a call past its
deadline is finished at once (it times out; its worker dies). :class:`InFlight` holds that bookkeeping; finishing a
call (``Worker.finish``, every check of ``Worker.call``) and what to do with its outcome stay with the caller.
"""

from __future__ import annotations

import math
import select
import time
from collections.abc import Iterator
from typing import Any, Generic, TypeVar

from spade_envs.sandbox.process import PendingCall, Worker

__all__ = ["InFlight"]

Tag = TypeVar("Tag")


class InFlight(Generic[Tag]):
    """Calls sent and not yet finished, by their worker's reply fd; ``tag`` is the caller's (an index, a future).

    Not thread-safe: one thread sends, polls and pops.
    """

    def __init__(self) -> None:
        self.poller = select.poll()  # not select.select: that fails on descriptors >= 1024
        self._calls: dict[int, tuple[Worker, PendingCall, Tag]] = {}  # by reply fd
        self._writing: dict[int, int] = {}  # request fd -> reply fd, while part of that request is unwritten

    def __len__(self) -> int:
        return len(self._calls)

    def __iter__(self) -> Iterator[tuple[Worker, PendingCall, Tag]]:
        return iter(list(self._calls.values()))

    def send(self, worker: Worker, op: str, payload: dict[str, Any], timeout: float | None, tag: Tag) -> None:
        """``worker.begin`` without waiting on its request pipe; what ``begin`` raises is the caller's."""
        sent = worker.begin(op, timeout, payload, pin=False, block=False)
        self._calls[worker.reply_fd] = (worker, sent, tag)
        self.poller.register(worker.reply_fd, select.POLLIN)
        if worker.sending:
            self._writing[worker.request_fd] = worker.reply_fd
            self.poller.register(worker.request_fd, select.POLLOUT)

    def wait_ms(self) -> int:
        """Milliseconds until the first deadline (a ``poll`` timeout); -1 with nothing in flight."""
        if not self._calls:
            return -1
        first = min(sent.deadline for _, sent, _ in self._calls.values())
        return max(0, math.ceil((first - time.monotonic()) * 1000))

    def ready(self, events: list[tuple[int, int]]) -> list[int]:
        """The reply fds of calls that ``finish`` can end now, after ``poll`` returned ``events``.

        A call is ready when its reply is whole, its request failed to go out, its pipe reported an end or an
        error, or its deadline passed. Events on fds that are not this set's (a wake-up pipe) are ignored.
        """
        ready: dict[int, None] = {}
        for fd, _ in events:
            if fd in self._writing:  # more of a long request fits
                reply_fd = self._writing[fd]
                worker = self._calls[reply_fd][0]
                if worker.push():
                    del self._writing[fd]
                    self.poller.unregister(fd)
                    if worker.sending:  # writing failed: finish reports it
                        ready[reply_fd] = None
            elif fd in self._calls and self._calls[fd][0].pump():  # one read, never a wait
                ready[fd] = None
        now = time.monotonic()
        for fd, (_, sent, _) in self._calls.items():
            if sent.deadline <= now:
                ready[fd] = None
        return list(ready)

    def killed_elsewhere(self) -> list[int]:
        """Reply fds of calls whose worker another thread killed: pop them before anything new is sent.

        Its fds are closed and their numbers free for a new worker's pipes; a stale entry must not stand for them.
        """
        return [fd for fd, (worker, _, _) in self._calls.items() if worker.dead]

    def pop(self, fd: int) -> tuple[Worker, PendingCall, Tag]:
        """Stop watching one call (before ``finish``: a failed call kills its worker, which closes these fds)."""
        worker, sent, tag = self._calls.pop(fd)
        self.poller.unregister(fd)
        if self._writing.pop(worker.request_fd, None) is not None:
            self.poller.unregister(worker.request_fd)
        return worker, sent, tag
