"""Adversarial checks of the env workers' nice floor (``SandboxConfig.nice``, issue 39).

Env code written to escape the floor: lowering its nice through every interface (``setpriority`` on itself, its
process group and its user, ``os.nice``, ``sched_setscheduler``/``sched_setattr`` via ctypes, raising
``RLIMIT_NICE``/``RLIMIT_RTPRIO``), starting threads, processes and a new session, writing ``/proc/self/autogroup``;
pre-started pool workers; the config's bad values. What the floor buys against the host's threads depends on
the scheduler's autogroups (docs/sandbox.md, Known limits): measured once, not asserted here (CPU shares are timing).
"""

from __future__ import annotations

import json
import os
import time

import pytest
from test_issue39_worker_nice import usable_levels

from spade_envs.sandbox import RemoteEnv, SandboxConfig, WorkerPool
from spade_envs.sandbox.process import Worker

FLOOR = 15

PROBE_ENV = r"""
import ctypes, json, os, resource, subprocess, threading


def _try(f):
    try:
        f()
        return "ok"
    except Exception as exc:
        return type(exc).__name__


class ProbeEnv:
    max_turns = 10

    def reset(self, seed=None):
        r = {"main": os.getpriority(os.PRIO_PROCESS, 0)}
        seen = {}
        t = threading.Thread(target=lambda: seen.update(n=os.getpriority(os.PRIO_PROCESS, 0)))
        t.start()
        t.join()
        r["new_thread"] = seen["n"]
        r["threads"] = {t.name: os.getpriority(os.PRIO_PROCESS, t.native_id) for t in threading.enumerate()}
        r["self"] = _try(lambda: os.setpriority(os.PRIO_PROCESS, 0, 0))
        r["pid"] = _try(lambda: os.setpriority(os.PRIO_PROCESS, os.getpid(), 0))
        r["pgrp"] = _try(lambda: os.setpriority(os.PRIO_PGRP, 0, 0))
        r["user"] = _try(lambda: os.setpriority(os.PRIO_USER, 0, 0))
        r["os_nice"] = _try(lambda: os.nice(-5))
        r["rl_nice"] = list(resource.getrlimit(resource.RLIMIT_NICE))
        r["rl_rtprio"] = list(resource.getrlimit(resource.RLIMIT_RTPRIO))
        r["raise_rl_nice"] = _try(lambda: resource.setrlimit(resource.RLIMIT_NICE, (40, 40)))
        r["raise_rl_rtprio"] = _try(lambda: resource.setrlimit(resource.RLIMIT_RTPRIO, (99, 99)))
        r["prlimit_nice"] = _try(lambda: resource.prlimit(0, resource.RLIMIT_NICE, (40, 40)))
        libc = ctypes.CDLL(None, use_errno=True)

        class Param(ctypes.Structure):
            _fields_ = [("priority", ctypes.c_int)]

        ctypes.set_errno(0)
        r["sched_fifo"] = [libc.sched_setscheduler(0, 1, ctypes.byref(Param(1))), ctypes.get_errno()]

        class Attr(ctypes.Structure):
            _fields_ = [("size", ctypes.c_uint32), ("policy", ctypes.c_uint32), ("flags", ctypes.c_uint64),
                        ("nice", ctypes.c_int32), ("prio", ctypes.c_uint32), ("runtime", ctypes.c_uint64),
                        ("deadline", ctypes.c_uint64), ("period", ctypes.c_uint64)]

        ctypes.set_errno(0)
        attr = Attr(ctypes.sizeof(Attr), 0, 0, 0, 0, 0, 0, 0)  # SCHED_OTHER at nice 0
        r["sched_setattr"] = [libc.syscall(314, 0, ctypes.byref(attr), 0), ctypes.get_errno()]
        r["policy"] = os.sched_getscheduler(0)
        r["autogroup_write"] = _try(lambda: open("/proc/self/autogroup", "w").write("0"))
        r["setsid"] = _try(os.setsid)
        try:
            pid = os.fork()
            if pid == 0:
                os._exit(os.getpriority(os.PRIO_PROCESS, 0))
            r["fork"] = os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])
        except Exception as exc:
            r["fork"] = type(exc).__name__
        try:
            out = subprocess.run(["/bin/sh", "-c", "cut -d' ' -f19 /proc/self/stat"], capture_output=True, text=True)
            r["subprocess"] = int(out.stdout)
        except Exception as exc:
            r["subprocess"] = type(exc).__name__
        r["end"] = os.getpriority(os.PRIO_PROCESS, 0)
        return json.dumps(r), {}

    def step(self, action):
        return "ok", 0.0, True, False, {}

    def solution(self):
        return []
"""

