"""How a worker process is started: the interpreter flags, its environment, the bubblewrap mounts, the spawner.

* Interpreter: ``-S -P`` (no ``site``: no user site, no ``.pth`` code; no script directory on ``sys.path``) with
  an environment built here that holds only ``PYTHONHASHSEED``: the isolation of ``-I`` (which also ignores
  ``PYTHONHASHSEED``) with one fixed string-hash seed, so the same seed builds the same instance in every worker
  (paired measurements need that). The worker appends :func:`site_packages` to ``sys.path`` itself, which also
  skips the tens of milliseconds that ``.pth`` hooks of editable installs cost at every start.
* Binds: ``/usr`` and the dynamic-loader files, the interpreter's installation (standard library), the virtual
  environment (its packages) and the ``spade_envs`` package; never other ``sys.path`` entries (a ``PYTHONPATH``
  dir or the driver script's dir may hold anything).
* ``/dev`` holds only ``null``, ``zero``, ``full``, ``random`` and ``urandom``, on the sandbox's read-only root: no
  writable tmpfs (``/dev/shm``) that would be host RAM outside ``memory_mb``.
* Spawning: every worker is started from one long-lived thread. A parent-death signal fires when the *thread*
  that forked the child exits, so spawning from short-lived threads would kill live workers.
"""

from __future__ import annotations

import functools
import json
import os
import queue
import shutil
import site
import subprocess
import sys
import sysconfig
import threading
from concurrent.futures import Future
from pathlib import Path
from typing import Any

__all__ = [
    "HASH_SEED",
    "PACKAGE",
    "ROOT",
    "WORKER_SCRIPT",
    "HIDDEN_PACKAGES",
    "bwrap_prefix",
    "hidden_paths",
    "landlock_paths",
    "python_command",
    "read_only_paths",
    "spawn",
    "split_readable",
    "worker_command",
]

ROOT = str(Path(__file__).resolve().parents[2])
PACKAGE = str(Path(__file__).resolve().parents[1])
WORKER_SCRIPT = str(Path(__file__).resolve().with_name("worker.py"))
#: The string-hash seed of every worker (any fixed value pairs the arms; 0 turns hash randomisation off).
HASH_SEED = "0"
_DEVICES = ("/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom")


def python_command(config_json: str) -> tuple[list[str], dict[str, str]]:
    """The worker's command line and the complete environment it starts with."""
    flags = ["-S", "-P"] if sys.version_info >= (3, 11) else ["-S"]  # 3.10: the worker drops its own directory
    return [sys.executable, *flags, WORKER_SCRIPT, config_json], {"PYTHONHASHSEED": HASH_SEED}


def worker_command(config: Any, level: str, req_r: int, resp_w: int, scratch: str, scratch_mounted: bool,
                   uid: int | None, warm: bool) -> tuple[list[str], dict[str, str]]:  # fmt: skip
    """The command line and environment of one worker at ``level`` (a ``SandboxConfig``'s limits, its pipe fds)."""
    worker_cfg = {
        "rfd": req_r,
        "wfd": resp_w,
        "level": level,
        "root": ROOT,
        "scratch": scratch,
        "uid": uid,
        "host_pid": None if level == "bwrap" else os.getpid(),  # inside bwrap the parent is bwrap itself
        "read_only": list(landlock_paths()[0]) if level == "landlock" else read_only_paths(),
        "list_only": list(landlock_paths()[1]) if level == "landlock" else [],
        "bound": read_only_paths(),  # what the uid must reach (the few roots, not Landlock's carved list)
        "site_packages": site_packages(),
        "soft_timeout_s": config.soft_timeout_s,
        "max_request_bytes": config.max_request_bytes,
        "max_observation_chars": config.max_observation_chars,
        "preload_numpy": config.preload_numpy,
        "request_spin_us": config.request_spin_us,
        "nice": config.nice,
        "warm": warm,
        "limits": {"memory_mb": config.memory_mb, "cpu_s": config.episode_cpu_s,
                   "file_size_mb": config.file_size_mb, "open_files": config.open_files,
                   "processes": config.processes},
    }  # fmt: skip
    cmd, env = python_command(json.dumps(worker_cfg))
    if level == "bwrap":  # bwrap starts with an empty environment (/proc/1/environ shows it) and sets the child's
        cmd, env = bwrap_prefix(scratch, scratch_mounted, config.scratch_mb, uid is not None) + cmd, {}
    return cmd, env


