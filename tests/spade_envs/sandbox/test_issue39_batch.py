"""Many workers' calls from one thread (issue 39): ``call_many``/``step_all`` send every request, then read replies.

What must hold: results in call order and equal to one-at-a-time calls; the workers really run at the same time
(their step intervals, read on the system-wide monotonic clock inside the envs, overlap); every per-call check and
limit still applies to each call (a crash, a garbled or trickled reply, a timeout kill only that worker; its slot
holds the typed error); misuse (a worker twice, a second ``begin``) is refused. Both levels whose worker is the
host's child or grandchild run.
"""

from __future__ import annotations

import time

import pytest

from spade_envs.sandbox import (
    EnvCrashed,
    EnvRaised,
    EnvTimeout,
    ProtocolViolation,
    RemoteEnv,
    SandboxConfig,
    WorkerPool,
    call_many,
    step_all,
)
from spade_envs.sandbox.process import Worker

LEVELS = ("bwrap", "landlock")

#: ``step("sleep:S")`` sleeps S seconds; every step reports when it ran (monotonic, system-wide) and a count; the
#: other actions break the worker in one way each.
ENV = """
import fcntl, gc, os, signal, time


class BatchEnv:
    max_turns = 1000

    def reset(self, seed=None):
        self.seed, self.count = seed, 0
        return f"seed {seed}", {}

    def step(self, action):
        started = time.monotonic()
        self.count += 1
        if action.startswith("sleep:"):
            time.sleep(float(action[6:]))
        elif action == "raise":
            raise KeyError("boom")
        elif action == "crash":
            os._exit(9)
        elif action == "garble":
            os.write(reply_fd(), b"not json\\n")
            time.sleep(5)
        elif action == "trickle":  # packet mode: every host read() returns one 1-byte write (review 3)
            fd = reply_fd()
            fcntl.fcntl(fd, fcntl.F_SETFL, fcntl.fcntl(fd, fcntl.F_GETFL) | os.O_DIRECT)
            signal.signal(signal.SIGALRM, signal.SIG_IGN)
            while True:
                os.write(fd, b"x")
        return f"{self.seed}:{action}:{self.count}", 0.5, False, False, {"ran": [started, time.monotonic()]}

    def solution(self):
        return []


def reply_fd():  # the reply pipe's write end, found the way env code finds it
    return next(o for o in gc.get_objects() if type(o).__name__ == "_Server").wfd
"""


@pytest.fixture(params=LEVELS)
def pool(request):
    config = SandboxConfig(isolation=request.param, pool_size=0, preload_numpy=False)
    with WorkerPool(config) as pool:
        yield pool


def _envs(pool: WorkerPool, n: int) -> list[RemoteEnv]:
    envs = [RemoteEnv(ENV, pool) for _ in range(n)]
    for seed, env in enumerate(envs):
        env.reset(seed)
    return envs


def test_results_in_order_and_equal_to_one_at_a_time(pool):
    batched, alone = _envs(pool, 4), _envs(pool, 4)
    try:
        for turn in range(3):
            actions = [f"a{turn}{i}" for i in range(4)]
            together = step_all(batched, actions)
            each = [env.step(action) for env, action in zip(alone, actions)]
            strip = [(obs, reward, term, trunc) for obs, reward, term, trunc, _ in each]
            assert [(obs, reward, term, trunc) for obs, reward, term, trunc, _ in together] == strip
            assert [r[0] for r in together] == [f"{i}:a{turn}{i}:{turn + 1}" for i in range(4)]
    finally:
        for env in batched + alone:
            env.close()


def test_workers_run_at_the_same_time(pool):
    envs = _envs(pool, 3)
    try:
        results = step_all(envs, ["sleep:0.4"] * 3)
        spans = [r[4]["ran"] for r in results]
        assert max(start for start, _ in spans) < min(end for _, end in spans)  # all three slept together
    finally:
        for env in envs:
            env.close()


def test_a_failing_worker_fails_alone(pool):
    envs = _envs(pool, 6)
    try:
        results = step_all(envs, ["ok", "raise", "crash", "garble", "sleep:0.1", "trickle"])
        assert results[0][0] == "0:ok:1" and results[4][0] == "4:sleep:0.1:1"
        assert isinstance(results[5], ProtocolViolation) and results[5].code == "trickled_reply"
        assert isinstance(results[1], EnvRaised) and "KeyError" in str(results[1])
        assert isinstance(results[2], EnvCrashed)
        assert isinstance(results[3], ProtocolViolation) and results[3].code == "garbled_reply"
        assert not envs[1].worker.dead  # an env exception leaves the worker usable, as for one call
        assert envs[2].worker.dead and envs[3].worker.dead and envs[5].worker.dead
        assert envs[1].step("again")[0] == "1:again:2" and envs[0].step("again")[0] == "0:again:2"
    finally:
        for env in envs:
            env.close()


def test_a_slow_worker_times_out_alone(pool):
    envs = _envs(pool, 3)
    try:
        started = time.monotonic()
        results = call_many([(e.worker, "step", {"action": a}) for e, a in zip(envs, ["ok", "sleep:30", "ok"])],
                            timeout=1.0)  # fmt: skip
        took = time.monotonic() - started
        assert isinstance(results[1], EnvTimeout) and envs[1].worker.dead
        assert results[0][0] == "0:ok:1" and results[2][0] == "2:ok:1"
        assert took < 10  # killed at its deadline, not after its 30 s sleep
    finally:
        for env in envs:
            env.close()


def test_misuse_is_refused(pool):
    envs = _envs(pool, 2)
    try:
        with pytest.raises(ValueError, match="appears twice"):
            call_many([(envs[0].worker, "step", {"action": "x"}), (envs[0].worker, "step", {"action": "y"})])
        assert envs[0].step("after")[0] == "0:after:1"  # nothing was sent
        worker: Worker = envs[1].worker
        worker.begin("step", payload={"action": "x"})
        with pytest.raises(ProtocolViolation, match="pending"):
            worker.begin("step", payload={"action": "y"})
        assert worker.dead
        with pytest.raises(ValueError, match="2 envs but 1 actions"):
            step_all(envs, ["x"])
    finally:
        for env in envs:
            env.close()
