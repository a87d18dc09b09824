"""In-worker hardening applied before any untrusted code runs: rlimits, a unique uid, Landlock, seccomp.

Everything here runs inside the worker process, never in the host. Python-level checks (audit hooks, AST
allow-lists) are bypassable and are deliberately not part of the boundary.
"""

from __future__ import annotations

import ctypes
import errno
import os
import resource
import stat
import sys
from collections.abc import Iterable
from typing import Any

__all__ = [
    "apply_rlimits",
    "drop_privileges",
    "drop_to_uid_keeping_read_search",
    "landlock_abi",
    "load_seccomp",
    "nproc_counts_per_userns",
    "restrict_filesystem",
    "world_readable",
]

_libc = ctypes.CDLL(None, use_errno=True)
_PR_SET_NO_NEW_PRIVS = 38
_CLONE_THREAD = 0x00010000

#: Syscalls that env code never needs and an attacker would: processes, network, tracing, kernel surfaces.
DENIED_SYSCALLS = (
    "socket", "socketpair", "execve", "execveat", "fork", "vfork", "ptrace", "process_vm_readv",
    "process_vm_writev", "mount", "umount2", "unshare", "setns", "chroot", "pivot_root", "bpf", "perf_event_open",
    "add_key", "request_key", "keyctl", "userfaultfd", "io_uring_setup", "kexec_load", "kexec_file_load",
    "init_module", "finit_module", "delete_module", "reboot", "swapon", "swapoff", "mknod", "mknodat", "setsid",
    "setpgid", "tkill", "personality", "pidfd_open", "pidfd_getfd", "pidfd_send_signal", "rt_tgsigqueueinfo",
    # No env needs to change ownership, modes or timestamps of files; refusing them is a second layer in case a
    # worker runs as the owner of host files.
    "chmod", "fchmod", "fchmodat", "fchmodat2", "chown", "fchown", "lchown", "fchownat", "utime", "utimes",
    "utimensat", "futimesat", "setxattr", "lsetxattr", "fsetxattr", "removexattr", "lremovexattr", "fremovexattr",
    # SysV and POSIX IPC objects outlive their creator and, outside an IPC namespace (Landlock, rlimits), are
    # visible to the next worker: no env needs them.
    "shmget", "shmat", "shmdt", "shmctl", "msgget", "msgsnd", "msgrcv", "msgctl", "semget", "semop", "semtimedop",
    "semctl", "mq_open", "mq_unlink", "mq_timedsend", "mq_timedreceive", "mq_notify", "mq_getsetattr",
    # Anonymous shared memory is host RAM outside RLIMIT_AS and every budget (memfds outlive their mappings).
    "memfd_create", "memfd_secret",
    # Reaching into other processes by pidfd or comparing their resources.
    "process_madvise", "process_mrelease", "kcmp",
)  # fmt: skip

#: Syscalls aimed at a process by pid (argument ``index``): allowed only for the caller itself (pid 0). With a
#: shared uid (a non-root host) they would let env code cap the trainer's rlimits, renice or re-pin it, or move
#: its pages.
SELF_ONLY_SYSCALLS = (
    ("prlimit64", 0), ("sched_setaffinity", 0), ("sched_setparam", 0), ("sched_setscheduler", 0),
    ("sched_setattr", 0), ("migrate_pages", 0), ("move_pages", 0), ("setpriority", 1), ("ioprio_set", 1),
)  # fmt: skip
_PR_SET_PDEATHSIG = 1
_PRIO_PROCESS, _IOPRIO_WHO_PROCESS = 0, 1
#: ``fcntl`` commands that name a process to receive ``SIGIO`` (or any signal chosen with ``F_SETSIG``, SIGKILL
#: included) when the fd becomes ready: a signal to another process that never passes through ``kill``.
_F_SETOWN, _F_SETOWN_EX = 8, 15
#: The kernel reads ``int`` arguments (``prctl``'s option, ``fcntl``'s command) from the low 32 bits only, while
#: seccomp sees all 64: an equality rule must compare under this mask, or high bits slip past it.
_LOW_32 = 0xFFFFFFFF


def apply_rlimits(memory_mb: int, cpu_s: int, file_size_mb: int, open_files: int, processes: int | None) -> None:
    """Address space, CPU seconds (SIGKILL one second past the soft limit), file size, fds, no core dumps."""
    limits = [
        (resource.RLIMIT_AS, memory_mb << 20),
        (resource.RLIMIT_CPU, cpu_s, cpu_s + 1),
        (resource.RLIMIT_FSIZE, file_size_mb << 20),
        (resource.RLIMIT_NOFILE, open_files),
        (resource.RLIMIT_CORE, 0),
    ]
    if processes is not None:
        limits.append((resource.RLIMIT_NPROC, processes))
    for which, soft, *hard in limits:
        resource.setrlimit(which, (soft, hard[0] if hard else soft))


def nproc_counts_per_userns() -> bool:
    """Whether RLIMIT_NPROC counts per user namespace (Linux >= 5.14), so a sandbox's limit ignores host processes."""
    try:
        major, minor = (int(part) for part in os.uname().release.split(".")[:2])
    except ValueError:
        return False
    return (major, minor) >= (5, 14)


