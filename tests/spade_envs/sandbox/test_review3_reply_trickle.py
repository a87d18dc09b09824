"""Replies the worker's env code trickles into its reply pipe (issue 37, review 3, finding 7).

Env code owns the worker's end of the reply pipe. It can put it in packet mode (``fcntl(O_DIRECT)``), so that every
host ``read()`` returns one of its writes, and keep data always ready: the host's reply spin then returned
"readable" forever without looking at the clock, and every read copied and rescanned the whole buffer (host CPU
grew with the square of the reply). Each test runs at ``bwrap`` and ``landlock``; one runs the trickle from a host
started as an unprivileged uid. Every assertion is about what the host sees: the call's error, its wall time and
the host's own CPU time.
"""

from __future__ import annotations

import json
import os
import resource
import shutil
import subprocess
import sys
import sysconfig
import time
from pathlib import Path
from typing import Any

import pytest

from spade_envs.sandbox import EnvTimeout, ProtocolViolation, RemoteEnv, SandboxConfig, SandboxError, WorkerPool
from spade_envs.sandbox.hardening import world_readable

LEVELS = ("bwrap", "landlock")
ROOT = Path(__file__).resolve().parents[3]

#: The reply pipe's write end, found the way env code finds it (the worker's server object holds it).
_PIPE = """
import fcntl, gc, json, os, signal, sys, time


def reply_pipe(packets):
    signal.signal(signal.SIGALRM, signal.SIG_IGN)  # the worker's soft alarm: only the host's deadline is left
    fd = next(o for o in gc.get_objects() if type(o).__name__ == "_Server").wfd
    try:
        fcntl.fcntl(fd, 1031, 1 << 20)  # F_SETPIPE_SZ: 256 packets may queue
    except OSError:
        pass
    if packets:  # packet mode: every host read() returns one write
        fcntl.fcntl(fd, fcntl.F_SETFL, fcntl.fcntl(fd, fcntl.F_GETFL) | os.O_DIRECT)
    return fd
"""

TRICKLE = (
    _PIPE
    + '''

class TrickleEnv:
    """A 64 KiB prefix, then one byte per host read(), forever; ``spin`` writes without blocking."""

    max_turns = 1

    def reset(self, seed=None):
        return "ready", {}

    def step(self, action):
        fd = reply_pipe(packets=False)
        data = b'{"seq": 2, "ok": true, "result": ["' + b"x" * (64 << 10)
        while data:
            data = data[os.write(fd, data):]
        fd = reply_pipe(packets=True)
        if action == "spin":
            os.set_blocking(fd, False)
        while True:
            try:
                os.write(fd, b"x")
            except BlockingIOError:
                pass

    def solution(self):
        return []
'''
)

STEADY = (
    _PIPE
    + '''

class SteadyEnv:
    """1280-byte pieces, one a millisecond, without a newline: data is ready at every spin, none is a trickle."""

    max_turns = 1

    def reset(self, seed=None):
        return "ready", {}

    def step(self, action):
        fd = reply_pipe(packets=True)
        os.write(fd, b'{"seq": 2, "ok": true, "result": ["')
        while True:
            os.write(fd, b"y" * 1280)
            time.sleep(0.001)

    def solution(self):
        return []
'''
)

PAGED = (
    _PIPE
    + '''

class PagedEnv:
    """A valid 4 MB reply, sent by the worker itself after the env put the pipe in packet mode (4 KiB per read)."""

    max_turns = 1

    def reset(self, seed=None):
        return "ready", {}

    def step(self, action):
        reply_pipe(packets=True)
        info = {f"k{i:02d}": chr(97 + i % 26) * 60000 for i in range(66)}
        return "paged", 1.0, True, False, info

    def solution(self):
        return []
'''
)


def _config(level: str, **overrides: Any) -> SandboxConfig:
    base = {"isolation": level, "pool_size": 0, "preload_numpy": False, "call_timeout_s": 2.0, "soft_timeout_s": 1.0,
            "max_response_bytes": 2 << 20, "memory_mb": 512}  # fmt: skip
    return SandboxConfig(**{**base, **overrides})


def _host_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def _timed_step(pool: WorkerPool, source: str, action: str) -> tuple[Any, float, float]:
    env = RemoteEnv(source, pool)
    try:
        env.reset(0)
        started, cpu = time.monotonic(), _host_cpu()
        try:
            outcome: Any = env.step(action)
        except SandboxError as exc:
            outcome = exc
        return outcome, time.monotonic() - started, _host_cpu() - cpu
    finally:
        env.close()


@pytest.mark.parametrize("level", LEVELS)
def test_reply_trickled_one_byte_per_read_ends_before_the_deadline(level: str, procs: Any) -> None:
    """The repro's trickle: refused once the reply's pieces average under what a worker writes, long before the
    deadline, at a few milliseconds of host CPU (before: the deadline or later, with the host spinning a core)."""
    with WorkerPool(_config(level)) as pool:
        assert pool.level == level
        for mode in ("block", "spin"):
            outcome, took, cpu = _timed_step(pool, TRICKLE, mode)
            assert isinstance(outcome, ProtocolViolation) and outcome.code == "trickled_reply", (mode, outcome)
            assert took < 1.0 and cpu < 0.5, (mode, took, cpu)
    procs.assert_no_workers_left()


