"""Host uids for workers on a root host: each live worker gets one no other live process uses.

Derived uids (from pids or counters) collide across trainer processes, and two workers sharing a uid can reach
each other (``prlimit`` as an oracle, signals outside a pid namespace). A uid is *leased*: an exclusive ``flock``
on a lock file in one directory shared by every host of this machine (released by the kernel if the host dies),
and taken only if no live process visible in ``/proc`` runs as it. Candidates start at a random offset, so hosts
that do not share the lock directory (other containers) rarely even try the same uid.
"""

from __future__ import annotations

import fcntl
import os
import random
import stat
import tempfile
import threading
import time

__all__ = ["FIRST_UID", "UID_COUNT", "UidLease", "lease_uid", "uids_in_use", "user_label"]

#: Worker uids lie in ``[FIRST_UID, FIRST_UID + UID_COUNT)``: above the ranges distributions and container
#: runtimes hand out (system users, ``/etc/subuid`` ranges start at 100000 and are usually 65536 wide).
FIRST_UID = 3_000_000
UID_COUNT = 1_000_000
_LOCK_DIR = os.path.join(tempfile.gettempdir(), "spade-worker-uids")
_lock = threading.Lock()
_rng = random.SystemRandom()
_held: set[int] = set()  # leased by this process (flock is per open file, so a second open would also succeed)
_seen: tuple[float, set[int]] = (-1.0, set())  # the last scan of /proc: (when, uids), reused for a second


class UidLease:
    """A uid held for one worker; :meth:`release` frees it (also freed by the kernel when the host dies)."""

    def __init__(self, uid: int, fd: int) -> None:
        self.uid, self._fd = uid, fd

    def release(self) -> None:
        """Free the uid (safe to call twice)."""
        if self._fd < 0:
            return
        with _lock:
            _held.discard(self.uid)
        try:
            os.unlink(os.path.join(_LOCK_DIR, str(self.uid)))  # while locked: nobody else holds it
        except OSError:
            pass
        os.close(self._fd)
        self._fd = -1


def uids_in_use() -> set[int]:
    """The real and effective uids of every process visible in ``/proc`` (a ``/proc/<pid>`` dir belongs to it)."""
    found = set()
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            try:
                found.add(entry.stat(follow_symlinks=False).st_uid)
            except OSError:
                continue
    return found


def _check_lock_dir() -> None:
    """Create the lock directory, and refuse one that another user could have planted (``/tmp`` is shared)."""
    try:
        os.mkdir(_LOCK_DIR, 0o700)
    except FileExistsError:
        pass
    info = os.lstat(_LOCK_DIR)
    if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.geteuid() or info.st_mode & 0o077:
        raise OSError(f"{_LOCK_DIR} is not a directory of uid {os.geteuid()} closed to others: refusing to use it")


def lease_uid(attempts: int = 64) -> UidLease:
    """A uid that no live process and no other lease holds; ``OSError`` if none was found."""
    global _seen
    _check_lock_dir()
    with _lock:
        if time.monotonic() - _seen[0] > 1.0:  # a scan costs ~15 us per process; the lock files cover the rest
            _seen = (time.monotonic(), uids_in_use())
        busy = _seen[1]
    start = _rng.randrange(UID_COUNT)
    for step in range(attempts):
        uid = FIRST_UID + (start + step) % UID_COUNT
        with _lock:
            if uid in busy or uid in _held:
                continue
            flags = os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC
            fd = os.open(os.path.join(_LOCK_DIR, str(uid)), flags, 0o600)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                if os.fstat(fd).st_ino != os.stat(os.path.join(_LOCK_DIR, str(uid))).st_ino:
                    raise OSError("the lock file was released and replaced meanwhile")
            except OSError:
                os.close(fd)
                continue
            _held.add(uid)
        return UidLease(uid, fd)
    raise OSError(f"no free worker uid after {attempts} tries in {_LOCK_DIR}")


def user_label() -> str:
    """Which host uid the workers of this process run as, in words (for the pool's log and ``doctor``)."""
    if os.geteuid() == 0:
        return "each worker runs as a host uid of its own (leased, unique among live processes)"
    return (
        f"workers run as this host's uid {os.geteuid()} (not root, so they cannot get a uid of their own): seccomp "
        "keeps them from reaching other processes of that uid, but they share its files and limits"
    )
