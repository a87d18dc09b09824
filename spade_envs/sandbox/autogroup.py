"""A worker's session weighed at its nice floor, so that the floor holds against the host's other processes.

Every worker starts in a session of its own (it is killed as a group). With ``kernel.sched_autogroup_enabled=1`` and
the job in the root cpu cgroup, Linux first shares CPU between sessions' autogroups, each at the autogroup's own nice
(0), and only then between the threads of one autogroup by their nice. So a worker at nice 15 still took half a CPU
next to one nice-0 host thread. The host sets the new session's autogroup nice to the floor right after the start,
before any env code arrives. The kernel lets whoever may write the file set 0 again (never below 0 without
``CAP_SYS_NICE``). On a root host env code cannot: the file is root's and the worker runs as a leased uid, Landlock
denies the write, and seccomp refuses a new session or a raw ``clone`` (``test_issue39_autogroup_adversary.py``).
Not tested: a non-root host at ``bwrap``, where the file may be the worker's own; at worst it returns to 0.

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