@pytest.mark.parametrize("level", LEVELS)
def test_reply_spin_that_always_finds_data_still_ends_at_the_deadline(level: str, procs: Any) -> None:
    """A reply in pieces a worker could write, each inside the spin window: the spin itself never missed, so before
    the fix only the reply cap (about 2 s of pieces here) ended the call; now the 0.4 s deadline does."""
    config = _config(level, call_timeout_s=0.4, soft_timeout_s=0.2, reply_spin_us=20_000)
    with WorkerPool(config) as pool:
        outcome, took, _ = _timed_step(pool, STEADY, "go")
    assert isinstance(outcome, EnvTimeout) and outcome.code == "call_timeout", outcome
    assert took < 0.4 + 0.3, took
    procs.assert_no_workers_left()


@pytest.mark.parametrize("level", LEVELS)
def test_reply_in_many_pieces_is_read_in_linear_time(level: str) -> None:
    """A valid 4 MB reply in 1024 packets: assembled correctly, at a host CPU cost linear in its size (before: every
    read copied and rescanned the whole buffer, about 12 GB of copying and scanning for this reply)."""
    config = _config(level, max_response_bytes=5 << 20, max_episode_reply_bytes=5 << 20, memory_mb=1024)
    with WorkerPool(config) as pool:
        outcome, took, cpu = _timed_step(pool, PAGED, "go")
    assert not isinstance(outcome, SandboxError), outcome
    obs, reward, terminated, _, info = outcome
    assert (obs, reward, terminated, len(info)) == ("paged", 1.0, True, 66)
    assert info["k27"] == "b" * 60000
    assert cpu < 0.25, (took, cpu)  # decoding 4 MB of JSON is most of it (before: 0.7 s here)


def _interpreter() -> str | None:
    """This interpreter if any uid can run it, else the system's of the same version (same ABI as the venv)."""
    for candidate in (sys.executable, f"/usr/bin/python{sys.version_info.major}.{sys.version_info.minor}"):
        if os.path.exists(candidate) and world_readable(candidate):
            return candidate
    return None


def _unprivileged_host_why_not() -> str | None:
    if os.geteuid() != 0:
        return "the host already runs as a non-root uid: the tests above cover this case"
    if shutil.which("setpriv") is None:
        return "setpriv (util-linux) is not installed"
    if _interpreter() is None or not world_readable(sysconfig.get_path("purelib")):
        return "no interpreter of this version, or not its packages, is readable by an unprivileged uid"
    return None


NON_ROOT_HOST = r"""
import json, resource, sys, time
from spade_envs.sandbox import RemoteEnv, SandboxConfig, SandboxError, WorkerPool

level, source, out = sys.argv[1], sys.stdin.read(), {}
config = SandboxConfig(isolation=level, pool_size=0, preload_numpy=False, call_timeout_s=2.0, soft_timeout_s=1.0,
                       max_response_bytes=2 << 20, memory_mb=512)
with WorkerPool(config) as pool:
    env = RemoteEnv(source, pool)
    env.reset(0)
    started, cpu = time.monotonic(), sum(resource.getrusage(resource.RUSAGE_SELF)[:2])
    try:
        env.step("spin")
        out["code"] = "returned"
    except SandboxError as exc:
        out["code"] = exc.code
    out["took"], out["cpu"] = time.monotonic() - started, sum(resource.getrusage(resource.RUSAGE_SELF)[:2]) - cpu
    out["level"] = pool.level
    env.close()
print(json.dumps(out), flush=True)
"""


@pytest.mark.skipif(_unprivileged_host_why_not() is not None, reason=str(_unprivileged_host_why_not()))
@pytest.mark.parametrize("level", LEVELS)
def test_reply_trickle_from_a_non_root_host_ends_before_the_deadline(level: str) -> None:
    """The same trickle against a host started as an unprivileged uid (the review's worst case: 12.7 s at 1 s)."""
    from spade_envs.sandbox.uids import lease_uid

    lease = lease_uid()
    try:
        env = {"PYTHONPATH": f"{ROOT}{os.pathsep}{sysconfig.get_path('purelib')}", "PATH": "/usr/bin:/bin"}
        command = ["setpriv", f"--reuid={lease.uid}", f"--regid={lease.uid}", "--clear-groups", _interpreter() or "",
                   "-c", NON_ROOT_HOST, level]  # fmt: skip
        done = subprocess.run(command, input=TRICKLE, env=env, cwd="/", text=True, capture_output=True, timeout=60)
    finally:
        lease.release()
    assert done.returncode == 0, done.stderr[-2000:]
    out = json.loads(done.stdout)
    assert out["level"] == level and out["code"] == "trickled_reply", out
    assert out["took"] < 1.0 and out["cpu"] < 0.5, out
