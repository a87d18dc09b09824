"""Attacks on the kernel and on other processes from env code (issue 24), asserted from the host's side.

Each program runs at both untrusted levels on this host (root in CI's container). The non-root host case (a
trainer started as an ordinary uid, as in Kubernetes) runs in ``test_nonroot_host.py``. No test writes a real
sysctl: the probes are ``open(O_WRONLY)`` and a no-op write of the current value of a harmless one.
"""

from __future__ import annotations

import json
import os
import resource
import time
from pathlib import Path
from typing import Any

import pytest

from spade_envs.sandbox import RemoteEnv, SandboxConfig, WorkerPool
from spade_envs.sandbox.errors import EnvCrashed

LEVELS = ("bwrap", "landlock")
CONFIG = {"pool_size": 0, "max_workers": 4, "preload_numpy": False, "start_timeout_s": 10, "scratch_files": 64}

PROBE = """
import ctypes, json, os
libc = ctypes.CDLL(None, use_errno=True)


def attempt(fn):
    try:
        return "ok: " + repr(fn())
    except OSError as exc:
        return f"refused: {exc.errno}"
    except BaseException as exc:
        return f"refused: {type(exc).__name__}: {exc}"


def syscall(*args):
    ret = libc.syscall(*args)
    if ret < 0:
        raise OSError(ctypes.get_errno(), os.strerror(ctypes.get_errno()))
    return ret


def noop_write(path):  # writes back the value that is there: never changes the setting
    fd = os.open(path, os.O_RDWR)
    try:
        value = os.read(fd, 64)
        os.lseek(fd, 0, 0)
        return os.write(fd, value)
    finally:
        os.close(fd)


def open_for_writing(path):
    os.close(os.open(path, os.O_WRONLY))


def exec_file_in_scratch():
    path = os.path.join(os.environ["TMPDIR"], "helper.sh")
    with open(path, "w") as f:
        f.write("#!/bin/sh\\n")
    return [line for line in open("/proc/self/mounts") if os.environ["TMPDIR"] in line][-1].split()[3]


class AttackEnv:
    max_turns = 1

    def reset(self, seed=None):
        out = {
            "stat_interval_noop": attempt(lambda: noop_write("/proc/sys/vm/stat_interval")),
            "core_pattern": attempt(lambda: open_for_writing("/proc/sys/kernel/core_pattern")),
            "randomize_va_space": attempt(lambda: open_for_writing("/proc/sys/kernel/randomize_va_space")),
            "drop_caches": attempt(lambda: open_for_writing("/proc/sys/vm/drop_caches")),
            "scratch_mount": attempt(exec_file_in_scratch),
        }
        return json.dumps(out), {}

    def step(self, action):
        return "", 0.0, True, False, {}

    def solution(self):
        return []
"""


@pytest.fixture(scope="module", params=LEVELS)
def pool(request: pytest.FixtureRequest, procs: Any):
    with WorkerPool(SandboxConfig(isolation=request.param, **CONFIG)) as pool:
        assert pool.level == request.param
        yield pool
    procs.assert_no_workers_left()


