"""Reaping workers: the host adopts the orphans of its workers and reaps them, and waits for a killed one to exit.

After a SIGKILL of the outer bubblewrap the inner one is re-parented; without a subreaper nobody would reap it.
"""

from __future__ import annotations

import ctypes
import os
import select
from pathlib import Path

__all__ = ["await_exit", "become_subreaper", "reap_orphans"]


def become_subreaper() -> None:
    """Make this process adopt orphans of its workers (bubblewrap's inner processes) so they can be reaped."""
    ctypes.CDLL(None, use_errno=True).prctl(36, 1, 0, 0, 0)  # PR_SET_CHILD_SUBREAPER


def reap_orphans() -> int:
    """Reap zombie children that no ``Popen`` owns: worker processes re-parented to us after a kill."""
    reaped = 0
    for child in Path(f"/proc/{os.getpid()}/task").glob("*/children"):
        try:
            children = child.read_text().split()
        except OSError:  # the thread ended after the glob listed it
            continue
        for pid in children:
            try:
                stat = Path(f"/proc/{pid}/stat").read_text()
            except OSError:
                continue
            name, state = stat[stat.index("(") + 1 : stat.rindex(")")], stat[stat.rindex(")") + 2]
            if state == "Z" and (name == "bwrap" or name.startswith("python")):
                try:
                    reaped += os.waitpid(int(pid), os.WNOHANG)[0] != 0
                except ChildProcessError:
                    pass
    return reaped


def await_exit(pid: int, timeout: float) -> None:
    """Sleep until ``pid`` exits (a pidfd turns readable), at most ``timeout`` s: no polling loop with sleeps."""
    try:
        fd = os.pidfd_open(pid)
    except (AttributeError, OSError):
        return
    try:
        poller = select.poll()
        poller.register(fd, select.POLLIN)
        poller.poll(int(timeout * 1000))
    finally:
        os.close(fd)
