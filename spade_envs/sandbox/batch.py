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

from collections.abc import Sequence
from typing import Any

from spade_envs.sandbox.errors import SandboxError
from spade_envs.sandbox.inflight import InFlight
from spade_envs.sandbox.process import Worker

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
    flight: InFlight[int] = InFlight()
    try:
        for index, (worker, op, payload) in enumerate(calls):
            try:
                flight.send(worker, op, payload, timeout, index)
            except SandboxError as exc:
                results[index] = exc
        while flight:
            for fd in flight.ready(flight.poller.poll(flight.wait_ms())):
                worker, sent, index = flight.pop(fd)
                try:
                    results[index] = worker.finish(sent)
                except SandboxError as exc:
                    results[index] = exc
    except BaseException:
        for worker, _, _ in flight:  # interrupted (KeyboardInterrupt, a host bug): no half-used worker
            worker.kill()
        raise
    return results
