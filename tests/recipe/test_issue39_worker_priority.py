"""A CPU run's Ray workers leave Ray's nice 15 for their raylet's (issue 39).

The trainer's update ran its OpenMP team at Ray's nice 15, where a thread gets ~3% of a CPU next to any nice-0
thread. Asserted with real threads and processes: the calling thread and the threads it starts afterwards, a run
started under ``nice`` (the user's value is kept, not 0), a host without ``CAP_SYS_NICE`` (refused, logged, Ray's value
kept), and a real Ray worker of a cluster of this test's own, where importing verl loads the plugin.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from recipe.spade.cpu.worker_priority import is_ray_worker_process, leave_ray_niceness

ROOT = Path(__file__).resolve().parents[2]
#: lowering a nice value needs CAP_SYS_NICE: a root host has it, a non-root host's workers do not (tested below)
needs_cap_sys_nice = pytest.mark.skipif(os.geteuid() != 0, reason="lowering a nice value needs CAP_SYS_NICE (root)")


def _nice() -> int:
    return os.getpriority(os.PRIO_PROCESS, 0)  # the calling thread's, on Linux


def _in_thread(body):
    """Run ``body`` on a fresh thread (niceness set there never leaks into the test's own thread)."""
    out: dict = {}
    t = threading.Thread(target=lambda: out.update(result=body()))
    t.start()
    t.join()
    return out["result"]


@needs_cap_sys_nice
def test_a_niced_thread_and_the_threads_it_starts_get_the_parents_priority():
    parent, mine = os.getpriority(os.PRIO_PROCESS, os.getppid()), _nice()
    if parent >= 15:
        pytest.skip(f"the test's parent runs at nice {parent}: nothing for a nice-15 thread to leave")

    def body():
        os.setpriority(os.PRIO_PROCESS, 0, 15)  # as Ray starts a worker
        result = leave_ray_niceness()
        child: dict = {}
        t = threading.Thread(target=lambda: child.update(nice=_nice()))  # e.g. an OpenMP team member
        t.start()
        t.join()
        return result, _nice(), child["nice"]

    assert _in_thread(body) == (parent, parent, parent)
    assert _nice() == mine


def test_a_thread_not_above_its_parent_is_left_alone():
    def body():
        os.setpriority(os.PRIO_PROCESS, 0, os.getpriority(os.PRIO_PROCESS, os.getppid()))  # raising needs no privilege
        return leave_ray_niceness(), _nice()

    if _nice() > os.getpriority(os.PRIO_PROCESS, os.getppid()):
        pytest.skip("the test runs above its parent's nice and may not lower it")
    assert _in_thread(body) == (None, os.getpriority(os.PRIO_PROCESS, os.getppid()))


_CHILD = """
import json, os, sys
sys.path.insert(0, {root!r})
from recipe.spade.cpu.worker_priority import leave_ray_niceness
os.setpriority(os.PRIO_PROCESS, 0, 15)
print(json.dumps([leave_ray_niceness(), os.getpriority(os.PRIO_PROCESS, 0)]))
"""


def _child(prefix: list[str], **kwargs) -> subprocess.CompletedProcess:
    return subprocess.run([*prefix, sys.executable, "-c", _CHILD.format(root=str(ROOT))], capture_output=True,
                          text=True, timeout=60, check=True, **kwargs)  # fmt: skip


@needs_cap_sys_nice
def test_a_run_started_under_nice_keeps_the_users_value():
    # the parent (here `nice -n 5 python`, in a run the raylet) is at 5: the worker goes to 5, not 0
    out = _child(["nice", "-n", "5", sys.executable, "-c",
                  "import subprocess, sys; sys.exit(subprocess.run(sys.argv[1:]).returncode)"])  # fmt: skip
    assert json.loads(out.stdout) == [5, 5]


def test_without_cap_sys_nice_the_worker_keeps_rays_value_and_says_so():
    # as root, the capability dropped from the bounding set: what a non-root host's worker (or a container without
    # it) has; a non-root host runs the child as it is
    drop = ["setpriv", "--bounding-set", "-sys_nice", "--inh-caps", "-sys_nice"] if os.geteuid() == 0 else []
    out = _child(drop)
    assert json.loads(out.stdout) == [None, 15]
    assert "keeps nice 15" in out.stderr and "CAP_SYS_NICE" in out.stderr


def test_a_plain_process_is_not_a_ray_worker():
    assert not is_ray_worker_process()


@needs_cap_sys_nice
def test_a_real_ray_worker_of_a_cpu_run_computes_at_nice_0_from_the_moment_it_imports_verl():
    import ray

    ray.init(address="local", num_cpus=1, include_dashboard=False, log_to_driver=False,
             runtime_env={"env_vars": {"VERL_PLATFORM": "cpu"}})  # fmt: skip
    try:

        @ray.remote
        def probe() -> tuple[int, bool, int, int]:
            before = os.getpriority(os.PRIO_PROCESS, 0)
            import verl  # noqa: F401  (loads the plugin through verl's entry point, as every verl worker does)

            from recipe.spade.cpu.worker_priority import is_ray_worker_process

            child: dict = {}
            t = threading.Thread(target=lambda: child.update(nice=os.getpriority(os.PRIO_PROCESS, 0)))
            t.start()
            t.join()
            return before, is_ray_worker_process(), os.getpriority(os.PRIO_PROCESS, 0), child["nice"]

        before, is_worker, after, child = ray.get(probe.remote(), timeout=120)
    finally:
        ray.shutdown()
    assert (before, is_worker, after, child) == (15, True, 0, 0)