NICE_ENV = """
import os

class NiceEnv:
    max_turns = 10

    def reset(self, seed=None):
        return str(os.getpriority(os.PRIO_PROCESS, 0)), {}

    def step(self, action):
        return "ok", 0.0, True, False, {}

    def solution(self):
        return []
"""


LEVELS = usable_levels()


def _reset(level: str, source: str, **config: object) -> str:
    cfg = {"isolation": level, "pool_size": 0, "preload_numpy": False, "nice": FLOOR, **config}
    worker = Worker(SandboxConfig(**cfg), level)
    try:
        worker.call("init", source=source)
        return worker.call("reset", seed=0)[0]
    finally:
        worker.kill()


@pytest.mark.parametrize("level", LEVELS)
def test_env_code_cannot_get_below_the_floor_by_any_interface(level):
    assert os.getpriority(os.PRIO_PROCESS, 0) < FLOOR
    r = json.loads(_reset(level, PROBE_ENV))
    assert r["main"] == FLOOR
    assert r["new_thread"] == FLOOR
    assert set(r["threads"].values()) == {FLOOR}  # the worker's own watchdog thread too
    for key in ("self", "pid", "pgrp", "user", "os_nice", "raise_rl_nice", "raise_rl_rtprio", "prlimit_nice"):
        assert r[key] != "ok", key
        assert r[key] in ("PermissionError", "ValueError"), key
    assert r["rl_nice"] == [0, 0] or r["rl_nice"][1] <= 20 - FLOOR  # no rlimit allowing nice below the floor
    assert r["rl_rtprio"][0] == 0 and r["rl_rtprio"][1] == 0
    assert r["sched_fifo"] == [-1, 1]  # EPERM
    assert r["sched_setattr"][0] == -1 and r["sched_setattr"][1] in (1, 38)  # EPERM (or ENOSYS: seccomp)
    assert r["policy"] == 0  # still SCHED_OTHER
    assert r["autogroup_write"] != "ok"
    assert r["setsid"] != "ok"
    assert r["fork"] == FLOOR or r["fork"] in ("PermissionError", "BlockingIOError", "OSError")
    assert r["subprocess"] == FLOOR or isinstance(r["subprocess"], str)
    assert r["end"] == FLOOR


@pytest.mark.parametrize("level", LEVELS)
def test_a_floor_above_the_spawners_nice_is_not_lowered_to_it(level):
    assert int(_reset(level, NICE_ENV, nice=FLOOR)) == FLOOR
    assert int(_reset(level, NICE_ENV, nice=19)) == 19
    assert int(_reset(level, NICE_ENV, nice=1)) == max(1, os.getpriority(os.PRIO_PROCESS, 0))


@pytest.mark.parametrize("level", LEVELS)
def test_prestarted_pool_workers_get_the_floor(level):
    pool = WorkerPool(SandboxConfig(isolation=level, pool_size=2, nice=FLOOR))
    try:
        deadline = time.monotonic() + 60
        while pool.ready_count < 2 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert pool.ready_count == 2  # the envs below get pre-started workers
        envs = [RemoteEnv(NICE_ENV, pool) for _ in range(2)]
        try:
            assert [env.reset(seed=0)[0] for env in envs] == [str(FLOOR)] * 2
        finally:
            for env in envs:
                env.close()
        probe = RemoteEnv(PROBE_ENV, pool)  # a refilled worker, probed like a fresh one
        try:
            r = json.loads(probe.reset(seed=0)[0])
        finally:
            probe.close()
        assert r["main"] == r["new_thread"] == r["end"] == FLOOR
        assert set(r["threads"].values()) == {FLOOR}
    finally:
        pool.shutdown()


def test_config_accepts_the_range_and_refuses_outside_it():
    assert [SandboxConfig(nice=n).nice for n in (0, 15, 19)] == [0, 15, 19]
    for bad in (-1, -20, 20, 40):
        with pytest.raises(ValueError, match="nice must be a whole number within 0-19"):
            SandboxConfig(nice=bad)
    for bad in ("15", None, 15.0, 15.5, True):  # a YAML `15.0` or `yes` would have killed every worker at start
        with pytest.raises(ValueError, match="nice must be a whole number within 0-19"):
            SandboxConfig(nice=bad)
