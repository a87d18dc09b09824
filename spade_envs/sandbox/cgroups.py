"""A pids cgroup per worker where the host may create one: a process and thread cap that holds at every level.

RLIMIT_NPROC does not bind a process whose uid is host root (the kernel exempts it), and that is what a bubblewrap
sandbox started by a root trainer runs as; a ``pids.max`` does bind it. The worker's launcher joins the cgroup
before it execs bubblewrap or the interpreter (``sh -c 'echo 0 > tasks; exec ...'``), so every process and
thread of the worker is counted from its first instruction. On cgroup v1 the shell moves its one thread through
``tasks``: moving a whole process through ``cgroup.procs`` takes the kernel's global threadgroup lock, whose
write side waits out an RCU grace period (10-20 ms per worker start, issue 39); a single thread moving itself
skips that lock, and a single-threaded shell is the whole process. cgroup v2 has no ``tasks``: ``cgroup.procs``.
Where no pids controller is writable (an unprivileged host without cgroup delegation) workers run without it, and
the per-level limits in ``docs/sandbox.md`` apply.
"""

from __future__ import annotations

import itertools
import os
import signal
import threading
import time
from pathlib import Path

__all__ = ["PidsCgroup", "host_tag", "is_stale", "pids_root", "remove_pending", "sweep_stale_cgroups"]

_PREFIX = "spade-"
_counter = itertools.count()
_root: str | None = None
_probed = False
_lock = threading.Lock()
_pending: list[str] = []  # cgroups of killed workers whose processes had not exited yet


def host_tag() -> str:
    """This process as ``<pid namespace inode>.<pid>``.

    A pid only identifies a process within one pid namespace, and a shared /tmp or cgroup tree may hold the
    leftovers of hosts in other namespaces (containers).
    """
    try:
        namespace = os.stat("/proc/self/ns/pid").st_ino
    except OSError:
        namespace = 0
    return f"{namespace}.{os.getpid()}"


def is_stale(tag: str) -> bool:
    """Whether ``tag`` (from :func:`host_tag`) names a host of *this* pid namespace that no longer runs."""
    namespace, _, pid = tag.partition(".")
    if namespace != host_tag().partition(".")[0] or not pid.isdigit() or int(pid) == os.getpid():
        return False
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return True
    except OSError:
        return False
    return False


def _candidates() -> list[str]:
    """Directories where this process's pids cgroup lives (cgroup v1's pids hierarchy, then cgroup v2)."""
    mounts: dict[str, str] = {}
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        fields = line.split(" - ")
        if len(fields) != 2:
            continue
        point, (fstype, _src, options) = fields[0].split()[4], fields[1].split()[:3]
        if fstype == "cgroup" and "pids" in options.split(","):
            mounts["v1"] = point
        elif fstype == "cgroup2":
            mounts.setdefault("v2", point)
    found = []
    for line in Path("/proc/self/cgroup").read_text().splitlines():
        _hid, controllers, path = line.split(":", 2)
        if "pids" in controllers.split(",") and "v1" in mounts:
            found.append(mounts["v1"] + path)
        elif controllers == "" and "v2" in mounts:
            base = mounts["v2"] + path
            try:
                if "pids" in Path(base, "cgroup.subtree_control").read_text().split():
                    found.append(base)
            except OSError:
                pass
    return found


def pids_root() -> str | None:
    """Where per-worker pids cgroups go, or ``None`` when this host cannot create them (probed once)."""
    global _root, _probed
    with _lock:
        if _probed:
            return _root
        _probed = True
        try:
            candidates = _candidates()
        except OSError:
            candidates = []
        for base in candidates:
            probe = os.path.join(base, f"{_PREFIX}{host_tag()}-probe")
            try:
                os.mkdir(probe)
                try:
                    Path(probe, "pids.max").write_text("8")
                finally:
                    os.rmdir(probe)
            except OSError:
                continue
            _root = base
            break
        return _root


class PidsCgroup:
    """A fresh cgroup allowing ``limit`` processes and threads; :meth:`wrap` starts a command inside it."""

    def __init__(self, root: str, limit: int) -> None:
        self.path = os.path.join(root, f"{_PREFIX}{host_tag()}-{next(_counter)}")
        os.mkdir(self.path)
        try:
            Path(self.path, "pids.max").write_text(str(limit))
        except OSError:
            os.rmdir(self.path)
            raise

    def wrap(self, cmd: list[str]) -> list[str]:
        """``cmd`` run by a shell that first moves itself into this cgroup (its children inherit it), then execs."""
        tasks = os.path.join(self.path, "tasks")  # cgroup v1: "0" moves the writing thread, without the global lock
        if os.path.exists(tasks):
            return ["/bin/sh", "-c", 'echo 0 > "$0" && exec "$@"', tasks, *cmd]
        return ["/bin/sh", "-c", 'echo $$ > "$0" && exec "$@"', os.path.join(self.path, "cgroup.procs"), *cmd]

    def remove(self) -> None:
        """SIGKILL whatever still runs in the cgroup and delete it; never raises, never waits.

        A cgroup whose killed processes have not exited yet cannot be deleted: it is retried on later calls
        (and at the next pool start), so closing an env stays as fast as killing its worker.
        """
        _kill_members(self.path)
        with _lock:
            _pending.append(self.path)
            retry = list(_pending)
        for path in retry:
            try:
                os.rmdir(path)
            except FileNotFoundError:
                pass
            except OSError:
                continue
            with _lock:
                if path in _pending:  # another thread may have removed it first
                    _pending.remove(path)


def _kill_members(path: str) -> None:
    try:
        members = Path(path, "cgroup.procs").read_text().split()
    except OSError:
        return
    for pid in members:
        try:
            os.kill(int(pid), signal.SIGKILL)
        except OSError:
            pass


def remove_pending(wait_s: float = 2.0) -> None:
    """Delete the cgroups left pending by :meth:`PidsCgroup.remove`, waiting up to ``wait_s`` for them to empty."""
    deadline = time.monotonic() + wait_s
    while True:
        with _lock:
            paths = list(_pending)
        for path in paths:
            _kill_members(path)
            try:
                os.rmdir(path)
            except FileNotFoundError:
                pass
            except OSError:
                continue
            with _lock:
                if path in _pending:  # another thread may have removed it first
                    _pending.remove(path)
        if not paths or time.monotonic() > deadline:
            return
        time.sleep(0.01)


def sweep_stale_cgroups() -> None:
    """Delete empty worker cgroups of hosts that no longer run."""
    root = pids_root()
    if root is None:
        return
    for path in Path(root).glob(f"{_PREFIX}*-*"):
        if is_stale(path.name[len(_PREFIX) :].split("-", 1)[0]):
            _kill_members(str(path))
            try:
                os.rmdir(path)
            except OSError:
                pass
