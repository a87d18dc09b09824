"""Choose the isolation level once, and keep pre-started, already hardened workers ready.

Starting a hardened worker costs tens of milliseconds (an interpreter, numpy, bubblewrap); taking one from the
pool costs about a millisecond. Workers are never reused across environments: each is killed after its episode.
"""

from __future__ import annotations

import asyncio
import logging
import os
import shutil
import threading
import time
from collections import deque
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TypeVar

from spade_envs.sandbox.cgroups import remove_pending
from spade_envs.sandbox.config import ISOLATION_LEVELS, SandboxConfig
from spade_envs.sandbox.dispatch import CallDispatcher
from spade_envs.sandbox.errors import SandboxError, SandboxUnavailable
from spade_envs.sandbox.process import Worker, become_subreaper, reap_orphans
from spade_envs.sandbox.scratch import sweep_stale
from spade_envs.sandbox.slots import SlotGate
from spade_envs.sandbox.uids import user_label

__all__ = ["WorkerPool", "probe_isolation"]

log = logging.getLogger(__name__)
T = TypeVar("T")
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
        try:
            pids = children.read_text().split()
        except OSError:  # the thread ended after the glob listed it (as in reap_orphans)
            continue
        for pid in pids:
            try:
                stat = Path(f"/proc/{pid}/stat").read_text()
            except OSError:
                continue
            if stat[stat.index("(") + 1 : stat.rindex(")")] == "bwrap":
                return True
    return False


