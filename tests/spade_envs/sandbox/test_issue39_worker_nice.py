"""Env workers run at ``SandboxConfig.nice`` at least, whatever the thread that starts them runs at (issue 39).

A CPU run's Ray workers now leave Ray's nice 15 for the raylet's (``recipe/spade/cpu/worker_priority.py``), and env
workers inherit their spawner thread's priority: without this floor, generated code that burns CPU would compete
with the trainer's threads as an equal. Asserted in real workers at every level this host has, root or not: what env
code reads of its own priority and of a thread it starts, and that it cannot lower it.
"""

from __future__ import annotations

import os

import pytest

from spade_envs.sandbox import SandboxConfig
from spade_envs.sandbox.pool import probe_isolation
from spade_envs.sandbox.process import Worker

ENV = """
import os, threading

class NiceEnv:
    max_turns = 10

    def reset(self, seed=None):
        seen = {}
        t = threading.Thread(target=lambda: seen.update(child=os.getpriority(os.PRIO_PROCESS, 0)))
        t.start()
        t.join()
        try:
            os.setpriority(os.PRIO_PROCESS, 0, 0)
            lowered = "lowered"
        except OSError:
            lowered = "refused"
        return f"{os.getpriority(os.PRIO_PROCESS, 0)} {seen['child']} {lowered}", {}

    def step(self, action):
        return "ok", 0.0, True, False, {}

    def solution(self):
        return []
"""


def usable_levels() -> list[str]:
    """The isolation levels whose workers start on this host."""
    usable = []
    for level in ("bwrap", "landlock", "rlimits"):
        try:
            probe_isolation(SandboxConfig(isolation=level))
        except Exception:  # noqa: BLE001  (a level this host cannot run)
            continue
        usable.append(level)
    return usable


@pytest.mark.parametrize("level", usable_levels())
def test_env_code_runs_at_the_configured_nice_and_cannot_lower_it(level):
    assert os.getpriority(os.PRIO_PROCESS, 0) < 15  # the test (and so the spawner) runs below the floor
    worker = Worker(SandboxConfig(isolation=level, pool_size=0, preload_numpy=False, nice=15), level)
    try:
        worker.call("init", source=ENV)
        observation = worker.call("reset", seed=0)[0]
    finally:
        worker.kill()
    assert observation == "15 15 refused"


def test_the_default_keeps_what_the_worker_inherits():
    level = usable_levels()[0]
    worker = Worker(SandboxConfig(isolation=level, pool_size=0, preload_numpy=False), level)
    try:
        worker.call("init", source=ENV)
        observation = worker.call("reset", seed=0)[0]
    finally:
        worker.kill()
    assert observation.split()[:2] == [str(os.getpriority(os.PRIO_PROCESS, 0))] * 2


@pytest.mark.parametrize("bad", [-1, 20])
def test_a_nice_outside_0_to_19_is_refused(bad):
    with pytest.raises(ValueError, match="nice must be a whole number within 0-19"):
        SandboxConfig(nice=bad)
