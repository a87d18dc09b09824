"""A child command in its own process group that ends with its parent's run, also when the parent gets SIGTERM.

``make learn`` starts the launcher, which starts Ray and the trainer: all of them must end when ``make learn`` is
stopped (Ctrl-C, a scheduler's time limit, ``kill``). Python's default SIGTERM ends the process without unwinding;
:func:`exit_on_sigterm` turns it into ``SystemExit`` so the ``finally`` below runs. SIGTERM is held while the child
starts, so one that arrives before the group exists takes effect only once the ``finally`` can end it.
"""

from __future__ import annotations

import os
import signal
import subprocess
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

__all__ = ["exit_on_sigterm", "process_group"]


_starting = False  # a child is being started: a SIGTERM now is held until its group can be ended
_held: int | None = None


def _raise_exit(signum: int, _frame: object) -> None:
    global _held
    if _starting:
        _held = signum
        return
    raise SystemExit(128 + signum)


def exit_on_sigterm() -> None:
    """Make SIGTERM raise ``SystemExit(143)`` in the main thread, so ``finally`` blocks run."""
    signal.signal(signal.SIGTERM, _raise_exit)


@contextmanager
def process_group(command: Sequence[str], **popen: Any) -> Iterator[subprocess.Popen]:
    """Start ``command`` in a new session; on leaving the block, SIGTERM its whole group if it still runs.

    A flag, not the signal mask, holds a SIGTERM that arrives during the start: a process-directed signal goes to
    any thread that does not block it, and Python runs its handler in the main thread regardless.
    """
    global _starting, _held
    _starting = True
    try:
        proc = subprocess.Popen(list(command), start_new_session=True, **popen)
    except BaseException:
        _starting = False
        if _held is not None:
            signum, _held = _held, None
            raise SystemExit(128 + signum) from None
        raise
    try:
        _starting = False  # inside the `try`: a SIGTERM from here on raises where the `finally` ends the group
        if _held is not None:
            signum, _held = _held, None
            raise SystemExit(128 + signum)
        yield proc
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGTERM)
            proc.wait(timeout=60)
