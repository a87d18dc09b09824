"""Many workers' calls from one host thread: every request is sent first, then the replies are read as they come.

A call to one worker is a ping-pong: while it runs its env the host waits, and while the host checks the reply the
worker waits. Stepping many environments one after the other leaves all but one CPU idle and pays a cross-CPU
wake-up per step. :func:`call_many` sends every request (``Worker.begin``) and then reads each reply once its pipe is
readable (``Worker.finish``), so the workers run their envs at the same time, on every CPU, while the host checks
the replies that are in. Each call keeps every check and limit of ``Worker.call`` (its own deadline, the reply
caps, the sequence number, the unsolicited-data check): a worker that fails is killed as it would be alone, and
its slot in the result holds the error; the other calls go on. A reply that comes in pieces is read as its pieces
arrive (``ReplyLineReader.pump``): a worker that drips its reply holds up only its own call.
"""

from __future__ import annotations

import math
import select
import time
from collections.abc import Sequence
from typing import Any

from spade_envs.sandbox.errors import SandboxError
from spade_envs.sandbox.process import PendingCall, Worker

__all__ = ["call_many"]


def call_many(
    calls: Sequence[tuple[Worker, str, dict[str, Any]]], timeout: float | None = None
) -> list[Any | SandboxError]:
    """Run ``(worker, op, payload)`` calls concurrently; each result, or the :class:`SandboxError` it raised, in order.

    ``timeout``: each call's own deadline, as for ``Worker.call``. A worker may appear once (``ValueError``
    otherwise, before anything is sent). No worker is pinned to the caller's CPU (``follow_caller_cpu``): many
    wait on one thread.
    """
    if len({id(worker) for worker, _, _ in calls}) != len(calls):
        raise ValueError("call_many: a worker may take one call at a time, and appears twice")
    results: list[Any] = [None] * len(calls)
    pending: dict[int, tuple[int, Worker, PendingCall]] = {}  # by reply fd
    writing: dict[int, int] = {}  # request fd -> reply fd, while part of that request is unwritten
    poller = select.poll()  # not select.select: that fails on descriptors >= 1024
    try:
        for index, (worker, op, payload) in enumerate(calls):
            try:  # block=False: a worker that stopped reading its request holds up no other call
                sent = worker.begin(op, timeout, payload, pin=False, block=False)
            except SandboxError as exc:
                results[index] = exc
                continue
            pending[worker.reply_fd] = (index, worker, sent)
            poller.register(worker.reply_fd, select.POLLIN)
            if worker.sending:
                writing[worker.request_fd] = worker.reply_fd
                poller.register(worker.request_fd, select.POLLOUT)
        while pending:
            first = min(sent.deadline for _, _, sent in pending.values())
            wait_ms = max(0, math.ceil((first - time.monotonic()) * 1000))
            ready = []
            for fd, _ in poller.poll(wait_ms):
                if fd in writing:  # more of a long request fits
                    worker = pending[writing[fd]][1]
                    if worker.push():
                        poller.unregister(fd)
                        if worker.sending:  # writing failed: finish reports it
                            ready.append(writing[fd])
                        del writing[fd]
                elif pending[fd][1].pump():  # a readable pipe's reply is finished once whole (one read, never waits)
                    ready.append(fd)
            now = time.monotonic()  # and a call past its deadline is finished now: it times out, its worker dies
            ready += [fd for fd, (_, _, sent) in pending.items() if sent.deadline <= now and fd not in ready]
            for fd in dict.fromkeys(ready):
                index, worker, sent = pending.pop(fd)
                poller.unregister(fd)  # before finish: a failed call kills its worker, which closes its fds
                if writing.pop(worker.request_fd, None) is not None:
                    poller.unregister(worker.request_fd)
                try:
                    results[index] = worker.finish(sent)
                except SandboxError as exc:
                    results[index] = exc
    except BaseException:
        for _, worker, _ in pending.values():  # interrupted (KeyboardInterrupt, a host bug): no half-used worker
            worker.kill()
        raise
    return results
