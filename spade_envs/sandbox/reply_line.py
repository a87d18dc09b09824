"""Reading one reply line from a worker's pipe, whose write end env code owns: in linear time, never trusting it.

A reply is nearly always one read. A longer one grows a bytearray and only each new chunk is searched for the
newline. Env code can put the pipe in packet mode (``O_DIRECT``): every read then returns one of its writes and data
is always ready, so every further read checks the deadline, and a reply whose pieces average under
``TRICKLE_PIECE_BYTES`` is refused (the worker writes each reply whole, and a reader gets whole pages).

A thread that waits on many workers at once (``batch.call_many``, ``dispatch.py``) must never block on one:
:meth:`ReplyLineReader.pump` takes in what a readable pipe holds and says whether the line is complete, so a
worker that drips its reply holds up only its own call.
"""

from __future__ import annotations

import os
import time
from typing import Any

from spade_envs.sandbox.errors import EnvCrashed, EnvTimeout, OutputTooLarge, ProtocolViolation

__all__ = ["TRICKLE_PIECES", "TRICKLE_PIECE_BYTES", "ReplyLineReader"]

#: A reply read in at least this many pieces must average ``TRICKLE_PIECE_BYTES`` per piece, else it is refused
#: (``trickled_reply``): the worker writes each reply whole and the kernel hands a reader whole pages (4 KiB), so
#: only env code that put the pipe in packet mode makes smaller pieces, one per host read.
TRICKLE_PIECES, TRICKLE_PIECE_BYTES = 64, 1024


class ReplyLineReader:
    """The reply-reading half of ``Worker``.

    Uses the worker's ``config``, ``_resp_r``, ``_wait``, ``_buffer``, ``_fail`` and ``_death_note``; keeps what
    :meth:`pump` read in ``_early`` (``[bytearray, pieces]``).
    """

    _early: list[Any] | None = None

    def pump(self) -> bool:
        """Read once from the reply pipe (call it only when the pipe is readable); True once ``finish`` won't wait.

        True when the line is complete, or the call has already failed in a way ``finish`` will report (the worker
        died or closed its end, the reply outgrew the cap, it trickles). Never blocks and never raises.
        """
        if getattr(self, "dead", False):
            return True
        try:
            chunk = os.read(self._resp_r, 1 << 16)  # type: ignore[attr-defined]
        except OSError:
            return True  # finish's own read fails the same way and reports it
        early = self._early
        if not chunk:
            return True
        if early is None:
            early = self._early = [bytearray(), 0]
        early[0] += chunk
        early[1] += 1
        size, pieces = len(early[0]), early[1]
        cap = self.config.max_response_bytes  # type: ignore[attr-defined]
        trickles = pieces >= TRICKLE_PIECES and size < pieces * TRICKLE_PIECE_BYTES
        return b"\n" in chunk or size > cap or trickles

    def _read_line(self, deadline: float, op: str, timeout_code: str, cap: int, left: int) -> bytes:
        """One reply line (what :meth:`pump` read first); the rest of the read stays in ``_buffer``."""
        limit = min(cap, left)
        early, self._early = self._early, None
        if early is None:
            chunk, pieces = self._read_chunk(deadline, op, timeout_code), 1
        else:
            chunk, pieces = bytes(early[0]), early[1]
        end = chunk.find(b"\n")
        if 0 <= end <= limit:  # the common case: the whole reply in one read
            self._buffer = chunk[end + 1 :]
            return chunk[:end]
        buffer = self._buffer = bytearray(chunk)
        while end < 0 and len(buffer) <= limit:
            if time.monotonic() > deadline:
                self._fail(EnvTimeout(f"{op} did not answer in time; the worker was killed", code=timeout_code))  # type: ignore[attr-defined]
            if pieces >= TRICKLE_PIECES and len(buffer) < pieces * TRICKLE_PIECE_BYTES:
                why = f"{op}: the reply came in {pieces} pieces of {len(buffer) // pieces} bytes on average"
                self._fail(ProtocolViolation(f"{why}; the worker was killed", code="trickled_reply"))  # type: ignore[attr-defined]
            chunk = self._read_chunk(deadline, op, timeout_code)
            pieces += 1
            found = chunk.find(b"\n")  # only the new chunk: the buffer holds none
            end = len(buffer) + found if found >= 0 else -1
            buffer += chunk  # in place, amortised: no copy of what came before
        if end < 0 or end > limit:
            self._fail(self._too_large(op, cap, left))  # type: ignore[attr-defined]
        with memoryview(buffer) as view:
            line = bytes(view[:end])
        del buffer[: end + 1]
        return line

    def _read_chunk(self, deadline: float, op: str, timeout_code: str) -> bytes:
        if not self._wait.readable(deadline):  # type: ignore[attr-defined]
            self._fail(EnvTimeout(f"{op} did not answer in time; the worker was killed", code=timeout_code))  # type: ignore[attr-defined]
        chunk = os.read(self._resp_r, 1 << 16)  # type: ignore[attr-defined]
        if not chunk:
            self._fail(EnvCrashed(self._death_note(f"during {op}")))  # type: ignore[attr-defined]
        return chunk

    def _too_large(self, op: str, cap: int, left: int) -> OutputTooLarge:
        if left < cap:
            budget = self.config.max_episode_reply_bytes  # type: ignore[attr-defined]
            return OutputTooLarge(f"{op}: the episode's replies exceed {budget} bytes; the worker was killed",
                                  code="episode_output_budget")  # fmt: skip
        return OutputTooLarge(f"{op} reply exceeds {cap} bytes; the worker was killed", code="reply_too_large")