def world_readable(path: str) -> bool:
    """Whether a user with no special rights can reach ``path`` (every parent searchable, the path readable)."""
    path = os.path.realpath(path)
    parts = path.split(os.sep)
    for i in range(2, len(parts) + 1):
        mode = os.stat(os.sep.join(parts[:i]) or os.sep).st_mode
        if stat.S_ISDIR(mode) and not mode & stat.S_IXOTH:
            return False
    return bool(os.stat(path).st_mode & stat.S_IROTH)


_CAP_DAC_READ_SEARCH = 2


def _capset(effective: int, permitted: int) -> None:
    class Header(ctypes.Structure):
        _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]

    class Data(ctypes.Structure):
        _fields_ = [("effective", ctypes.c_uint32), ("permitted", ctypes.c_uint32), ("inheritable", ctypes.c_uint32)]

    data = (Data * 2)()
    data[0].effective, data[0].permitted = effective, permitted  # capabilities 0-31 are all we keep at most
    number = {"x86_64": 126, "aarch64": 91}.get(os.uname().machine)
    if number is None or _libc.syscall(number, ctypes.byref(Header(0x20080522, 0)), data) != 0:  # capset, v3
        raise OSError(ctypes.get_errno(), "capset failed")


def drop_to_uid_keeping_read_search(uid: int) -> None:
    """As root: become ``uid`` but keep ``CAP_DAC_READ_SEARCH`` and nothing else.

    For an interpreter installed where other uids cannot read it (``/root/.pyenv``): the worker may then read any
    file, so this is only safe under Landlock, which confines reads to the interpreter, the package and scratch.
    As a non-owner uid without ``CAP_FOWNER`` it cannot chmod, chown or touch host files, nor raise its rlimits.
    """
    for cap in range(64):  # bounding set: nothing can be regained later
        if cap != _CAP_DAC_READ_SEARCH and _libc.prctl(24, cap, 0, 0, 0) != 0 and ctypes.get_errno() == errno.EINVAL:
            break  # PR_CAPBSET_DROP: past the last capability this kernel knows
    if _libc.prctl(8, 1, 0, 0, 0) != 0:  # PR_SET_KEEPCAPS: keep the permitted set across setuid
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_KEEPCAPS) failed")
    os.setgroups([])
    os.setgid(uid)
    os.setuid(uid)
    bit = 1 << _CAP_DAC_READ_SEARCH
    _capset(effective=bit, permitted=bit)


def drop_privileges(uid: int) -> None:
    """As root: become ``uid`` (no supplementary groups, no capability left to regain; the host chowned scratch)."""
    for cap in range(64):  # bounding set (needs CAP_SETPCAP; no_new_privs makes it moot otherwise)
        if _libc.prctl(24, cap, 0, 0, 0) != 0 and ctypes.get_errno() == errno.EINVAL:
            break
    os.setgroups([])
    os.setgid(uid)
    os.setuid(uid)


def _seccomp_module() -> Any:
    """Debian's ``python3-seccomp`` (fast) when importable, else PyPI ``pyseccomp`` (same API, ctypes)."""
    try:
        import seccomp  # type: ignore[import-not-found]

        return seccomp
    except ImportError:
        pass
    debian = "/usr/lib/python3/dist-packages"
    if os.path.isdir(debian) and debian not in sys.path:
        sys.path.append(debian)
        try:
            import seccomp  # type: ignore[import-not-found]

            return seccomp
        except ImportError:
            pass
        finally:
            sys.path.remove(debian)
    import pyseccomp  # type: ignore[import-not-found]

    return pyseccomp


def load_seccomp() -> None:
    """Load a deny-list seccomp filter (default allow) into this process.

    EPERM for :data:`DENIED_SYSCALLS`, for ``clone`` without ``CLONE_THREAD`` (threads still work), for signals
    to any process but this one (``kill``-like calls, and ``fcntl(F_SETOWN/F_SETOWN_EX)``, which would aim
    ``SIGIO`` at it), for :data:`SELF_ONLY_SYSCALLS` aimed at another pid, and for ``prctl(PR_SET_PDEATHSIG)`` (the
    worker armed it); ENOSYS for ``clone3`` so glibc falls back to ``clone``. A syscall of another ABI (x32, i386
    through ``int 0x80``) kills the whole process, not only the calling thread. Sets ``no_new_privs``.
    """
    sc = _seccomp_module()
    filt = sc.SyscallFilter(defaction=sc.ALLOW)
    filt.set_attr(sc.Attr.ACT_BADARCH, sc.KILL_PROCESS)  # a killed thread alone leaves a mute worker behind
    deny = sc.ERRNO(errno.EPERM)
    for name in DENIED_SYSCALLS:
        try:
            filt.add_rule(deny, name)
        except (RuntimeError, ValueError, OSError):  # syscall absent on this architecture
            continue
    filt.add_rule(deny, "clone", sc.Arg(0, sc.MASKED_EQ, _CLONE_THREAD, 0))
    filt.add_rule(sc.ERRNO(errno.ENOSYS), "clone3")
    me = os.getpid()
    filt.add_rule(deny, "kill", sc.Arg(0, sc.NE, me))
    filt.add_rule(deny, "tgkill", sc.Arg(0, sc.NE, me))
    filt.add_rule(deny, "rt_sigqueueinfo", sc.Arg(0, sc.NE, me))
    for name, index in SELF_ONLY_SYSCALLS:  # any other pid (or one with high bits set) is refused
        filt.add_rule(deny, name, sc.Arg(index, sc.NE, 0))
    filt.add_rule(deny, "setpriority", sc.Arg(0, sc.NE, _PRIO_PROCESS))  # not a process group or a whole uid
    filt.add_rule(deny, "ioprio_set", sc.Arg(0, sc.NE, _IOPRIO_WHO_PROCESS))
    # armed already: env code may not clear it (masked: ``(1 << 32) | PR_SET_PDEATHSIG`` is the same option)
    filt.add_rule(deny, "prctl", sc.Arg(0, sc.MASKED_EQ, _LOW_32, _PR_SET_PDEATHSIG))
    for command in (_F_SETOWN, _F_SETOWN_EX):
        filt.add_rule(deny, "fcntl", sc.Arg(1, sc.MASKED_EQ, _LOW_32, command))
    filt.load()