def site_packages() -> list[str]:
    """The package directories ``site`` would add for this interpreter (the venv's), without the user site."""
    return list(_site_packages())


@functools.lru_cache(maxsize=1)
def _site_packages() -> tuple[str, ...]:  # fixed for the life of the host process; sysconfig is slow (~1 ms)
    paths = site.getsitepackages() if hasattr(site, "getsitepackages") else []
    paths += [sysconfig.get_path("purelib"), sysconfig.get_path("platlib")]
    return tuple(p for p in dict.fromkeys(paths) if p and os.path.isdir(p))


def read_only_paths() -> list[str]:
    """What a worker may read: the loader's files, the interpreter and its stdlib, the venv and the package."""
    return list(_read_only_paths())


@functools.lru_cache(maxsize=1)
def _read_only_paths() -> tuple[str, ...]:  # computed once per host process (each start used to pay ~3 ms)
    paths = {"/usr", "/etc/ld.so.cache", "/etc/alternatives", "/etc/localtime", PACKAGE}
    paths |= {sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix}
    paths.add(os.path.dirname(os.path.realpath(sys.executable)))
    for name in ("stdlib", "platstdlib"):  # distro layouts may keep them outside the prefix
        paths.add(sysconfig.get_path(name))
    paths.update(_site_packages())
    return tuple(sorted(p for p in paths if p and os.path.exists(p)))


#: Installed packages that hold evaluation data (benchmarks, answer files, held-out generators): an env that could
#: read them could serve held-out items to the agent (train-on-test by construction).
HIDDEN_PACKAGES = ("bfcl_eval", "reasoning_gym")


def hidden_paths() -> list[str]:
    """What a worker must not read although it lies inside a read-only path: evaluation code, data and answers."""
    return list(_hidden_paths())


@functools.lru_cache(maxsize=1)
def _hidden_paths() -> tuple[str, ...]:
    paths = [os.path.join(PACKAGE, "evaluation")]
    paths += [os.path.join(sp, name) for sp in _site_packages() for name in HIDDEN_PACKAGES]
    return tuple(sorted(p for p in dict.fromkeys(paths) if os.path.exists(p)))


def split_readable(paths: list[str], hidden: list[str]) -> tuple[list[str], list[str]]:
    """``(readable, list_only)``: ``paths`` with ``hidden`` carved out, for Landlock, whose rules only add rights.

    A path above a hidden one may only be listed (Python's import system lists ``sys.path`` entries); each of its
    entries is then readable, or carved again, or left out if hidden. Links into hidden trees are left out.
    """
    hidden_set = {os.path.realpath(h) for h in hidden}
    readable: list[str] = []
    listed: list[str] = []

    def visit(path: str) -> None:
        real = os.path.realpath(path)
        if real in hidden_set or any(real.startswith(h + "/") for h in hidden_set):
            return
        if not any(h.startswith(real.rstrip("/") + "/") for h in hidden_set):
            readable.append(path)
        elif os.path.islink(path):
            return  # the real directory is carved where it is visited itself
        else:
            listed.append(path)
            for name in sorted(os.listdir(path)):
                visit(os.path.join(path, name))

    for path in paths:
        visit(path)
    return list(dict.fromkeys(readable)), list(dict.fromkeys(listed))


@functools.lru_cache(maxsize=1)
def landlock_paths() -> tuple[tuple[str, ...], tuple[str, ...]]:
    """:func:`split_readable` of :func:`read_only_paths` (computed once per host process)."""
    readable, listed = split_readable(read_only_paths(), hidden_paths())
    return tuple(readable), tuple(listed)


def _ancestors(paths: list[str]) -> list[str]:
    """Every directory above ``paths`` (outermost first), which bubblewrap would otherwise create mode 0700."""
    found: set[str] = set()
    for path in paths:
        parent = os.path.dirname(path.rstrip("/"))
        while parent not in ("", "/"):
            found.add(parent)
            parent = os.path.dirname(parent)
    return sorted(found, key=lambda p: (p.count("/"), p))


