"""Per-worker scratch directories, size- and file-count-limited where the kernel allows it, safely removed.

No hostile tree can make the removal recurse, hang or fail silently.

The host mounts a tmpfs with ``size`` and ``nr_inodes`` on each scratch dir when it may (root with
``CAP_SYS_ADMIN``), so the quota holds at every level and removing the scratch is one lazy unmount. Otherwise the
bwrap level mounts a size-limited tmpfs inside the sandbox (bytes only: ``--size``), and the landlock and rlimits
levels keep a plain directory with the per-file size limit only (a documented limit, ``docs/sandbox.md``).
Scratch dirs are named after the host (pid namespace and pid), so a pool sweeps those that a killed host of its
own pid namespace left behind, and never those of a host in another container sharing /tmp.
"""

from __future__ import annotations

import ctypes
import errno
import os
import stat
import tempfile
import threading
from pathlib import Path

from spade_envs.sandbox.cgroups import host_tag, is_stale, sweep_stale_cgroups

__all__ = ["PREFIX", "Scratch", "remove_tree", "sweep_stale"]

PREFIX = "spade-env-"
_MNT_DETACH = 2
_MS_NOSUID, _MS_NODEV, _MS_NOEXEC = 2, 4, 8
_libc = ctypes.CDLL(None, use_errno=True)
_can_mount: bool | None = None
_mount_lock = threading.Lock()


class Scratch:
    """A fresh scratch dir for one worker; ``mounted`` tells whether the host put a limited tmpfs on it."""

    def __init__(self, size_mb: int, max_files: int, owner: int | None = None) -> None:
        """``owner``: the uid (and gid) the worker will run as, when the host (root) hands scratch to it."""
        global _can_mount
        self.path = tempfile.mkdtemp(prefix=f"{PREFIX}{host_tag()}-")
        self.size_mb, self.max_files = size_mb, max_files
        self.mounted = False
        if owner is not None:
            os.chown(self.path, owner, owner)
        if _can_mount is False:
            return
        options = f"size={size_mb}m,nr_inodes={max_files},mode=0700"
        if owner is not None:
            options += f",uid={owner},gid={owner}"
        # noexec: a file env code writes here is never a program the kernel would run (a core_pattern helper, say)
        flags = _MS_NOSUID | _MS_NODEV | _MS_NOEXEC
        ok = _libc.mount(b"tmpfs", self.path.encode(), b"tmpfs", flags, options.encode()) == 0
        if not ok and ctypes.get_errno() not in (errno.EPERM, errno.EACCES, errno.ENOSYS):
            raise OSError(ctypes.get_errno(), f"mounting a tmpfs on {self.path} failed")
        with _mount_lock:
            _can_mount = _can_mount or ok
        self.mounted = ok

    def remove(self) -> None:
        """Unmount (lazily: nothing to walk) or delete the tree; never raises, never recurses."""
        if self.mounted:
            _libc.umount2(self.path.encode(), _MNT_DETACH)
            self.mounted = False
        remove_tree(self.path)


_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


def remove_tree(root: str) -> None:
    """Delete ``root`` and everything below it; never raises.

    No recursion and one open directory at a time (trees of any depth, paths beyond ``PATH_MAX``), no symlink
    followed, unreadable directories made readable first (env code may ``mkdir(path, 0)``), each listed once.
    """
    try:
        fd = os.open(root, _DIR_FLAGS)
    except OSError:
        return
    names: list[str] = []  # the path from root down to the open directory
    pending = [_unlink_files(fd)]  # per level: subdirectories still to visit
    while True:
        if pending[-1]:
            child = _open_dir(pending[-1].pop(), fd)
            if child is not None:
                names.append(os.path.basename(child[1]))
                os.close(fd)
                fd = child[0]
                pending.append(_unlink_files(fd))
            continue
        pending.pop()
        if not names:
            break
        try:
            parent = os.open("..", _DIR_FLAGS, dir_fd=fd)
        except OSError:
            break
        os.close(fd)
        fd = parent
        try:
            os.rmdir(names.pop(), dir_fd=fd)
        except OSError:
            pass
    os.close(fd)
    try:
        os.rmdir(root)
    except OSError:
        pass


def _unlink_files(fd: int) -> list[str]:
    """Unlink every non-directory in the directory ``fd``; return the names of its subdirectories."""
    subdirs = []
    try:
        entries = list(os.scandir(fd))
    except OSError:
        return subdirs
    for entry in entries:
        try:
            if entry.is_dir(follow_symlinks=False):
                subdirs.append(entry.name)
            else:
                os.unlink(entry.name, dir_fd=fd)
        except OSError:
            continue
    return subdirs


def _open_dir(name: str, parent: int) -> tuple[int, str] | None:
    for attempt in range(2):
        try:
            return os.open(name, _DIR_FLAGS, dir_fd=parent), name
        except PermissionError:
            if attempt:
                return None
            try:
                os.chmod(name, stat.S_IRWXU, dir_fd=parent)  # a directory (checked without following links)
            except OSError:
                return None
        except OSError:
            return None
    return None


def sweep_stale(tmp: str | None = None) -> int:
    """Remove scratch dirs (and their mounts) of hosts that no longer run; returns how many went."""
    removed = 0
    for path in Path(tmp or tempfile.gettempdir()).glob(f"{PREFIX}*-*"):
        if not is_stale(path.name[len(PREFIX) :].split("-", 1)[0]):
            continue
        _libc.umount2(str(path).encode(), _MNT_DETACH)
        remove_tree(str(path))
        removed += 1
    sweep_stale_cgroups()
    return removed
