"""The worker is woken on the CPU its caller waits on (issue 39): both wake-ups of a step stay on one CPU.

Each test runs at ``bwrap`` (the worker is the host's grandchild, found by its namespace pid) and ``landlock`` (the
host's own child). What is asserted is what env code itself sees (its own affinity, read inside ``step``) and what
the host's follower touches.
"""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import pytest

from spade_envs.sandbox import SandboxConfig, SandboxError, waiting
from spade_envs.sandbox.process import Worker

LEVELS = ("bwrap", "landlock")

#: ``step("fast")`` returns the CPUs the worker's main thread may run on now; ``step("slow")`` computes until it
#: may run on more than one (or 2 s pass) and returns them with the milliseconds it waited.
AFFINITY_ENV = """
import os, time


class AffinityEnv:
    max_turns = 100

    def reset(self, seed=None):
        return "start", {}

    def step(self, action):
        started = time.monotonic()
        cpus = os.sched_getaffinity(0)
        while action == "slow" and len(cpus) < 2 and time.monotonic() - started < 2.0:
            cpus = os.sched_getaffinity(0)
        waited_ms = round(1000 * (time.monotonic() - started))
        return ",".join(map(str, sorted(cpus))), 0.0, False, False, {"waited_ms": waited_ms}

    def solution(self):
        return []
"""


@pytest.fixture(params=LEVELS)
def worker(request):
    config = SandboxConfig(isolation=request.param, pool_size=0, preload_numpy=False, follow_caller_cpu=True)
    worker = Worker(config, request.param)
    try:
        worker.call("init", source=AFFINITY_ENV)
        worker.call("reset", seed=0)
        yield worker
    finally:
        worker.kill()


@pytest.fixture
def on_one_cpu():
    """Run the test's thread on one CPU (the last it may use), then give it its CPUs back."""
    before = os.sched_getaffinity(0)
    cpu = max(before)
    os.sched_setaffinity(0, {cpu})
    try:
        yield cpu
    finally:
        os.sched_setaffinity(0, before)


def test_a_fast_step_runs_on_the_callers_cpu(worker, on_one_cpu, monkeypatch):
    """A pinned call's worker runs on the caller's CPU; an unpinned one on its own CPUs. Each worker takes whichever
    way has been faster for it and tries the other every PROBE_EVERY-th call, so 20 steps hold at least one pinned
    (a pin lifted before the worker ran shows its own CPUs: RELEASE_AFTER_MS is raised so that a loaded machine,
    whose worker may wait past 1 ms for the CPU, still shows pinned steps)."""
    monkeypatch.setattr(waiting, "RELEASE_AFTER_MS", 2000)
    allowed = ",".join(map(str, sorted(worker._wait.follower.allowed)))
    seen = []
    for _ in range(20):
        obs, *_ = worker.call("step", action="fast")
        seen.append((worker._wait._way and not worker._wait.released, obs))
    assert all(obs == str(on_one_cpu) for pinned, obs in seen if pinned), seen
    assert all(obs in (allowed, str(on_one_cpu)) for _, obs in seen), seen
    assert any(pinned for pinned, _ in seen), seen  # before issue 39: never pinned, every CPU of the machine


def test_a_slow_step_gets_its_cpus_back(worker, on_one_cpu):
    """A worker still computing after RELEASE_AFTER_MS may move to an idle CPU: pinning serves only the wake-up."""
    allowed = worker._wait.follower.allowed  # the CPUs it started with (the host's, inherited)
    obs, _, _, _, info = worker.call("step", action="slow")
    assert {int(c) for c in obs.split(",")} == allowed, (obs, allowed)
    assert info["waited_ms"] < 1000 or len(allowed) == 1, info


def test_the_follower_pins_the_workers_own_process(worker):
    """The pinned pid is the python process serving the pipe (at bwrap: bubblewrap's grandchild, not bwrap)."""
    follower = worker._wait.follower
    assert follower is not None and follower.enabled
    status = Path(f"/proc/{follower.pid}/status").read_text()
    assert "\nName:\tpython" in status or status.startswith("Name:\tpython"), status[:200]
    ns_pids = next(line for line in status.splitlines() if line.startswith("NSpid:")).split()[1:]
    assert int(ns_pids[-1]) == worker.info["pid"]
    assert (follower.pidfd is not None) == (worker.level == "bwrap")  # not the host's child: held by a pidfd


def test_a_dead_workers_pid_is_never_pinned(worker):
    """Killed between calls (its pid free to be reused), the worker is not pinned: the call fails typed."""
    follower = worker._wait.follower
    pinned = []
    real_follow = follower.follow
    follower.follow = lambda: pinned.append(1) or real_follow()
    os.kill(follower.pid, signal.SIGKILL)
    deadline = time.monotonic() + 5
    while os.path.exists(f"/proc/{follower.pid}/status") and "\nState:\tZ" not in _status(follower.pid):
        assert time.monotonic() < deadline
        time.sleep(0.01)
    time.sleep(0.05)
    with pytest.raises(SandboxError):
        worker.call("step", action="fast")
    assert pinned == []


def _status(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return ""
