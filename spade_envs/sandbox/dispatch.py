"""One I/O thread for every asyncio client of a pool: requests go out as they come, replies are read as they arrive.

The asyncio client used to run each call on a thread of the pool's executor: one blocked thread per call in flight
(at most 64), and every reply handed between threads under the GIL. The dispatcher's thread sends each request
(``Worker.begin``) as soon as it is submitted and polls every pending reply pipe together, finishing each call
(``Worker.finish``: every check and limit of ``Worker.call``) once its pipe is readable. Any number of calls can be
in flight and the workers run at the same time, as with ``batch.call_many``; a failed call's error goes to its own
future only, and a reply that comes in pieces is read as they arrive (``ReplyLineReader.pump``), so a worker that
drips its reply holds up only its own call. Worker starts and kills stay on the executor: they can take
milliseconds, and here they would hold up every other call.
"""

from __future__ import annotations

import math
import os
import select
import threading
import time
from concurrent.futures import Future
from typing import Any

from spade_envs.sandbox.errors import SandboxUnavailable
from spade_envs.sandbox.process import PendingCall, Worker

__all__ = ["CallDispatcher"]

_Submitted = tuple[Worker, str, dict[str, Any], "float | None", "Future[Any]"]


class CallDispatcher:
    """Carries calls to workers on one daemon thread (started on the first :meth:`submit`); see the module doc."""

    def __init__(self, name: str = "spade-sandbox-io") -> None:
        self._name = name
        self._lock = threading.Lock()
        self._incoming: list[_Submitted] = []
        self._wake_r, self._wake_w = os.pipe()  # a byte here wakes the thread's poll: new calls, or close
        os.set_blocking(self._wake_r, False)
        os.set_blocking(self._wake_w, False)
        self._thread: threading.Thread | None = None
        self._closed = False

    def submit(self, worker: Worker, op: str, payload: dict[str, Any], timeout: float | None = None) -> Future[Any]:
        """Send ``op`` to ``worker`` from the I/O thread; the future holds its checked result or typed error.

        One call per worker at a time, as for ``Worker.call``. After :meth:`close`, ``SandboxUnavailable``
        (``pool_closed``).
        """
        future: Future[Any] = Future()
        with self._lock:
            if self._closed:
                raise SandboxUnavailable("the worker pool is shut down", code="pool_closed")
            self._incoming.append((worker, op, payload, timeout, future))
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name=self._name, daemon=True)
                self._thread.start()
        self._wake()
        return future

    def close(self, timeout: float = 10.0) -> None:
        """Stop the thread; calls still pending fail with ``SandboxUnavailable`` (their workers are the pool's to kill).

        Returns once the thread has stopped touching any worker (or after ``timeout``).
        """
        with self._lock:
            self._closed = True
            thread = self._thread
        self._wake()
        if thread is not None:
            thread.join(timeout)
        if thread is None or not thread.is_alive():
            for fd in (self._wake_r, self._wake_w):
                try:
                    os.close(fd)
                except OSError:
                    pass

    def _wake(self) -> None:
        try:
            os.write(self._wake_w, b"\0")
        except (BlockingIOError, OSError):  # full: a wake-up is pending anyway; closed: the thread is gone
            pass

    def _run(self) -> None:
        poller = select.poll()  # not select.select: that fails on descriptors >= 1024
        poller.register(self._wake_r, select.POLLIN)
        pending: dict[int, tuple[Worker, PendingCall, Future[Any]]] = {}  # by reply fd
        writing: dict[int, int] = {}  # request fd -> reply fd, while part of that request is unwritten

        def finish(fd: int) -> None:
            worker, sent, future = pending.pop(fd)
            poller.unregister(fd)  # before finish: a failed call kills its worker, which closes this fd
            if writing.pop(worker.request_fd, None) is not None:
                poller.unregister(worker.request_fd)
            try:
                future.set_result(worker.finish(sent))
            except BaseException as exc:  # noqa: BLE001
                future.set_exception(exc)

        while True:
            # A worker killed by another thread (its fds closed, their numbers free for a new worker's pipes) is
            # finished before anything is registered again: no stale entry can stand for a new worker's fd.
            for fd in [fd for fd, (worker, _, _) in pending.items() if worker.dead]:
                finish(fd)
            with self._lock:
                incoming, self._incoming, closed = self._incoming, [], self._closed
            if closed:
                gone = SandboxUnavailable("the worker pool is shut down", code="pool_closed")
                for _, _, future in pending.values():
                    future.set_exception(gone)
                for *_, future in incoming:
                    if future.set_running_or_notify_cancel():
                        future.set_exception(gone)
                return
            for worker, op, payload, timeout, future in incoming:
                if not future.set_running_or_notify_cancel():
                    continue  # cancelled before it was sent: the worker never saw it
                try:  # block=False: a worker that stopped reading its requests holds up no other call
                    sent = worker.begin(op, timeout, payload, pin=False, block=False)
                except BaseException as exc:  # noqa: BLE001  (a typed SandboxError, or a host bug: the caller's)
                    future.set_exception(exc)
                    continue
                pending[worker.reply_fd] = (worker, sent, future)
                poller.register(worker.reply_fd, select.POLLIN)
                if worker.sending:
                    writing[worker.request_fd] = worker.reply_fd
                    poller.register(worker.request_fd, select.POLLOUT)
            wait_ms = -1
            if pending:
                first = min(sent.deadline for _, sent, _ in pending.values())
                wait_ms = max(0, math.ceil((first - time.monotonic()) * 1000))
            ready = []
            for fd, _ in poller.poll(wait_ms):
                if fd == self._wake_r:
                    _drain(fd)
                elif fd in writing:  # more of a long request fits
                    reply_fd = writing[fd]
                    worker = pending[reply_fd][0]
                    if worker.push():
                        del writing[fd]
                        poller.unregister(fd)
                        if worker.sending:  # writing failed: finish reports it
                            ready.append(reply_fd)
                elif fd in pending and pending[fd][0].pump():  # one read, never a wait: the reply is whole
                    ready.append(fd)
            now = time.monotonic()  # a call past its deadline is finished now: it times out, its worker dies
            ready += [fd for fd, (_, sent, _) in pending.items() if sent.deadline <= now and fd not in ready]
            for fd in dict.fromkeys(ready):
                if fd in pending:
                    finish(fd)


def _drain(fd: int) -> None:
    try:
        while os.read(fd, 4096):
            pass
    except (BlockingIOError, OSError):
        pass