# -- Landlock (raw syscalls; the numbers are shared by all architectures that have it) --------------------------
_SYS_CREATE_RULESET, _SYS_ADD_RULE, _SYS_RESTRICT_SELF = 444, 445, 446
_FS_READ = (1 << 0) | (1 << 2) | (1 << 3)  # execute, read_file, read_dir
_FS_ALL_V1 = (1 << 13) - 1


class _RulesetAttr(ctypes.Structure):
    _fields_ = [("fs", ctypes.c_uint64), ("net", ctypes.c_uint64), ("scoped", ctypes.c_uint64)]


class _PathBeneath(ctypes.Structure):
    _pack_ = 1
    _fields_ = [("allowed", ctypes.c_uint64), ("parent_fd", ctypes.c_int32)]


def landlock_abi() -> int:
    """The kernel's Landlock ABI version, 0 when unavailable."""
    version = _libc.syscall(_SYS_CREATE_RULESET, None, 0, 1)
    return max(int(version), 0)


def restrict_filesystem(read_only: Iterable[str], read_write: Iterable[str], list_only: Iterable[str] = ()) -> int:
    """Landlock this process: read/execute under ``read_only``, everything under ``read_write``, nothing elsewhere.

    ``list_only``: directories whose entries (names only, at any depth) may be listed, nothing read: the parents of
    carved-out evaluation data (``launch.split_readable``).

    TCP bind and connect are denied (ABI >= 4); abstract unix sockets and signals to other domains scoped (ABI >= 6).
    Returns the ABI used. UDP is not covered by Landlock: seccomp's socket rule closes that gap.
    """
    abi = landlock_abi()
    if abi < 1:
        raise OSError(errno.ENOSYS, "Landlock is not available in this kernel")
    fs_all = _FS_ALL_V1 | (1 << 13 if abi >= 2 else 0) | (1 << 14 if abi >= 3 else 0) | (1 << 15 if abi >= 5 else 0)
    attr = _RulesetAttr(fs=fs_all, net=3 if abi >= 4 else 0, scoped=3 if abi >= 6 else 0)
    size = 8 if abi < 4 else 16 if abi < 6 else 24
    ruleset = _libc.syscall(_SYS_CREATE_RULESET, ctypes.byref(attr), size, 0)
    if ruleset < 0:
        raise OSError(ctypes.get_errno(), "landlock_create_ruleset failed")
    try:
        rule, file_rights = _PathBeneath(), _file_rights(abi)
        rule_ref, add_rule = ctypes.byref(rule), _libc.syscall
        for paths, access in ((list_only, 1 << 3), (read_only, _FS_READ), (read_write, fs_all)):
            for path in paths:  # hundreds of paths where evaluation data is carved out: one open and fstat each
                try:
                    fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
                except FileNotFoundError:
                    continue
                try:
                    is_dir = stat.S_ISDIR(os.fstat(fd).st_mode)
                    rule.allowed, rule.parent_fd = (access if is_dir else access & ~(1 << 3) & file_rights), fd
                    if add_rule(_SYS_ADD_RULE, ruleset, 1, rule_ref, 0) < 0:
                        raise OSError(ctypes.get_errno(), f"landlock_add_rule failed for {path}")
                finally:
                    os.close(fd)
        if _libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
            raise OSError(ctypes.get_errno(), "prctl(NO_NEW_PRIVS) failed")
        if _libc.syscall(_SYS_RESTRICT_SELF, ruleset, 0) < 0:
            raise OSError(ctypes.get_errno(), "landlock_restrict_self failed")
    finally:
        os.close(ruleset)
    return abi


def _file_rights(abi: int) -> int:
    """Rights that may be granted on a regular file (not a directory)."""
    return (1 << 0) | (1 << 1) | (1 << 2) | (1 << 14 if abi >= 3 else 0) | (1 << 15 if abi >= 5 else 0)
