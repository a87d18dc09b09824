"""Adversarial checks of the worker session's CPU weight (``autogroup.py``, issue 39).

Env code that tries to leave the weighed autogroup: writing any ``/proc/*/autogroup`` (its own by several paths,
its parent's, every one it can see), a new session or process group, a raw ``clone`` child; and the host helper
given bad arguments, which must answer ``False`` and never raise.
"""

from __future__ import annotations

import json
import os

import pytest
from test_issue39_worker_nice import usable_levels

from spade_envs.sandbox import SandboxConfig
from spade_envs.sandbox.autogroup import weigh_session
from spade_envs.sandbox.process import Worker

FLOOR = 15
LEVELS = [level for level in usable_levels() if level != "none"]

ESCAPE_ENV = r"""
import ctypes, glob, json, os


def _write(path, value="0"):
    try:
        with open(path, "w") as f:
            f.write(value)
        return "ok"
    except Exception as exc:
        return type(exc).__name__


class EscapeEnv:
    max_turns = 3

    def reset(self, seed=None):
        r = {}
        paths = ["/proc/self/autogroup", f"/proc/{os.getpid()}/autogroup", "/proc/thread-self/../../autogroup",
                 "/proc/1/autogroup", f"/proc/{os.getppid()}/autogroup"]
        for path in paths:
            r[path] = _write(path)
        r["others"] = [p for p in glob.glob("/proc/[0-9]*/autogroup")[:500] if _write(p, "19") == "ok"]
        try:
            fd = os.open("/proc/self", os.O_RDONLY | os.O_DIRECTORY)
            os.write(os.open("autogroup", os.O_WRONLY, dir_fd=fd), b"0")
            r["openat"] = "ok"
        except Exception as exc:
            r["openat"] = type(exc).__name__
        libc = ctypes.CDLL(None, use_errno=True)
        r["setsid"] = libc.syscall(112)
        r["setpgid"] = libc.syscall(109, 0, 0)
        child = libc.syscall(56, 17, 0, 0, 0, 0)  # clone(SIGCHLD): a process that could then setsid
        if child == 0:
            libc.syscall(112)
            libc.syscall(60, 0)
        r["clone"] = child
        r["nice"] = os.getpriority(os.PRIO_PROCESS, 0)
        return json.dumps(r), {}

    def step(self, action):
        return "ok", 0.0, True, False, {}

    def solution(self):
        return []
"""


def _autogroup(pid: int) -> str:
    with open(f"/proc/{pid}/autogroup") as f:
        return f.read().strip()


@pytest.mark.skipif(not os.path.exists("/proc/self/autogroup"), reason="the kernel has no autogroups")
@pytest.mark.parametrize("level", LEVELS)
def test_env_code_cannot_leave_or_lighten_the_weighed_session(level):
    worker = Worker(SandboxConfig(isolation=level, pool_size=0, preload_numpy=False, nice=FLOOR), level)
    try:
        before = _autogroup(worker.proc.pid)
        worker.call("init", source=ESCAPE_ENV)
        r = json.loads(worker.call("reset", seed=0)[0])
        after = _autogroup(worker.proc.pid)
    finally:
        worker.kill()
    for key, value in r.items():
        if key.startswith("/proc/") or key == "openat":
            assert value != "ok", key
    assert r["others"] == []
    assert r["setsid"] == -1 and r["setpgid"] == -1 and r["clone"] == -1
    assert r["nice"] == FLOOR
    assert after == before
    if os.geteuid() == 0:  # root host: the kernel's rate limit never refuses the host's write
        assert before.endswith(f"nice {FLOOR}")


@pytest.mark.parametrize(("pid", "nice"), [(0, FLOOR), (-1, FLOOR), (2**40, FLOOR), (2**31 - 1, FLOOR), ("self", 100)])
def test_weigh_session_answers_false_and_never_raises(pid, nice):
    pid = os.getpid() if pid == "self" else pid  # resolved here: xdist workers must collect the same ids
    mine = _autogroup(os.getpid()) if os.path.exists("/proc/self/autogroup") else None
    assert weigh_session(pid, nice) is False
    if mine is not None:
        assert _autogroup(os.getpid()) == mine
