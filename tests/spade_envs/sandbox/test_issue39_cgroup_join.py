"""A worker joins its pids cgroup without the kernel's global lock (issue 39), and the cap still binds all of it.

On cgroup v1 the launcher's shell moves its one thread through ``tasks`` (``echo 0``) instead of moving the process
through ``cgroup.procs``, whose global threadgroup lock cost 10-20 ms per worker start. What must still hold: every
process of the worker's tree is in the cgroup from its start, and env code's threads stop at ``processes``.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from spade_envs.sandbox import SandboxConfig
from spade_envs.sandbox.cgroups import PidsCgroup, pids_root
from spade_envs.sandbox.process import Worker

pytestmark = pytest.mark.skipif(pids_root() is None, reason="no writable pids controller on this host")

THREADS_ENV = """
import _thread


class ThreadEnv:
    max_turns = 10

    def reset(self, seed=None):
        return "start", {}

    def step(self, action):
        hold, started = _thread.allocate_lock(), 0
        hold.acquire()
        try:
            while started < 500:
                _thread.start_new_thread(hold.acquire, ())
                started += 1
        except BaseException as exc:
            return f"{started} {type(exc).__name__}", 0.0, False, False, {}
        return f"{started} none", 0.0, False, False, {}

    def solution(self):
        return []
"""


def _tree(pid: int) -> set[int]:
    found, todo = set(), [pid]
    while todo:
        p = todo.pop()
        found.add(p)
        for children in Path(f"/proc/{p}/task").glob("*/children"):
            todo += [int(c) for c in children.read_text().split()]
    return found


def test_the_launcher_joins_through_tasks_on_cgroup_v1():
    cgroup = PidsCgroup(pids_root(), 8)
    try:
        cmd = cgroup.wrap(["/bin/true"])
        v1 = os.path.exists(os.path.join(cgroup.path, "tasks"))
        assert cmd[3] == os.path.join(cgroup.path, "tasks" if v1 else "cgroup.procs")
        assert cmd[2].startswith("echo 0 >" if v1 else "echo $$ >")
    finally:
        cgroup.remove()


@pytest.mark.parametrize("level", ["bwrap", "landlock"])
def test_the_whole_worker_is_in_its_cgroup_and_its_threads_are_capped(level):
    config = SandboxConfig(isolation=level, pool_size=0, preload_numpy=False, processes=12)
    worker = Worker(config, level)
    try:
        assert worker._cgroup is not None
        members = {int(p) for p in Path(worker._cgroup.path, "cgroup.procs").read_text().split()}
        assert _tree(worker.proc.pid) <= members  # bwrap's processes and the interpreter, all counted
        worker.call("init", source=THREADS_ENV)
        worker.call("reset", seed=0)
        started, error = worker.call("step", action="go")[0].split()
        assert error != "none" and int(started) < 12  # the cap of 12 binds the threads env code starts
    finally:
        worker.kill()
