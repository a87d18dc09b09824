"""Wake each worker on the CPU its caller waits on: a step's two wake-ups stay on one CPU (no cross-CPU IPI).

A call is a ping-pong: the host writes the request and sleeps in ``poll``; the worker wakes, computes, writes the
reply and sleeps in ``read``. When the two sit on different CPUs each wake-up is an inter-processor interrupt, and
on a VM (a vCPU halted in the hypervisor) each costs about 25-30 us: a Python pipe round trip measured 58 us across
two vCPUs and 3 us on one (2-vCPU VM, issue 39). Before a request the host therefore pins the worker's main thread
to the CPU the calling thread runs on, with one ``sched_setaffinity`` only when that CPU changed (a ``sched_getcpu``
otherwise). A worker that has not answered within ``RELEASE_AFTER_MS`` gets its own CPUs back for the rest of the
call, so a long step can still move to an idle CPU. (The worker restoring its CPUs itself after every wake-up was
measured too: it made 40 live envs stepped in turn 2-3x slower.)

The host changes only its own worker's affinity: the pid is the worker's process (for ``bwrap`` the sandbox's
python, found once by its namespace pid) and, where that process is not the host's child, a pidfd held since then
tells whether it still lives, so a recycled pid is never touched. Where the host may not (a root host without
``CAP_SYS_NICE`` for a leased uid) the first refusal turns following off for that worker, which then waits as before.
Env code may change its own affinity: that changes only its own speed.
"""

from __future__ import annotations

import ctypes
import os
from pathlib import Path

__all__ = ["CpuFollower", "current_cpu", "sandbox_pid"]


def _libc_getcpu() -> object | None:
    try:
        fn = ctypes.CDLL(None, use_errno=True).sched_getcpu
    except (OSError, AttributeError):
        return None
    fn.restype, fn.argtypes = ctypes.c_int, []
    return fn


_GETCPU = _libc_getcpu()


def current_cpu() -> int:
    """The CPU the calling thread runs on now (``sched_getcpu``, a vDSO read), or -1 where libc has none."""
    return _GETCPU() if _GETCPU is not None else -1  # type: ignore[operator]


def _children(pid: int) -> list[int]:
    try:
        return [int(p) for p in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
    except (OSError, ValueError):
        return []


def _ns_pids(pid: int) -> list[int]:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("NSpid:"):
                return [int(p) for p in line.split()[1:]]
    except (OSError, ValueError):
        pass
    return []


def sandbox_pid(root: int, ns_pid: int, depth: int = 3) -> int | None:
    """The host pid of the process below ``root`` (bubblewrap) whose pid in its own namespace is ``ns_pid``."""
    level = [root]
    for _ in range(depth):
        level = [c for p in level for c in _children(p)]
        for child in level:
            ids = _ns_pids(child)
            if len(ids) > 1 and ids[-1] == ns_pid:
                return child
    return None


class CpuFollower:
    """Pins one worker's main thread to the caller's CPU before a request; see the module docstring.

    ``pidfd``: a pidfd of ``pid`` when the host is not its parent; the caller polls it with its own idle poll and
    calls :meth:`follow` only while the worker lives.
    """

    def __init__(self, pid: int, pidfd: int | None) -> None:
        self.pid, self.pidfd = pid, pidfd
        self.enabled = _GETCPU is not None
        self.allowed = os.sched_getaffinity(0)  # the worker started with the spawner's CPUs (inherited)
        self.cpu = -1  # the CPU the worker is pinned to now; -1: its own CPUs

    def follow(self) -> bool:
        """Pin the worker to this thread's CPU; whether it is (False: not here, or following is off now)."""
        if not self.enabled:
            return False
        cpu = _GETCPU()  # type: ignore[misc]
        if cpu == self.cpu:
            return True
        if cpu not in self.allowed:
            return False
        return self._set(cpu, (cpu,))

    def release(self) -> None:
        """Give the worker back its own CPUs (a slow reply: the scheduler may move it)."""
        if self.enabled and self.cpu != -1:
            self._set(-1, self.allowed)

    def _set(self, cpu: int, cpus: object) -> bool:
        try:
            os.sched_setaffinity(self.pid, cpus)  # type: ignore[arg-type]
        except OSError:  # EPERM (no CAP_SYS_NICE over a leased uid), ESRCH, EINVAL (a cpuset without this CPU)
            self.enabled = False
            return False
        self.cpu = cpu
        return True
