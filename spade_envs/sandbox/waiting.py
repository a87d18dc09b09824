"""How the host waits for one worker's reply: with the worker on the caller's CPU, spinning, or asleep in ``poll``.

A step's fixed cost on a VM is mostly two wake-ups. Across CPUs each is an inter-processor interrupt to a halted
vCPU (25-30 us each on a quiet 2-vCPU VM); with the worker pinned to the caller's CPU (``affinity.py``) both stay on
one CPU and cost a context switch each. Which is faster depends on the machine's load: a pinned worker waits behind
whatever else runs on that CPU, while a spin catches a fast reply from the other CPU without sleeping. So each
worker keeps a moving average of its reply wait per way (pinned; not pinned, spinning while its replies come
within ``reply_spin_us``) and takes the faster, trying the other every ``PROBE_EVERY``-th call.
"""

from __future__ import annotations

import os
import select
import time

from spade_envs.sandbox.affinity import CpuFollower

__all__ = ["PROBE_EVERY", "RELEASE_AFTER_MS", "SPIN_PROBE_EVERY", "ReplyWait"]

#: Every this-many-th call waits the other way (pinned or not), so each way's average stays current.
PROBE_EVERY = 16
#: A worker whose replies stopped coming within ``reply_spin_us`` spins again on every this-many-th unpinned call.
SPIN_PROBE_EVERY = 8
#: A pinned worker that has not answered within this many ms gets its own CPUs back for the rest of the call, so
#: a long step can move to an idle CPU.
RELEASE_AFTER_MS = 1


class ReplyWait:
    """The reply pipe's polls and the waiting policy of one worker (not thread-safe: one call at a time).

    Per call: :meth:`unsolicited` before the request (data nobody asked for), :meth:`before_request` (pin or
    not), :meth:`readable` for every read, :meth:`replied` once the reply is in.
    """

    def __init__(self, resp_r: int, spin_us: int) -> None:
        self.resp_r, self.spin_us = resp_r, spin_us
        self.poller = select.poll()  # not select.select: that fails on descriptors >= 1024
        self.poller.register(resp_r, select.POLLIN)
        self._idle = select.poll()  # before a request: unsolicited data, and a pidfd of a worker not our child
        self._idle.register(resp_r, select.POLLIN)
        self.follower: CpuFollower | None = None
        self.pinned = False  # this call's worker is pinned to the caller's CPU
        self._way = 0  # how this call started waiting: 0 not pinned, 1 pinned
        self.released = False  # this call's pin was lifted (no reply within RELEASE_AFTER_MS)
        self._alive = True  # no pidfd event before this call
        self._wait_us: list[float | None] = [None, None]  # moving average of the reply wait: [not pinned, pinned]
        self._calls = 0
        self._started = 0.0
        self._reply_us = 0.0  # recent spun reply wait (moving average): spin only for fast repliers
        self._unspun = 0  # unpinned calls since the last spin

    def follow(self, follower: CpuFollower) -> None:
        """Let calls pin the worker (``follower.pidfd``, if any, joins the idle poll: a dead pid is never pinned)."""
        if follower.pidfd is not None:
            self._idle.register(follower.pidfd, select.POLLIN)
        self.follower = follower

    def unsolicited(self) -> bool:
        """Whether the worker sent data before this request (one non-blocking poll, which also sees a pidfd)."""
        events = self._idle.poll(0)
        self._alive = not events
        return any(fd == self.resp_r for fd, _ in events)

    def before_request(self, pin: bool = True) -> None:
        """Pin the worker to this thread's CPU, or give it its CPUs back, whichever has been faster for it.

        ``pin=False`` (a batch of calls from one thread): not pinned, and this call's wait is not counted.
        """
        follower = self.follower
        self._started = time.perf_counter()
        if follower is None or not follower.enabled or not pin:
            self.pinned = False
            if follower is not None and follower.enabled and not pin:
                follower.release()
                self._way = -1
            return
        self._calls += 1
        free, pinned = self._wait_us
        if free is None or pinned is None:
            want = pinned is None
        else:
            want = pinned <= free
        if self._calls % PROBE_EVERY == 0:
            want = not want
        self.pinned = want and self._alive and follower.follow()
        if not self.pinned:
            follower.release()
        self._way = int(self.pinned)
        self.released = False

    def replied(self) -> None:
        """Count this call's wait (request written until the reply was readable) for the way it waited."""
        if self.follower is None or self._way < 0:
            return
        us = 1e6 * (time.perf_counter() - self._started)
        old = self._wait_us[self._way]
        self._wait_us[self._way] = us if old is None else 0.75 * old + 0.25 * us

    def readable(self, deadline: float) -> bool:
        """Wait until the reply pipe is readable or ``deadline`` (monotonic) passes; whether it is.

        Pinned: sleep in ``poll`` (the worker needs this CPU), and after ``RELEASE_AFTER_MS`` let it move. Not
        pinned: busy-poll for up to ``reply_spin_us`` while this worker's replies come that fast (only spun waits
        update that estimate: a sleep's wake-up latency would keep it above the spin for good; a worker that
        stopped spinning tries again every ``SPIN_PROBE_EVERY`` calls), else sleep in ``poll``.
        """
        if self.pinned:
            left = deadline - time.monotonic()
            if left > 0 and self.poller.poll(min(RELEASE_AFTER_MS, max(1, int(left * 1000)))):
                return True
            self.pinned, self.released = False, True
            self.follower.release()  # type: ignore[union-attr]
        elif self.spin_us and (self._reply_us < self.spin_us or self._unspun >= SPIN_PROBE_EVERY):
            self._unspun = 0
            started = time.perf_counter()
            spin_until = started + self.spin_us / 1e6
            while time.perf_counter() < spin_until:
                if self.poller.poll(0):
                    self._reply_us = 0.5 * self._reply_us + 0.5e6 * (time.perf_counter() - started)
                    return True
                os.sched_yield()
            self._reply_us = 0.5 * self._reply_us + self.spin_us  # missed: count it as twice the spin
        else:
            self._unspun += 1
        left = deadline - time.monotonic()
        return left > 0 and bool(self.poller.poll(max(1, int(left * 1000))))
