"""A CPU run's Ray workers compute at their raylet's priority, not at Ray's nice 15 (issue 39).

Ray starts every worker at nice 15 (``RAY_worker_niceness``) so that its raylet and GCS stay responsive next to
GPU jobs' busy CPU threads. On a CPU run the workers are the training itself: the trainer's FSDP worker runs the
update with an OpenMP team, and at nice 15 a team thread gets ~3% of a CPU next to any nice-0 thread there (Linux's
weights 36 vs 1024), so one short burst of any other process (a driver polling its metrics, the dashboard, a
monitor) holds the whole team at the next barrier. Linux nice is per thread and a new thread inherits its
creator's, so the thread that imports verl (the plugin runs then) and every thread it starts afterwards (its OpenMP
team included) get the priority set here. The target is the parent's (the raylet's) nice, not 0: a run started
under ``nice`` keeps the user's choice. Lowering a nice value needs ``CAP_SYS_NICE``; without it the worker keeps
Ray's and logs so once.
"""

from __future__ import annotations

import logging
import os
import sys
from pathlib import Path

__all__ = ["is_ray_worker_process", "leave_ray_niceness"]

logger = logging.getLogger(__name__)

#: Ray's worker entry point (``ray/_private/workers/default_worker.py``): what ``sys.argv[0]`` is in a Ray worker
RAY_WORKER_SCRIPT = "default_worker.py"


def is_ray_worker_process() -> bool:
    """Whether this process is a Ray worker (an actor's or a task's), not a driver or a plain process."""
    return bool(sys.argv) and Path(sys.argv[0]).name == RAY_WORKER_SCRIPT


def leave_ray_niceness() -> int | None:
    """Lower the calling thread's nice to its parent process's, where it is higher; the new value, or None.

    None: nothing to do (not higher than the parent's), the parent is gone, or the lowering was refused (logged).
    """
    mine = os.getpriority(os.PRIO_PROCESS, 0)  # PRIO_PROCESS with 0 is the calling thread on Linux
    try:
        parent = os.getpriority(os.PRIO_PROCESS, os.getppid())  # the parent's main thread
    except OSError:
        return None
    if mine <= parent:
        return None
    try:
        os.setpriority(os.PRIO_PROCESS, 0, parent)
    except PermissionError:
        logger.warning("cpu backend: this Ray worker keeps nice %d (lowering it needs CAP_SYS_NICE)", mine)
        return None
    return parent
