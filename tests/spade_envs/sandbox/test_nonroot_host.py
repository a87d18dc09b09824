"""The sandbox on a non-root host (issue 24): a trainer started as an ordinary uid, as in Kubernetes pods.

Such a host cannot give workers a uid of their own, so they share the trainer's: seccomp alone must keep env code
from reaching the trainer (its rlimits, priority), a peer worker, shared memory and the parent-death signal. The
host here is a subprocess started by ``setpriv`` as a leased uid, with an interpreter that uid can read. Every
assertion is about what the host sees.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import sysconfig
import time
from pathlib import Path
from typing import Any

import pytest

from spade_envs.sandbox.hardening import world_readable

ROOT = Path(__file__).resolve().parents[3]


def _interpreter() -> str | None:
    """This interpreter if any uid can run it, else the system's of the same version (same ABI as the venv)."""
    for candidate in (sys.executable, f"/usr/bin/python{sys.version_info.major}.{sys.version_info.minor}"):
        if os.path.exists(candidate) and world_readable(candidate):
            return candidate
    return None


def _why_not() -> str | None:
    if os.geteuid() != 0:
        return "the host already runs as a non-root uid: every other sandbox test covers this case"
    if shutil.which("setpriv") is None:
        return "setpriv (util-linux) is not installed"
    if _interpreter() is None:
        return "no Python interpreter of this version is readable by an unprivileged uid"
    packages = sysconfig.get_path("purelib")
    if not (world_readable(packages) and world_readable(str(ROOT / "spade_envs"))):
        return f"{packages} or the checkout is not readable by an unprivileged uid"
    return None


pytestmark = pytest.mark.skipif(_why_not() is not None, reason=str(_why_not()))

HOST = r"""
import json, os, resource, sys
from spade_envs.sandbox import RemoteEnv, SandboxConfig, WorkerPool

level, source = sys.argv[1], sys.stdin.read()
before = resource.getrlimit(resource.RLIMIT_NOFILE), os.getpriority(os.PRIO_PROCESS, 0)
with WorkerPool(SandboxConfig(isolation=level, pool_size=0, preload_numpy=False)) as pool:
    peer = RemoteEnv(source, pool)
    env = RemoteEnv(source, pool)
    peer_pid = json.loads(peer.reset(0)[0])["pid"]
    out = json.loads(env.reset(peer_pid)[0])
    out["peer_alive"] = peer.step("still there?")[0] == "alive"
    out["level"], out["euid"] = pool.level, os.geteuid()
    out["host_unchanged"] = (resource.getrlimit(resource.RLIMIT_NOFILE), os.getpriority(os.PRIO_PROCESS, 0)) == before
    peer.close()
    env.close()
print(json.dumps(out), flush=True)
"""

ATTACK = r"""
import ctypes, json, os, resource, sys
libc = ctypes.CDLL(None, use_errno=True)


def read_eval_data():
    folder = os.path.join(sys.modules["spade_envs"].__path__[0], "evaluation", "data")
    for name in os.listdir(folder):
        with open(os.path.join(folder, name), "rb") as f:
            return f.read(20)
    raise FileNotFoundError(folder)


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


class AttackEnv:
    max_turns = 5

    def reset(self, seed=None):
        host, peer = os.getppid(), seed  # at bwrap the host is outside the pid namespace: the peer is the target
        out = {"pid": os.getpid()}
        if seed:
            for target, name in ((host, "host"), (peer, "peer")):
                out[f"{name}_nofile"] = attempt(lambda: resource.prlimit(target, resource.RLIMIT_NOFILE, (8, 8)))
                out[f"{name}_renice"] = attempt(lambda: os.setpriority(os.PRIO_PROCESS, target, 19))
            out["user_renice"] = attempt(lambda: os.setpriority(os.PRIO_USER, 0, 19))
            out["memfd"] = attempt(lambda: os.memfd_create("x"))
            out["pdeathsig"] = attempt(lambda: call("prctl", 1, 0, 0, 0, 0))
            out["eval_data"] = attempt(read_eval_data)
            out["core_pattern"] = attempt(lambda: os.close(os.open("/proc/sys/kernel/core_pattern", os.O_WRONLY)))
        return json.dumps(out), {}

    def step(self, action):
        return "alive", 0.0, False, False, {}

    def solution(self):
        return []
"""


def _as_unprivileged(uid: int, *args: str, **kwargs: Any) -> subprocess.Popen[str]:
    env = {"PYTHONPATH": f"{ROOT}{os.pathsep}{sysconfig.get_path('purelib')}", "PATH": "/usr/bin:/bin"}
    command = ["setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups", _interpreter() or "", *args]
    return subprocess.Popen(command, env=env, cwd="/", text=True, **kwargs)


@pytest.fixture(scope="module")
def host_uid():
    from spade_envs.sandbox.uids import lease_uid

    lease = lease_uid()
    yield lease.uid
    lease.release()


