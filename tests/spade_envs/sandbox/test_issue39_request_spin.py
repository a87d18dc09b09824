"""A worker busy-polls for its next request only while requests follow its replies that fast (issue 39).

The spin saves the wake-up of a halted CPU in tight loops; it must not burn CPU for a worker whose requests come
far apart (an LLM's turns). Asserted on the worker's own CPU time (``/proc/<pid>/stat``), with a spin long enough
(20 ms) that spinning after every reply would be unmistakable.
"""

from __future__ import annotations

import os
import time

import pytest

from spade_envs.sandbox import SandboxConfig
from spade_envs.sandbox.process import Worker

ENV = """
class QuietEnv:
    max_turns = 1000

    def reset(self, seed=None):
        return "start", {}

    def step(self, action):
        return "ok", 0.0, False, False, {}

    def solution(self):
        return []
"""


def _cpu_s(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as stat:
        fields = stat.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


@pytest.mark.parametrize("spin_us", [0, 20_000])
def test_a_worker_whose_requests_come_slowly_does_not_spin_after_every_reply(spin_us):
    config = SandboxConfig(isolation="landlock", pool_size=0, preload_numpy=False, request_spin_us=spin_us,
                           reply_spin_us=0)  # fmt: skip
    worker = Worker(config, "landlock")  # the host's own child: its pid is the interpreter's
    try:
        worker.call("init", source=ENV)
        worker.call("reset", seed=0)
        before = _cpu_s(worker.proc.pid)
        for _ in range(40):
            time.sleep(0.06)  # 60 ms between requests: 3x the spin
            assert worker.call("step", action="x")[0] == "ok"
        spent = _cpu_s(worker.proc.pid) - before
        # spinning after every reply: 40 x 20 ms = 0.8 s; adaptive: the first reply and one in 9 after, ~0.1 s
        assert spent < 0.4, f"the worker spent {spent:.2f} s of CPU waiting for 40 slow requests"
    finally:
        worker.kill()


def test_a_spinning_worker_still_answers_every_request_in_a_tight_loop():
    config = SandboxConfig(isolation="landlock", pool_size=0, preload_numpy=False, request_spin_us=20_000)
    worker = Worker(config, "landlock")
    try:
        worker.call("init", source=ENV)
        worker.call("reset", seed=0)
        assert [worker.call("step", action="x")[0] for _ in range(500)] == ["ok"] * 500
    finally:
        worker.kill()