def bwrap_prefix(scratch: str, scratch_mounted: bool = True, scratch_mb: int = 0, root_host: bool = False) -> list[str]:
    """The bubblewrap command up to ``--``: namespaces, read-only binds, scratch, a minimal ``/dev``.

    No tmpfs at /tmp: it would hide binds of paths under /tmp (a checkout, a venv, the scratch dir) mounted before
    it, or let env code write beside them if mounted first. TMPDIR points at scratch instead (worker.py). When
    the host could not put a limited tmpfs on scratch, bubblewrap mounts one of ``scratch_mb`` MiB there.

    ``root_host``: the host is root. A user namespace made by root maps the sandbox's uid to host uid 0, and global
    sysctls check only that uid, so bubblewrap then makes no user namespace: it keeps only ``CAP_SETUID``,
    ``CAP_SETGID`` and ``CAP_SETPCAP`` for the worker, which drops to its leased host uid (and its bounding set)
    before any env code arrives. Directories above the binds are made 0755, so that uid can reach the binds even
    when the host's own parents (``/root``) are closed; what the binds hold keeps its own modes.
    """
    args = [shutil.which("bwrap") or "bwrap"]
    if root_host:
        args += ["--unshare-ipc", "--unshare-pid", "--unshare-net", "--unshare-uts", "--unshare-cgroup-try"]
        args += ["--die-with-parent", "--cap-drop", "ALL"]
        args += [arg for cap in ("CAP_SETUID", "CAP_SETGID", "CAP_SETPCAP") for arg in ("--cap-add", cap)]
    else:
        args += ["--unshare-all", "--die-with-parent", "--cap-drop", "ALL"]
    args += ["--clearenv", "--setenv", "PYTHONHASHSEED", HASH_SEED]
    for link in ("/lib", "/lib64", "/bin", "/sbin"):
        if os.path.islink(link):
            args += ["--symlink", os.readlink(link), link]
        elif os.path.isdir(link):
            args += ["--ro-bind", link, link]
    paths = read_only_paths()
    binds = [p for p in paths if not any(p != o and p.startswith(o.rstrip("/") + "/") for o in paths)]
    for parent in _ancestors([*binds, scratch]):  # a path inside another bound path is already visible
        if not any(parent == b or parent.startswith(b.rstrip("/") + "/") for b in binds):
            args += ["--perms", "0755", "--dir", parent]
    for path in binds:
        args += ["--ro-bind", path, path]
    for path in hidden_paths():  # evaluation data stays out of the sandbox: an empty read-only tmpfs covers it
        args += ["--perms", "0555", "--tmpfs", path, "--remount-ro", path]
    if root_host or scratch_mounted or scratch_mb <= 0:
        args += ["--bind", scratch, scratch]
    else:
        args += ["--size", str(scratch_mb << 20), "--perms", "0700", "--tmpfs", scratch]
    # Kernel state stays read-only whoever the worker is: bubblewrap covers /proc/sys only when it sees it writable.
    args += ["--proc", "/proc", "--ro-bind", "/proc/sys", "/proc/sys"]
    args += ["--ro-bind-try", "/proc/sysrq-trigger", "/proc/sysrq-trigger"]
    for device in _DEVICES:
        if os.path.exists(device):
            args += ["--dev-bind", device, device]
    for name, target in (("fd", "/proc/self/fd"), ("stdin", "/proc/self/fd/0"), ("stdout", "/proc/self/fd/1"),
                         ("stderr", "/proc/self/fd/2")):  # fmt: skip
        args += ["--symlink", target, f"/dev/{name}"]
    # The sandbox's own root (a tmpfs holding the mount points, /dev included) becomes read-only: only scratch is
    # writable.
    args += ["--remount-ro", "/", "--chdir", "/" if root_host else scratch]  # as root: scratch is the worker's uid's
    return args + ([] if root_host else ["--uid", "65534", "--gid", "65534"]) + ["--"]


_requests: queue.SimpleQueue[tuple[Future[subprocess.Popen[bytes]], list[str], dict[str, Any]]] = queue.SimpleQueue()
_spawner: threading.Thread | None = None
_spawner_lock = threading.Lock()


def _spawn_loop() -> None:
    while True:
        future, cmd, kwargs = _requests.get()
        if future.set_running_or_notify_cancel():
            try:
                future.set_result(subprocess.Popen(cmd, **kwargs))
            except BaseException as exc:  # noqa: BLE001  (handed to the caller)
                future.set_exception(exc)


def spawn(cmd: list[str], **kwargs: Any) -> subprocess.Popen[bytes]:
    """``subprocess.Popen(cmd, **kwargs)`` run on the process's one spawner thread (it lives as long as the process)."""
    global _spawner
    with _spawner_lock:
        if _spawner is None or not _spawner.is_alive():
            _spawner = threading.Thread(target=_spawn_loop, name="spade-sandbox-spawner", daemon=True)
            _spawner.start()
    future: Future[subprocess.Popen[bytes]] = Future()
    _requests.put((future, cmd, kwargs))
    return future.result()
