r"""Run scorer calls (math-verify, Reasoning-Gym's ``score_answer``) in reusable worker processes with a hard deadline.

A scorer can run for ever on a crafted answer (``\boxed{70^{70^{70}}}`` makes sympy compute a huge power in C):
inside the evaluation's threads such a call holds the GIL and freezes every other thread, and no in-process alarm
can stop it. Here each call goes to a separate Python process over a pipe; when the reply does not come within
``timeout_s`` the process is killed (SIGKILL) and replaced, and the caller gets :class:`ScorerTimeout`. Processes are
reused between calls (a fresh interpreter per call would cost an import of sympy each time), and started with
``python -m spade_envs.evaluation.scorer_worker``, not ``multiprocessing``, so no ``__main__`` module is re-run and
no threaded process is forked.
"""

from __future__ import annotations

import atexit
import os
import pickle
import select
import struct
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from spade_envs.envs.errors import SpadeEnvError

__all__ = [
    "ScorerError",
    "ScorerPool",
    "ScorerRaised",
    "SIZE_VARIABLE",
    "ScorerTimeout",
    "read_frame",
    "shared_pool",
    "write_frame",
]

_HEADER = struct.Struct("!Q")
_ROOT = str(Path(__file__).resolve().parents[2])  # the directory that holds the spade_envs package


class ScorerTimeout(SpadeEnvError):
    """A scorer call did not return within its deadline; its process was killed. Count the answer as wrong."""


class ScorerError(SpadeEnvError):
    """A scorer process died or could not start."""


class ScorerRaised(SpadeEnvError):
    """The scorer function itself raised; ``original`` is its exception (or its text when it did not pickle)."""

    def __init__(self, original: BaseException | str) -> None:
        super().__init__(original if isinstance(original, str) else f"{type(original).__name__}: {original}")
        self.original = original


def write_frame(fd: int, payload: bytes) -> None:
    """Write one length-prefixed frame to ``fd``."""
    data = _HEADER.pack(len(payload)) + payload
    while data:
        data = data[os.write(fd, data) :]


def _read_exact(fd: int, n: int, deadline: float | None) -> bytes:
    chunks, left = [], n
    while left:
        if deadline is not None:
            wait = deadline - time.monotonic()
            if wait <= 0 or not select.select([fd], [], [], wait)[0]:
                raise TimeoutError
        chunk = os.read(fd, min(left, 1 << 20))
        if not chunk:
            raise EOFError("the other side closed the pipe")
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


def read_frame(fd: int, deadline: float | None = None) -> bytes:
    """Read one frame from ``fd``; ``TimeoutError`` past ``deadline`` (monotonic), ``EOFError`` on a closed pipe."""
    (size,) = _HEADER.unpack(_read_exact(fd, _HEADER.size, deadline))
    return _read_exact(fd, size, deadline)


class _Worker:
    """One scorer process: ``python -m spade_envs.evaluation.scorer_worker <preload...>``."""

    def __init__(self, preload: Sequence[str], start_timeout_s: float) -> None:
        env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in (_ROOT, os.environ.get("PYTHONPATH")) if p))
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "spade_envs.evaluation.scorer_worker", *preload],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            env=env,
            cwd=_ROOT,
            start_new_session=True,
        )  # fmt: skip  (own session: a Ctrl-C meant for the run must not kill a call in flight)
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.to_fd, self.from_fd = self.proc.stdin.fileno(), self.proc.stdout.fileno()
        try:
            ready = read_frame(self.from_fd, time.monotonic() + start_timeout_s)
        except (TimeoutError, EOFError) as exc:
            self.kill()
            raise ScorerError(f"the scorer process did not start within {start_timeout_s:g} s: {exc!r}") from exc
        if ready != b"ready":
            self.kill()
            raise ScorerError(f"the scorer process failed to start: {ready[:500]!r}")

    def call(self, payload: bytes, timeout_s: float) -> bytes:
        write_frame(self.to_fd, payload)
        return read_frame(self.from_fd, time.monotonic() + timeout_s)

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()
        for stream in (self.proc.stdin, self.proc.stdout):
            if stream is not None:
                try:
                    stream.close()
                except OSError:
                    pass


