"""Daemon worker threads for a suite's samples that an interruption abandons instead of waiting for.

A model call can take many minutes and a blocking HTTP read cannot be cancelled, so on Ctrl-C or SIGTERM the run
must not wait for the calls in flight (SLURM allows 30 s between SIGTERM and SIGKILL): :meth:`Jobs.run` returns at
once, no further job starts, and the threads still in a call are left to finish in the background (daemon threads
die with the process). Whatever they return is the caller's to ignore (the runner closes its store first).
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable, Sequence
from typing import Any

__all__ = ["Jobs"]

#: How often the main thread wakes up while waiting, so that a signal handler (Ctrl-C, SIGTERM) runs promptly.
WAKE_S = 0.2


class Jobs:
    """Run ``fn(*job)`` for every job on ``concurrency`` daemon threads named ``<name>-<i>``."""

    def __init__(self, jobs: Sequence[tuple[Any, ...]], fn: Callable[..., None], concurrency: int, name: str) -> None:
        self._queue = deque(jobs)
        self._fn, self._name = fn, name
        self._lock = threading.Lock()
        self._stopped = False
        self._done = threading.Event()
        self.threads = [threading.Thread(target=self._work, name=f"{name}-{i}", daemon=True)
                        for i in range(min(concurrency, len(jobs)))]  # fmt: skip
        self._running = len(self.threads)

    def _work(self) -> None:
        try:
            while True:
                with self._lock:
                    if self._stopped or not self._queue:
                        return
                    job = self._queue.popleft()
                self._fn(*job)
        finally:
            with self._lock:
                self._running -= 1
                if self._running == 0:
                    self._done.set()

    def stop(self) -> None:
        """Start no further job and make :meth:`run` return now; the jobs in flight are abandoned (a fatal error)."""
        with self._lock:
            self._stopped = True
        self._done.set()

    def run(self) -> str | None:
        """Run every job; on ``KeyboardInterrupt`` / ``SystemExit`` stop at once and say which, else ``None``.

        Also returns (``None``) as soon as a job calls :meth:`stop`.
        """
        if not self.threads:
            return None
        try:
            for thread in self.threads:
                thread.start()
            while not self._done.wait(WAKE_S):
                pass
        except (KeyboardInterrupt, SystemExit) as exc:
            with self._lock:
                self._stopped = True
            return type(exc).__name__ if isinstance(exc, KeyboardInterrupt) else f"SystemExit({exc.code})"
        return None
