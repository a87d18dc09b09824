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

import os
import select
import threading
from concurrent.futures import Future
from typing import Any

from spade_envs.sandbox.errors import SandboxUnavailable
from spade_envs.sandbox.inflight import InFlight
from spade_envs.sandbox.process import Worker

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
        flight: InFlight[Future[Any]] = InFlight()
        flight.poller.register(self._wake_r, select.POLLIN)

        def finish(fd: int) -> None:
            worker, sent, future = flight.pop(fd)
            try:
                future.set_result(worker.finish(sent))
            except BaseException as exc:  # noqa: BLE001
                future.set_exception(exc)

        while True:
            for fd in flight.killed_elsewhere():  # before anything is registered again (InFlight)
                finish(fd)
            with self._lock:
                incoming, self._incoming, closed = self._incoming, [], self._closed
            if closed:
                gone = SandboxUnavailable("the worker pool is shut down", code="pool_closed")
                for _, _, future in flight:
                    future.set_exception(gone)
                for *_, future in incoming:
                    if future.set_running_or_notify_cancel():
                        future.set_exception(gone)
                return
            for worker, op, payload, timeout, future in incoming:
                if not future.set_running_or_notify_cancel():
                    continue  # cancelled before it was sent: the worker never saw it
                try:
                    flight.send(worker, op, payload, timeout, future)
                except BaseException as exc:  # noqa: BLE001  (a typed SandboxError, or a host bug: the caller's)
                    future.set_exception(exc)
            events = flight.poller.poll(flight.wait_ms())
            if any(fd == self._wake_r for fd, _ in events):
                _drain(self._wake_r)
            for fd in flight.ready(events):
                finish(fd)


def _drain(fd: int) -> None:
    try:
        while os.read(fd, 4096):
            pass
    except (BlockingIOError, OSError):
        pass