def _host_uid_of(pid: int) -> list[int]:
    """Real, effective, saved and fs uids of ``pid`` as the host sees them (``/proc/<pid>/status``)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("Uid:"):
            return [int(x) for x in line.split()[1:]]
    raise AssertionError(f"no Uid line for {pid}")


def _env_pid(env: RemoteEnv) -> int:
    """The pid (in the host's namespace) of the python process that runs env code (inside bwrap's tree)."""
    for pid in [env.worker.proc.pid, *_descendants(env.worker.proc.pid)]:
        try:
            if "worker.py" in Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace") and "python" in (
                Path(f"/proc/{pid}/comm").read_text()
            ):
                return pid
        except OSError:
            continue
    raise AssertionError("no worker process found")


def _descendants(pid: int) -> list[int]:
    found, todo = [], [pid]
    while todo:
        for task in Path(f"/proc/{todo.pop()}/task").glob("*/children"):
            kids = [int(p) for p in task.read_text().split()]
            found += kids
            todo += kids
    return found


def test_env_code_cannot_write_kernel_state_nor_run_as_host_root(pool: WorkerPool) -> None:
    """Finding 1: at bwrap on a root host the sandbox uid mapped to host 0 and /proc/sys was writable."""
    sysctls = {p: Path(p).read_bytes() for p in ("/proc/sys/vm/stat_interval", "/proc/sys/kernel/core_pattern")}
    env = RemoteEnv(PROBE, pool)
    try:
        out = json.loads(env.reset(0)[0])
        uids = _host_uid_of(_env_pid(env))
    finally:
        env.close()
    for probe in ("stat_interval_noop", "core_pattern", "randomize_va_space", "drop_caches"):
        assert out[probe].startswith("refused"), (probe, out[probe])
    assert {p: Path(p).read_bytes() for p in sysctls} == sysctls
    if os.geteuid() == 0:  # a root host hands each worker an unprivileged uid of its own
        assert 0 not in uids, f"env code runs as host uid {uids}"
        assert "noexec" in out["scratch_mount"].split(",") or out["scratch_mount"].startswith("refused"), out


@pytest.mark.skipif(os.geteuid() != 0, reason="only a root host leases worker uids (test_nonroot_host.py)")
def test_a_leased_uid_is_never_one_a_live_process_or_lease_holds(monkeypatch: pytest.MonkeyPatch) -> None:
    """Finding 3: uids derived from pids collided across hosts, so one worker could reach (kill) another."""
    import subprocess

    from spade_envs.sandbox import uids

    monkeypatch.setattr(uids, "_rng", type("Fixed", (), {"randrange": staticmethod(lambda _n: 7)}))  # same start
    monkeypatch.setattr(uids, "_seen", (-1.0, set()))  # no scan of /proc from before the squatter started
    squatter = subprocess.Popen(["setpriv", f"--reuid={uids.FIRST_UID + 7}", "--clear-groups", "sleep", "30"])
    try:
        for _ in range(200):  # until setpriv has changed its uid
            if uids.FIRST_UID + 7 in uids.uids_in_use():
                break
            time.sleep(0.01)
        first, second = uids.lease_uid(), uids.lease_uid()
        try:
            assert first.uid == uids.FIRST_UID + 8, "the uid of a live process was handed out"
            assert second.uid == uids.FIRST_UID + 9, "a uid already leased was handed out again"
        finally:
            first.release()
            second.release()
        again = uids.lease_uid()
        again.release()
        assert again.uid == uids.FIRST_UID + 8  # a released uid is free again
    finally:
        squatter.kill()
        squatter.wait()


REACH = """
import ctypes, fcntl, json, os, resource, sys
libc = ctypes.CDLL(None, use_errno=True)


def read_any(root):  # the first file under root that opens: evaluation data, answers, held-out generators
    for folder, _dirs, files in os.walk(root):
        for name in files:
            with open(os.path.join(folder, name), "rb") as f:
                return f"{name}: {f.read(20)!r}"
    raise FileNotFoundError(root)


def read_package(name):  # every copy of an installed package on sys.path
    folders = [os.path.join(p, name) for p in sys.path if p and os.path.isdir(os.path.join(p, name))]
    return [read_any(folder) for folder in folders] or read_any("/nonexistent")


def attempt(fn):
    try:
        return "ok: " + repr(fn())[:100]
    except OSError as exc:
        return f"refused: {exc.errno}"


def call(name, *args):
    ret = getattr(libc, name)(*args)
    if ret == -1:
        raise OSError(ctypes.get_errno(), name)
    return ret


def raw(number, *args):  # a syscall with full 64-bit arguments (ctypes masks a plain int to a C int)
    return call("syscall", ctypes.c_long(number), *(ctypes.c_long(a) for a in args))


class AttackEnv:
    max_turns = 1

    def reset(self, seed=None):
        me = os.getpid()
        high = 1 << 32  # the kernel reads int arguments from the low 32 bits; seccomp compares all 64
        owner = (ctypes.c_int * 2)(1, os.getppid())  # struct f_owner_ex {F_OWNER_PID, the parent}
        out = {
            # by pid: the worker's own pid stands in for the trainer's (a shared uid makes them equally reachable)
            "prlimit_by_pid": attempt(lambda: resource.prlimit(me, resource.RLIMIT_NOFILE)),
            "prlimit_high_bits": attempt(lambda: raw(302, high | me, 7, 0, 0)),
            # SIGIO (or SIGKILL, with F_SETSIG) to a process named by F_SETOWN: a signal that never passes kill()
            "fsetown": attempt(lambda: fcntl.fcntl(os.pipe()[0], fcntl.F_SETOWN, os.getppid())),
            "fsetown_high_bits": attempt(lambda: raw(72, os.pipe()[0], high | fcntl.F_SETOWN, os.getppid())),
            "fsetown_ex": attempt(lambda: raw(72, os.pipe()[0], 15, ctypes.addressof(owner))),
            "setpriority_user": attempt(lambda: os.setpriority(os.PRIO_USER, 0, 19)),
            "setpriority_pid": attempt(lambda: os.setpriority(os.PRIO_PROCESS, me, 19)),
            "sched_setaffinity_pid": attempt(lambda: os.sched_setaffinity(me, os.sched_getaffinity(0))),
            "ioprio_set_user": attempt(lambda: call("syscall", 251, 3, 0, 0)),
            "kcmp": attempt(lambda: call("syscall", 312, me, me, 0, 0, 0)),
            "clear_pdeathsig": attempt(lambda: call("prctl", 1, 0, 0, 0, 0)),
            "clear_pdeathsig_high_bits": attempt(lambda: raw(157, high | 1, 0, 0, 0, 0)),
            # evaluation data (finding 11): what a designed env could serve the agent as held-out items
            "eval_data": attempt(lambda: read_any(os.path.join(sys.modules["spade_envs"].__path__[0], "evaluation"))),
            "bfcl_answers": attempt(lambda: read_package("bfcl_eval")),
            "reasoning_gym": attempt(lambda: read_package("reasoning_gym")),
            # memory outside every budget
            "memfds": attempt(lambda: [os.ftruncate(os.memfd_create("x"), 16 << 20) for _ in range(16)]),
            # the caller's own resources stay adjustable
            "own_limits": attempt(lambda: resource.setrlimit(resource.RLIMIT_CORE, (0, 0))),
            "own_nice": attempt(lambda: os.setpriority(os.PRIO_PROCESS, 0, 1)),
        }
        for fd in range(3, 64):  # fill what memfds were made, so the host sees their pages
            try:
                if os.readlink(f"/proc/self/fd/{fd}").startswith("/memfd:"):
                    os.write(fd, b"x" * (1 << 20))
            except OSError:
                pass
        return json.dumps(out), {}

    def step(self, action):
        return "", 0.0, True, False, {}

    def solution(self):
        return []