class ScorerPool:
    """Up to ``size`` reusable scorer processes shared by many threads; every call has a hard deadline.

    ``fn`` must be a module-level function (it is pickled by reference) and its arguments and result picklable.
    An exception raised by ``fn`` comes back as :class:`ScorerRaised`; a deadline passed raises
    :class:`ScorerTimeout`; arguments that do not pickle raise here, before any process is involved.
    """

    def __init__(self, size: int = 2, preload: Sequence[str] = (), start_timeout_s: float = 120.0) -> None:
        if size < 1:
            raise ValueError(f"size must be >= 1, got {size}")
        self.size, self.preload, self.start_timeout_s = size, tuple(preload), start_timeout_s
        self._idle: list[_Worker] = []
        self._busy: set[_Worker] = set()
        self._slots = threading.BoundedSemaphore(size)
        self._lock = threading.Lock()
        self._closed = False
        self.timeouts = 0

    def call(self, fn: Callable[..., Any], *args: Any, timeout_s: float) -> Any:
        """``fn(*args)`` in a scorer process, killed after ``timeout_s`` seconds (then :class:`ScorerTimeout`)."""
        if timeout_s <= 0:
            raise ValueError(f"timeout_s must be > 0, got {timeout_s}")
        payload = pickle.dumps((fn, args))
        with self._slots:
            worker = self._take()
            try:
                reply = worker.call(payload, timeout_s)
            except TimeoutError:
                self._drop(worker)
                with self._lock:
                    self.timeouts += 1
                raise ScorerTimeout(
                    f"{fn.__name__} did not return within {timeout_s:g} s; its process was killed"
                ) from None
            except (EOFError, OSError) as exc:
                self._drop(worker)
                raise ScorerError(f"the scorer process died during {fn.__name__}: {exc!r}") from exc
            self._give_back(worker)
        ok, value = pickle.loads(reply)
        if ok:
            return value
        raise ScorerRaised(value)

    def _take(self) -> _Worker:
        with self._lock:
            if self._closed:
                raise ScorerError("the scorer pool is shut down")
            worker = self._idle.pop() if self._idle else None
        if worker is None:
            worker = _Worker(self.preload, self.start_timeout_s)
        with self._lock:
            self._busy.add(worker)
        return worker

    def _give_back(self, worker: _Worker) -> None:
        with self._lock:
            self._busy.discard(worker)
            if self._closed:
                worker.kill()
            else:
                self._idle.append(worker)

    def _drop(self, worker: _Worker) -> None:
        with self._lock:
            self._busy.discard(worker)
        worker.kill()

    def shutdown(self) -> None:
        """Kill every process (busy ones too: their callers get :class:`ScorerError`). Safe to call twice."""
        with self._lock:
            self._closed = True
            workers, self._idle = [*self._idle, *self._busy], []
        for worker in workers:
            worker.kill()


_DEFAULTS: dict[tuple[str, ...], ScorerPool] = {}
_DEFAULTS_LOCK = threading.Lock()


#: Environment variable that sets how many scorer processes each shared pool may run (default: CPUs, 2 to 8).
SIZE_VARIABLE = "SPADE_EVAL_SCORER_PROCESSES"


def _shared_size() -> int:
    text = os.environ.get(SIZE_VARIABLE, "").strip()
    if not text:
        return max(2, min(8, os.cpu_count() or 2))
    if not text.isdigit() or int(text) < 1:
        raise ValueError(f"{SIZE_VARIABLE} must be a positive integer, got {text!r}")
    return int(text)


def shared_pool(preload: Sequence[str] = ()) -> ScorerPool:
    """The process-wide pool for scorers that preload ``preload`` (started lazily, shut down at exit).

    Its size is :data:`SIZE_VARIABLE` if set (a trainer with many reward workers may want 1 or 2 per worker).
    """
    key = tuple(preload)
    with _DEFAULTS_LOCK:
        pool = _DEFAULTS.get(key)
        if pool is None or pool._closed:
            pool = _DEFAULTS[key] = ScorerPool(size=_shared_size(), preload=key)
        return pool


@atexit.register
def _shutdown_shared() -> None:
    for pool in list(_DEFAULTS.values()):
        pool.shutdown()
