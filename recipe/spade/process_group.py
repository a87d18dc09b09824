"""A child command in its own process group that ends with its parent's run, also when the parent gets SIGTERM.

``make learn`` starts the launcher, which starts Ray and the trainer: all of them must end when ``make learn`` is
stopped (Ctrl-C, a scheduler's time limit, ``kill``). Python's default SIGTERM ends the process without unwinding;
:func:`exit_on_sigterm` turns it into ``SystemExit`` so the ``finally`` below runs. SIGTERM is held while the child
starts, so one that arrives before the group exists is delivered only once the ``finally`` can end it.
"""

from __future__ import annotations

import os
import signal
import subprocess
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

__all__ = ["exit_on_sigterm", "process_group"]


def _raise_exit(signum: int, _frame: object) -> None:
    raise SystemExit(128 + signum)


def exit_on_sigterm() -> None:
    """Make SIGTERM raise ``SystemExit(143)`` in the main thread, so ``finally`` blocks run."""
    signal.signal(signal.SIGTERM, _raise_exit)


def _unblock_sigterm() -> None:  # in the child, before exec: it must not inherit the held SIGTERM
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGTERM})


@contextmanager
def process_group(command: Sequence[str], **popen: Any) -> Iterator[subprocess.Popen]:
    """Start ``command`` in a new session; on leaving the block, SIGTERM its whole group if it still runs."""
    held = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM})
    try:
        proc = subprocess.Popen(list(command), start_new_session=True, preexec_fn=_unblock_sigterm, **popen)
    except BaseException:
        signal.pthread_sigmask(signal.SIG_SETMASK, held)
        raise
    try:
        signal.pthread_sigmask(signal.SIG_SETMASK, held)  # a SIGTERM held during the start is delivered here
        yield proc
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGTERM)
            proc.wait(timeout=60)
