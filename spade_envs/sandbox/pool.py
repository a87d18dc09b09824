"""Choose the isolation level once, and keep pre-started, already hardened workers ready.

Starting a hardened worker costs tens of milliseconds (an interpreter, numpy, bubblewrap); taking one from the
pool costs about a millisecond. Workers are never reused across environments: each is killed after its episode.
"""

from __future__ import annotations

import logging
import os
import shutil
import threading
import time
from collections import deque
from pathlib import Path

from spade_envs.sandbox.config import ISOLATION_LEVELS, SandboxConfig
from spade_envs.sandbox.errors import SandboxError, SandboxUnavailable
from spade_envs.sandbox.process import Worker, become_subreaper, reap_orphans

__all__ = ["WorkerPool", "probe_isolation"]

log = logging.getLogger(__name__)
_probed: dict[tuple[str, int, bool], str] = {}


def _works(level: str, config: SandboxConfig) -> str | None:
    """``None`` if a worker starts and answers at ``level``, else why not."""
    if level == "bwrap" and shutil.which("bwrap") is None:
        return "bubblewrap (bwrap) is not installed"
    try:
        worker = Worker(config, level)
    except SandboxError as exc:
        return str(exc)
    try:
        return None if worker.call("ping") == "pong" else "no pong"
    except SandboxError as exc:
        return str(exc)
    finally:
        worker.kill()


def probe_isolation(config: SandboxConfig) -> str:
    """Resolve ``config.isolation`` to a level that works here; ``auto`` takes the strongest, never ``none``.

    The result is cached per process and logged, so every run states which protections were active.
    """
    key = (config.isolation, config.memory_mb, config.preload_numpy)  # what decides whether a level works
    if key in _probed:
        return _probed[key]
    candidates = ISOLATION_LEVELS[:-1] if config.isolation == "auto" else (config.isolation,)
    reasons = []
    for level in candidates:
        why = None if level == "none" else _works(level, config)
        if why is None:
            log.info("spade sandbox isolation level: %s", level)
            _probed[key] = level
            return level
        reasons.append(f"{level}: {why}")
        log.warning("spade sandbox level %s unavailable: %s", level, why)
    raise SandboxUnavailable(
        "no isolation level works on this machine (" + "; ".join(reasons) + "). Install bubblewrap and "
        "python3-seccomp (or pyseccomp), or set isolation: none for trusted built-in environments only."
    )


def _has_worker_children() -> bool:
    """Whether this process still has a bubblewrap or python child that is not a live Popen of ours."""
    for children in Path(f"/proc/{os.getpid()}/task").glob("*/children"):
        for pid in children.read_text().split():
            try:
                stat = Path(f"/proc/{pid}/stat").read_text()
            except OSError:
                continue
            if stat[stat.index("(") + 1 : stat.rindex(")")] == "bwrap":
                return True
    return False


class WorkerPool:
    """Pre-started workers at one isolation level, refilled in the background, bounded by ``max_workers``.

    Use as a context manager, or call :meth:`shutdown`; no worker outlives the pool.
    """

    def __init__(self, config: SandboxConfig | None = None) -> None:
        self.config = config or SandboxConfig()
        become_subreaper()
        self.level = probe_isolation(self.config)
        self._ready: deque[Worker] = deque()
        self._live: set[Worker] = set()
        self._lock = threading.Lock()
        self._slots = threading.BoundedSemaphore(self.config.max_workers)
        self._closed = False
        self._refill_wanted = threading.Event()
        self._refiller = threading.Thread(target=self._refill_loop, name="spade-sandbox-refill", daemon=True)
        self._refiller.start()
        self._refill_wanted.set()

    @property
    def ready_count(self) -> int:
        """Pre-started workers waiting to be acquired."""
        with self._lock:
            return len(self._ready)

    def acquire(self, timeout: float | None = None) -> Worker:
        """A ready worker (started now if none is waiting). Blocks while ``max_workers`` are live."""
        if self._closed:
            raise RuntimeError("the worker pool is shut down")
        if not self._slots.acquire(timeout=timeout):
            raise TimeoutError(f"no worker slot free within {timeout} s (max_workers={self.config.max_workers})")
        with self._lock:
            worker = self._ready.popleft() if self._ready else None
        try:
            if worker is None:
                worker = Worker(self.config, self.level)
        except BaseException:
            self._slots.release()
            raise
        with self._lock:
            self._live.add(worker)
        self._refill_wanted.set()
        return worker

    def release(self, worker: Worker) -> None:
        """Kill a worker handed out by :meth:`acquire` and free its slot (safe to call twice)."""
        worker.kill()
        with self._lock:
            if worker not in self._live:
                return
            self._live.discard(worker)
        self._slots.release()

    def _refill_loop(self) -> None:
        while not self._closed:
            self._refill_wanted.wait()
            self._refill_wanted.clear()
            while not self._closed:
                with self._lock:
                    if len(self._ready) >= self.config.pool_size:
                        break
                try:
                    worker = Worker(self.config, self.level)
                except SandboxError as exc:
                    log.warning("could not pre-start a sandbox worker: %s", exc)
                    break
                with self._lock:
                    if self._closed:
                        worker.kill()
                    else:
                        self._ready.append(worker)

    def shutdown(self) -> None:
        """Kill every worker, ready or in use."""
        self._closed = True
        self._refill_wanted.set()
        self._refiller.join(timeout=30)
        with self._lock:
            workers = list(self._ready) + list(self._live)
            self._ready.clear()
            self._live.clear()
        for worker in workers:
            worker.kill()
        # bubblewrap's inner processes are re-parented to us only as they die: reap until none is left
        deadline = time.monotonic() + 2.0
        while reap_orphans() or (time.monotonic() < deadline and _has_worker_children()):
            time.sleep(0.01)

    def __enter__(self) -> WorkerPool:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.shutdown()