@pytest.mark.parametrize("level", ["bwrap", "landlock"])
def test_env_code_cannot_reach_a_non_root_trainer_or_its_peers(level: str, host_uid: int) -> None:
    host = _as_unprivileged(host_uid, "-c", HOST, level, stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    stdout, _ = host.communicate(ATTACK, timeout=60)
    assert host.returncode == 0, f"the host died (exit {host.returncode})"
    out = json.loads(stdout)
    assert out["level"] == level and out["euid"] == host_uid
    attacks = [f"{who}_{what}" for who in ("host", "peer") for what in ("nofile", "renice")]
    attacks += ["user_renice", "memfd", "pdeathsig", "core_pattern", "eval_data"]
    assert all(out[k].startswith("refused") for k in attacks), out
    assert out["peer_alive"] and out["host_unchanged"], out


KILLED_HOST = r"""
import json, sys
from spade_envs.sandbox import RemoteEnv, SandboxConfig, WorkerPool

pool = WorkerPool(SandboxConfig(isolation="landlock", pool_size=0, preload_numpy=False, call_timeout_s=120,
                                soft_timeout_s=60))
env = RemoteEnv(sys.stdin.read(), pool)
print(json.dumps(env.worker.proc.pid), flush=True)
env.reset(0)  # never returns
"""

CLEARS_DEATH_SIGNAL = """
import ctypes, signal


class UndyingEnv:
    max_turns = 1

    def reset(self, seed=None):
        libc = ctypes.CDLL(None)
        libc.prctl(1, 0, 0, 0, 0)  # PR_SET_PDEATHSIG 0
        # the same with bits above the int: the kernel reads option 1, an unmasked 64-bit filter compare does not
        libc.syscall(*(ctypes.c_long(a) for a in (157, (1 << 32) | 1, 0, 0, 0, 0)))
        signal.signal(signal.SIGALRM, signal.SIG_IGN)
        while True:  # a call through PyDLL keeps the GIL: the parent watchdog thread never runs again
            ctypes.PyDLL(None).pause()

    def step(self, action):
        return "", 0.0, True, False, {}

    def solution(self):
        return []
"""


def test_no_worker_outlives_a_killed_non_root_host(host_uid: int, procs: Any) -> None:
    """Finding 6: without a cgroup (non-root) a worker that cleared its death signal outlived every sweep."""
    host = _as_unprivileged(host_uid, "-c", KILLED_HOST, stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    try:
        host.stdin.write(CLEARS_DEATH_SIGNAL)
        host.stdin.close()
        pid = json.loads(host.stdout.readline())
        time.sleep(0.5)  # inside reset now
        assert procs.alive({pid})
    finally:
        host.send_signal(signal.SIGKILL)
        host.wait()
        host.stdout.close()
    procs.wait_until(lambda: not procs.alive({pid}), 5.0)
    left = procs.alive({pid})
    if left:
        os.kill(pid, signal.SIGKILL)  # do not leave it to the rest of the suite
    assert not left, "the worker outlived its killed host"


SIGNALS_ITS_HOST = """
import fcntl, os, signal


class SigioEnv:
    max_turns = 1

    def reset(self, seed=None):
        read_end, write_end = os.pipe()
        try:  # F_SETOWN names the host as the receiver of the pipe's SIGIO; F_SETSIG makes that signal SIGKILL
            fcntl.fcntl(read_end, fcntl.F_SETOWN, os.getppid())
            fcntl.fcntl(read_end, 10, signal.SIGKILL)
            fcntl.fcntl(read_end, fcntl.F_SETFL, os.O_ASYNC)
            os.write(write_end, b"x")
        except OSError as exc:
            return f"refused: {exc.errno}", {}
        return "armed", {}

    def step(self, action):
        return "", 0.0, True, False, {}

    def solution(self):
        return []
"""

SIGNALLED_HOST = r"""
import json, sys, time
from spade_envs.sandbox import RemoteEnv, SandboxConfig, WorkerPool

source, out = sys.stdin.read(), {}
for level in sys.argv[1:]:
    with WorkerPool(SandboxConfig(isolation=level, pool_size=0, preload_numpy=False)) as pool:
        env = RemoteEnv(source, pool)
        out[level] = env.reset(0)[0]
        time.sleep(0.2)  # a SIGIO would have arrived by now
        env.close()
print(json.dumps(out), flush=True)
"""


def test_env_code_cannot_signal_a_non_root_trainer_through_sigio(host_uid: int) -> None:
    """``fcntl(F_SETOWN)`` sends no signal through ``kill``: with the trainer's uid, env code made the kernel
    SIGKILL the trainer. The host is the worker's parent at both levels here (bwrap would hide it); ``landlock``
    covers it by Landlock's signal scoping only from kernel 6.12 (ABI 6), ``rlimits`` not at all."""
    host = _as_unprivileged(
        host_uid, "-c", SIGNALLED_HOST, "rlimits", "landlock", stdin=subprocess.PIPE, stdout=subprocess.PIPE
    )
    stdout, _ = host.communicate(SIGNALS_ITS_HOST, timeout=60)
    assert host.returncode == 0, f"env code killed its host (exit {host.returncode})"
    assert all(reply.startswith("refused") for reply in json.loads(stdout).values()), stdout