class WorkerPool:
    """Pre-started workers at one isolation level, refilled in the background, bounded by ``max_workers``.

    The ready queue holds ``pool_size`` workers, or the demand seen so far (at most ``pool_max_ready``): as many as
    were ever in use at once, or as many as one burst of work took, whichever is more (:meth:`_ready_target`).

    Threads acquire with :meth:`acquire`, asyncio tasks with :meth:`acquire_async` (they wait for a slot without
    holding a thread). Use as a context manager, or call :meth:`shutdown`; no worker outlives the pool.
    """

    def __init__(self, config: SandboxConfig | None = None) -> None:
        self.config = config or SandboxConfig()
        become_subreaper()
        sweep_stale()  # scratch dirs of hosts that were killed
        self.level = probe_isolation(self.config)
        if self.level != "none":
            log.info("spade sandbox workers' host uid: %s", user_label())
        self._ready: deque[Worker] = deque()
        self._live: set[Worker] = set()
        self._lock = threading.Lock()
        self._slots = SlotGate(self.config.max_workers)
        self._peak_live = 0  # most workers in use at once so far
        self._burst = 0  # workers handed out since the pool was last idle (none in use)
        self._peak_burst = 0  # most workers one burst took so far
        self._executor: ThreadPoolExecutor | None = None
        self._dispatcher: CallDispatcher | None = None
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

    @property
    def live_count(self) -> int:
        """Workers handed out and not yet released."""
        with self._lock:
            return len(self._live)

    def _ready_target(self) -> int:
        """Ready workers to keep (call with the lock held): ``pool_size``, or more to match the demand seen so far.

        Two measures of demand, at most ``pool_max_ready`` ready for either. Concurrency: ``in use + ready`` is kept
        at the most workers ever in use at once, so an agent loop that runs N episodes at once finds N started
        workers at its next step. Bursts: workers are used once, so work that takes them one after another (a
        validation's five workers in turn, a design's measurement plays after it) needs more starts than it holds
        at once; ``taken in this burst + ready`` is kept at the most one burst took, a burst being what the pool
        hands out between two moments with none in use (a training step's rollout). Otherwise those starts land
        on the burst's critical path. Never more than ``max_workers + pool_size`` processes in all.
        """
        cap, live = self.config.pool_max_ready, len(self._live)
        concurrency = min(self._peak_live, cap) - live
        burst = min(self._peak_burst, cap) - self._burst
        # a burst can be far longer than the slots: for it, in use + ready stays within max_workers
        return max(self.config.pool_size, concurrency, min(burst, self.config.max_workers - live))

    @property
    def waiting_count(self) -> int:
        """Threads and tasks waiting for a worker slot."""
        return self._slots.waiting

    @property
    def dispatcher(self) -> CallDispatcher:
        """The pool's one I/O thread that carries the asyncio clients' calls (``dispatch.py``)."""
        with self._lock:
            if self._dispatcher is None:
                self._dispatcher = CallDispatcher()
            return self._dispatcher

    @property
    def executor(self) -> ThreadPoolExecutor:
        """The pool's threads for asyncio clients, at most ``min(64, max_workers)``.

        Each only ever does bounded work: a worker call has a deadline, and waiting for a slot happens outside them.
        """
        with self._lock:
            if self._executor is None:
                threads = min(64, self.config.max_workers)
                self._executor = ThreadPoolExecutor(max_workers=threads, thread_name_prefix="spade-env")
            return self._executor

    def _check_open(self) -> None:
        if self._closed:
            raise SandboxUnavailable("the worker pool is shut down", code="pool_closed")

    def _timed_out(self, timeout: float) -> SandboxUnavailable:
        return SandboxUnavailable(
            f"no worker slot free within {timeout:g} s (max_workers={self.config.max_workers})", code="acquire_timeout"
        )

    def acquire(self, timeout: float | None = None) -> Worker:
        """A ready worker (started now if none is waiting).

        Waits while ``max_workers`` are live, at most ``timeout`` seconds (default ``acquire_timeout_s``), then
        raises ``SandboxUnavailable`` with code ``acquire_timeout``.
        """
        self._check_open()
        timeout = self.config.acquire_timeout_s if timeout is None else timeout
        if not self._slots.take(timeout):
            raise self._timed_out(timeout)
        return self._start_in_slot()

    async def acquire_async(self, timeout: float | None = None) -> Worker:
        """:meth:`acquire` for asyncio: the wait for a slot holds no thread.

        Only starting the worker (bounded by ``start_timeout_s``) runs on :attr:`executor`. A cancelled call leaks
        neither the slot nor the worker.
        """
        self._check_open()
        timeout = self.config.acquire_timeout_s if timeout is None else timeout
        if not await self._slots.take_async(timeout):
            raise self._timed_out(timeout)
        try:
            future = asyncio.get_running_loop().run_in_executor(self.executor, self._start_in_slot)
        except BaseException:
            self._slots.give()
            raise
        return await shielded(future, self.release)

    def _start_in_slot(self) -> Worker:
        """Hand out a worker for a slot the caller holds; the slot is given back if that fails."""
        try:
            self._check_open()
            with self._lock:
                worker = self._ready.popleft() if self._ready else None
            if worker is None:
                worker = Worker(self.config, self.level)
            with self._lock:
                closed = self._closed
                if not closed:
                    self._live.add(worker)
                    self._peak_live = max(self._peak_live, len(self._live))
                    self._burst += 1
                    self._peak_burst = max(self._peak_burst, self._burst)
            if closed:  # shut down while it started: shutdown() has already killed what it could see
                worker.kill()
                self._check_open()
        except BaseException:
            self._slots.give()
            raise
        self._refill_wanted.set()
        return worker

    def release(self, worker: Worker) -> None:
        """Kill a worker handed out by :meth:`acquire` and free its slot (safe to call twice)."""
        try:
            worker.kill()
        finally:
            with self._lock:
                was_live = worker in self._live
                self._live.discard(worker)
                if not self._live:  # idle: the burst is over, the next worker handed out starts another
                    self._burst = 0
            if was_live:
                self._slots.give()
                self._refill_wanted.set()  # fewer in use: the ready queue may grow back to the demand

    def _refill_loop(self) -> None:
        while not self._closed:
            self._refill_wanted.wait()
            self._refill_wanted.clear()
            while not self._closed:
                with self._lock:
                    if len(self._ready) >= self._ready_target():
                        break
                try:
                    worker = Worker(self.config, self.level, warm=True)
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
            dispatcher, self._dispatcher = self._dispatcher, None
        if dispatcher is not None:  # first: its thread must stop reading workers' pipes before they are closed
            dispatcher.close()
        with self._lock:
            workers = list(self._ready) + list(self._live)
            self._ready.clear()
            self._live.clear()
            executor, self._executor = self._executor, None
        for worker in workers:
            worker.kill()
        if executor is not None:
            executor.shutdown(wait=False)
        # bubblewrap's inner processes are re-parented to us only as they die: reap until none is left
        deadline = time.monotonic() + 2.0
        while reap_orphans() or (time.monotonic() < deadline and _has_worker_children()):
            time.sleep(0.01)
        remove_pending()

    def __enter__(self) -> WorkerPool:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.shutdown()


async def shielded(future: asyncio.Future[T], release: Callable[[T], None]) -> T:
    """Await ``future``, a worker (or an env holding one) being made on a thread.

    If the awaiting task is cancelled meanwhile, what arrives is released instead of leaked.
    """
    try:
        return await asyncio.shield(future)
    except asyncio.CancelledError:

        def _release(done: asyncio.Future[T]) -> None:
            if not done.cancelled() and done.exception() is None:  # off the event loop: a kill may take a moment
                threading.Thread(target=release, args=(done.result(),), daemon=True).start()

        future.add_done_callback(_release)
        raise
