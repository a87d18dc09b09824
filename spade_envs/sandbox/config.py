"""Every limit of the sandbox in one frozen dataclass; the recipe's ``spade.sandbox`` YAML block maps onto it."""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields
from typing import Any

__all__ = ["ISOLATION_LEVELS", "SandboxConfig"]

#: Strongest first. ``auto`` picks the first that the start-up probe finds working.
ISOLATION_LEVELS = ("bwrap", "landlock", "rlimits", "none")


#: The smallest address-space limit under which a worker can import numpy (measured: 96 MB failed, 128 MB worked).
MIN_MEMORY_MB_WITH_NUMPY = 128


@dataclass(frozen=True)
class SandboxConfig:
    """Limits and isolation of env workers. Defaults suit generated environments on a shared node.

    Attributes:
        isolation: ``auto`` (default: the strongest level that works here), ``bwrap`` (bubblewrap namespaces +
            seccomp + rlimits), ``landlock`` (Landlock + seccomp + rlimits, when user namespaces are blocked),
            ``rlimits`` (seccomp + rlimits only) or ``none`` (a plain killable process: trusted built-ins only).
        call_timeout_s: host-side deadline of one call (reset, step, tool call); past it the worker is killed.
        soft_timeout_s: in-worker alarm that interrupts env code first, so a slow call fails without a kill.
        start_timeout_s: deadline for a worker to start and for ``init`` (loading the env code).
        episode_cpu_s: CPU seconds one worker may use over its whole life (one episode).
        memory_mb: address-space limit of a worker (at least 128 with ``preload_numpy``: numpy loads under it).
        max_response_bytes: largest reply line the host accepts from a worker.
        max_request_bytes: largest request line a worker accepts (env source code travels in ``init``).
        max_observation_chars: longest observation (and any other string) a worker may return.
        file_size_mb: largest file env code may write in its scratch directory.
        open_files: file-descriptor limit inside the worker.
        processes: process/thread limit (RLIMIT_NPROC) for the worker's uid.
        pool_size: pre-started blank workers kept ready, so starting an env costs about a millisecond.
        pool_max_ready: the pool also keeps ``in use + ready`` at the most workers ever in use at once, and
            ``taken in this burst + ready`` at the most one burst took (workers serve once; a burst is what is
            handed out between two moments with none in use), with at most this many ready; 0: ``pool_size`` only.
        max_workers: most workers in use at once (plus the ready ones); acquiring more waits.
        acquire_timeout_s: longest wait for a free worker slot; past it ``SandboxUnavailable`` (``acquire_timeout``).
            asyncio callers wait without holding a thread.
        episode_wall_s: wall-clock seconds a worker may spend answering calls over its life (one episode), whether
            it computes or sleeps; past it the worker is killed (``EnvTimeout``, ``episode_wall_budget``).
        max_episode_reply_bytes: most bytes of replies (observations, info, tool outputs, tool schemas, solutions:
            everything the host decodes) one episode may send, counted from each ``reset`` and checked before a
            reply is decoded; past it the worker is killed (``OutputTooLarge``, ``episode_output_budget``).
        scratch_mb: total size of a worker's scratch directory (a size-limited tmpfs; see docs/sandbox.md).
        scratch_files: most files and directories in a worker's scratch (where the host can mount its tmpfs).
        preload_numpy: a pre-started worker imports numpy (after hardening, with env code's own rights) before it
            reports ready, so env code finds it loaded; a worker started on demand does not (its env imports it
            if it uses it, inside ``init``'s start timeout).
        reply_spin_us: how long the host busy-polls for a reply before sleeping, used only while the worker's
            recent replies came within it (0 never spins; a worker that stopped spinning tries again every 8th
            call). It must cover a whole round trip, not just the env's step: a 50 us env replied ~100 us after
            the request on a 2-vCPU VM, so a 100 us spin caught 10-30% of its replies and 300 us 97-100%.
            Not used while the worker follows the caller's CPU (below).
        request_spin_us: how long a worker busy-polls for its next request after sending a reply, used only while
            its recent requests came within it (0 never spins; otherwise it tries again every 8th request), so the
            host's write finds it awake instead of waking a halted CPU (worker.py, ``_RequestWait``). With both
            spins a sequential step (validation's plays, ``RemoteEnv.step`` in a loop) wakes no CPU: a 50 us env's
            step 147-153 -> 83-85 us at 100/0, 300/60 us on a quiet 2-vCPU VM; an LLM's turns seconds apart never
            spin (docs/sandbox.md, "Speed").
        follow_caller_cpu: before each request the host pins the worker's main thread to the CPU the calling
            thread runs on when that has answered faster for this worker (``affinity.py``, ``waiting.py``), so both
            wake-ups of a call stay on one CPU: a pipe round trip took 58 us across a 2-vCPU VM's vCPUs and 3 us on
            one. Off by default: on a busy host it cut a step by ~40%, but on an idle one it cost ~15% of round-robin
            throughput and raised the SPADE step's sandbox share from 0.27 to 0.42 (docs/sandbox.md, "Speed").
        nice: the lowest nice value an env worker runs at (0-19): a worker that would start below it raises itself
            to it before any env code runs, and env code cannot lower it (no ``CAP_SYS_NICE``). 0 keeps what the
            worker inherits from the thread that starts it. Generated code that burns CPU then stays behind the
            training's own threads (the recipe sets 15, Ray's worker nice, which a CPU run's trainer threads leave).
            The host also sets the worker's session autogroup to it, where the kernel lets it (``autogroup.py``).
    """

    isolation: str = "auto"
    call_timeout_s: float = 10.0
    soft_timeout_s: float = 5.0
    start_timeout_s: float = 20.0
    episode_cpu_s: int = 120
    memory_mb: int = 1024
    max_response_bytes: int = 1 << 20
    max_request_bytes: int = 4 << 20
    max_observation_chars: int = 65_536
    file_size_mb: int = 16
    open_files: int = 64
    processes: int = 64
    pool_size: int = 4
    pool_max_ready: int = 64
    max_workers: int = 256
    acquire_timeout_s: float = 3600.0
    episode_wall_s: float = 120.0
    max_episode_reply_bytes: int = 2 << 20
    scratch_mb: int = 32
    scratch_files: int = 1024
    preload_numpy: bool = True
    reply_spin_us: int = 300
    request_spin_us: int = 60
    follow_caller_cpu: bool = False
    nice: int = 0

    def __post_init__(self) -> None:
        if self.isolation not in ("auto", *ISOLATION_LEVELS):
            raise ValueError(f"isolation must be one of auto, {', '.join(ISOLATION_LEVELS)}; got {self.isolation!r}")
        for f in fields(self):
            value = getattr(self, f.name)
            if (
                isinstance(value, (int, float))
                and not isinstance(value, bool)
                and value <= 0
                and f.name not in ("pool_size", "pool_max_ready", "reply_spin_us", "request_spin_us", "nice")
            ):
                raise ValueError(f"{f.name} must be positive, got {value!r}")
        for name in ("pool_size", "pool_max_ready", "reply_spin_us", "request_spin_us"):
            if getattr(self, name) < 0:
                raise ValueError(f"{name} must be >= 0, got {getattr(self, name)}")
        if isinstance(self.nice, bool) or not isinstance(self.nice, int) or not 0 <= self.nice <= 19:
            raise ValueError(
                f"nice must be a whole number within 0-19 (raising a worker's nice needs no privilege), "
                f"got {self.nice!r}"
            )
        if self.preload_numpy and self.memory_mb < MIN_MEMORY_MB_WITH_NUMPY:  # numpy is imported under the limit
            raise ValueError(
                f"memory_mb must be at least {MIN_MEMORY_MB_WITH_NUMPY} with preload_numpy (a pre-started worker "
                f"imports numpy under the limit; 96 failed), got {self.memory_mb}"
            )
        if self.max_episode_reply_bytes < self.max_observation_chars:
            raise ValueError("max_episode_reply_bytes must be at least max_observation_chars (one observation)")
        if self.soft_timeout_s >= self.call_timeout_s:
            raise ValueError(
                f"soft_timeout_s ({self.soft_timeout_s}) must be below call_timeout_s ({self.call_timeout_s})"
            )

    @classmethod
    def from_dict(cls, data: dict[str, Any] | None) -> SandboxConfig:
        """Build from a config mapping; unknown keys are an error that names the known ones."""
        data = dict(data or {})
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise ValueError(f"unknown sandbox option(s) {unknown}; known: {sorted(known)}")
        return cls(**data)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)
