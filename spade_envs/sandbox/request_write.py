"""Writing one request to a worker's pipe, which env code may stop reading: with a deadline, or never waiting.

``Worker.call`` writes with the call's deadline (a worker that stopped reading is killed at it). A thread that
carries many workers' calls (``inflight.py``) must not wait on one: ``begin(block=False)`` writes what fits, and
:meth:`RequestWriter.push` writes more whenever the pipe is writable; ``finish`` fails a call whose request is
still not all out (at its deadline, or when the worker answered before taking it all).
"""

from __future__ import annotations

import os
import time
from typing import Any

from spade_envs.sandbox.errors import EnvCrashed, EnvTimeout, ProtocolViolation

__all__ = ["RequestWriter"]


class RequestWriter:
    """The request-writing half of ``Worker``.

    Uses the worker's ``dead``, ``_req_w``, ``_write_poller``, ``_fail`` and ``_death_note``; keeps what a
    non-blocking write left in ``_unsent``.
    """

    _unsent: memoryview | None = None

    @property
    def sending(self) -> bool:
        """Whether part of the pending call's request is still unwritten (``begin(block=False)``; see :meth:`push`)."""
        return self._unsent is not None

    @property
    def request_fd(self) -> int:
        """The request pipe's write end (writable once the worker took some of the request): for ``poll``."""
        return self._req_w

    def push(self) -> bool:
        """Write more of the request (call it only when the pipe is writable); True once ``finish`` won't wait.

        True when the request is all out, or writing it failed in a way ``finish`` will report. Never blocks and
        never raises.
        """
        view = self._unsent
        if view is None or self.dead:
            return True
        try:
            self._unsent = view[os.write(self._req_w, view) :] or None
        except BlockingIOError:
            return False
        except OSError:
            return True  # finish's own write fails the same way and reports it
        return self._unsent is None

    def _end_write(self, pending: Any) -> None:
        """In ``finish``: one more try at what ``push`` left unwritten, then the call fails if some is still left."""
        view, self._unsent = self._unsent, None
        self._write(view, pending.deadline, pending.op, pending.timeout_code, block=False)  # type: ignore[arg-type]
        if self._unsent is None:
            return
        if time.monotonic() >= pending.deadline:
            code = pending.timeout_code if pending.timeout_code == "episode_wall_budget" else "write_timeout"
            self._fail(EnvTimeout(f"{pending.op}: the worker did not take the request in time; it was killed",
                                  code=code))  # fmt: skip
        self._fail(ProtocolViolation(f"the worker answered {pending.op} before it took the whole request",
                                     code="unsolicited_data"))  # fmt: skip

    def _write(self, data: bytes | memoryview, deadline: float, op: str, timeout_code: str,
               block: bool = True) -> None:  # fmt: skip
        view = memoryview(data)
        while view:
            try:
                view = view[os.write(self._req_w, view) :]
            except BlockingIOError:
                pass
            except OSError:
                self._fail(EnvCrashed(self._death_note("before the request could be sent")))
            if view and not block:
                self._unsent = view
                return
            if view:
                left = deadline - time.monotonic()
                if left <= 0 or not self._write_poller.poll(max(1, int(left * 1000))):
                    code = timeout_code if timeout_code == "episode_wall_budget" else "write_timeout"
                    self._fail(
                        EnvTimeout(f"{op}: the worker did not take the request in time; it was killed", code=code)
                    )