"""


def _shmem_kib() -> int:
    for line in Path("/proc/meminfo").read_text().splitlines():
        if line.startswith("Shmem:"):
            return int(line.split()[1])
    raise AssertionError("no Shmem in /proc/meminfo")


def test_env_code_cannot_reach_other_processes_nor_park_shared_memory(pool: WorkerPool) -> None:
    """Findings 2, 4, 6 and 11: prlimit/renice/re-pin by pid, memfds outside the budget, clearing the death signal,
    reading evaluation data."""
    limits = {r: resource.getrlimit(r) for r in (resource.RLIMIT_NOFILE, resource.RLIMIT_CPU)}
    nice, shmem = os.getpriority(os.PRIO_PROCESS, 0), _shmem_kib()
    env = RemoteEnv(REACH, pool)
    try:
        out = json.loads(env.reset(0)[0])
        shmem_growth_mib = (_shmem_kib() - shmem) / 1024
    finally:
        env.close()
    refused = [k for k in out if k not in ("own_limits", "own_nice")]
    assert all(out[k].startswith("refused") for k in refused), out
    assert out["own_limits"].startswith("ok") and out["own_nice"].startswith("ok"), out
    assert shmem_growth_mib < 8, f"host Shmem grew by {shmem_growth_mib:.0f} MiB"
    assert {r: resource.getrlimit(r) for r in limits} == limits and os.getpriority(os.PRIO_PROCESS, 0) == nice


@pytest.mark.skipif(os.geteuid() != 0, reason="only a root host leases worker uids")
def test_a_planted_lock_directory_is_refused(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """/tmp is shared: a link (or an open folder) planted at the lease directory must not steer root's files."""
    from spade_envs.sandbox import uids

    target = tmp_path / "elsewhere"
    target.mkdir()
    (tmp_path / "link").symlink_to(target)
    monkeypatch.setattr(uids, "_LOCK_DIR", str(tmp_path / "link"))
    with pytest.raises(OSError, match="refusing to use it"):
        uids.lease_uid()
    open_dir = tmp_path / "open"
    open_dir.mkdir(mode=0o777)
    open_dir.chmod(0o777)
    monkeypatch.setattr(uids, "_LOCK_DIR", str(open_dir))
    with pytest.raises(OSError, match="refusing to use it"):
        uids.lease_uid()
    assert not list(target.iterdir()) and not list(open_dir.iterdir())


OTHER_ABI = """
import ctypes


class OtherAbiEnv:
    max_turns = 1

    def reset(self, seed=None):  # socket() through the x32 ABI: the filter's arch check catches it, not a rule
        args = (0x40000000 + 41, 1, 1, 0)
        ctypes.CDLL(None).syscall(*(ctypes.c_long(a) for a in args))
        return "not refused", {}

    def step(self, action):
        return "", 0.0, True, False, {}

    def solution(self):
        return []
"""


@pytest.mark.skipif(os.uname().machine != "x86_64", reason="the x32 ABI exists on x86_64 only")
def test_a_syscall_of_another_abi_kills_the_whole_worker(pool: WorkerPool) -> None:
    """libseccomp's default for another ABI kills the calling thread only: the parent watchdog thread kept the
    worker alive and mute, so the host saw a call timeout (10 s) instead of a crash."""
    env = RemoteEnv(OTHER_ABI, pool)
    try:
        with pytest.raises(EnvCrashed):
            env.reset(0)
    finally:
        env.close()
