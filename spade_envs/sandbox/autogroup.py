"""A worker's session weighed at its nice floor, so that the floor holds against the host's other processes.

Every worker starts in a session of its own (it is killed as a group). With ``kernel.sched_autogroup_enabled=1`` and
the job in the root cpu cgroup, Linux first shares CPU between sessions' autogroups, each at the autogroup's own nice
(0), and only then between the threads of one autogroup by their nice. So a worker at nice 15 still took half a CPU
next to one nice-0 host thread. The host sets the new session's autogroup nice to the floor right after the start,
before any env code arrives; lowering it again needs ``CAP_SYS_NICE``, which env code never has, and seccomp or the
filesystem boundary refuses env code the write anyway (``test_issue39_nice_adversary.py``).

Without ``CAP_SYS_ADMIN`` the kernel accepts one such write per 100 ms on the whole machine, so on a non-root host
most starts find it refused; the floor then holds only within the worker's own session (docs/sandbox.md, Known
limits). Where the kernel has no autogroups the file is absent and the nice alone decides.
"""

from __future__ import annotations

import errno
import logging

__all__ = ["weigh_session"]

log = logging.getLogger(__name__)
_reported: set[int] = set()  # errnos already logged by this process


def weigh_session(pid: int, nice: int) -> bool:
    """Set the autogroup of ``pid``'s session (the host's own child) to ``nice``; whether the kernel took it."""
    try:
        with open(f"/proc/{pid}/autogroup", "w") as autogroup:
            autogroup.write(str(nice))
        return True
    except OSError as exc:
        if exc.errno != errno.ENOENT and exc.errno not in _reported:  # ENOENT: no autogroups, nothing to weigh
            _reported.add(exc.errno)
            log.info("spade sandbox: a worker's session kept the default CPU weight (%s); its nice %d counts only "
                     "within that session", exc.strerror, nice)  # fmt: skip
        return False
