"""Env code against the calls that share one host thread (issue 39's adversary pass): ``dispatch.py``, ``call_many``.

Env code here wants to hold up, or fail, *other* episodes' calls that the same thread carries: by no longer reading
its request pipe while a long request is written, by closing its pipes and living on, by dying in the middle of a
reply the thread is reading piece by piece, by lying about its reply, or by having its fds closed and reused under a
call the thread still has pending. What must hold: every other call finishes well inside its own deadline with its
own result; the hostile call fails with its own typed error; nothing waits on a stale registration. Each attack
runs at both levels whose worker is the host's child or grandchild.
"""

from __future__ import annotations

import asyncio
import os
import time
from concurrent.futures import Future, wait

import pytest

from spade_envs.sandbox import (
    AsyncSandboxEnv,
    EnvCrashed,
    EnvTimeout,
    OutputTooLarge,
    ProtocolViolation,
    RemoteEnv,
    SandboxConfig,
    WorkerPool,
    call_many,
)
from spade_envs.sandbox.process import Worker

LEVELS = ("bwrap", "landlock")

#: Each action is one attack on the host thread; ``big:S`` is an honest step that answers a ~120 KB reply (more
#: than a pipe holds, so the host reads it in pieces) after S seconds. Replies the env forges are for its first
#: step: sequence number 3 (init 1, reset 2).
ENV = """
import gc, os, signal, threading, time


def server():  # the worker's server object, found the way env code finds it
    return next(o for o in gc.get_objects() if type(o).__name__ == "_Server")


class Deaf:
    def readline(self, limit=-1):
        time.sleep(60)
        return b""


def forge(*pieces, then="sleep"):
    signal.signal(signal.SIGALRM, signal.SIG_IGN)  # only the host's deadline is left
    fd = server().wfd
    for piece in pieces:
        os.write(fd, piece)
        time.sleep(0.05)
    if then == "exit":
        os._exit(7)
    if then == "sigkill":
        os.kill(os.getpid(), signal.SIGKILL)
    time.sleep(30)


REPLY = b'{"seq":3,"ok":true,"result":["' + b"x" * 6000 + b'",0.0,false,false,{}]}\\n'


class AdversaryEnv:
    max_turns = 1000

    def reset(self, seed=None):
        self.seed = seed
        return "ready", {}

    def step(self, action):
        if action == "deaf":  # keep the reader alive (its collection would close the pipe), read no more
            s = server()
            s.kept, s.reader = s.reader, Deaf()
        elif action.startswith("big:"):
            time.sleep(float(action[4:]))
            return "y" * 60000, 0.0, False, False, {"pad": "z" * 60000}
        elif action.startswith("sleep:"):
            time.sleep(float(action[6:]))
        elif action == "close_pipes":  # the host reads EOF while this process lives on
            os.close(server().wfd)
            time.sleep(30)
        elif action in ("drip_exit", "drip_sigkill", "drip_forever"):
            forge(*[REPLY[i : i + 1500] for i in range(0, 4500, 1500)], then=action[5:])
        elif action == "wrong_seq":
            forge(REPLY.replace(b'"seq":3', b'"seq":9'))
        elif action == "two_lines":
            forge(REPLY + b'{"seq":4,"ok":true,"result":null}\\n')
        elif action == "split_utf8":
            line = '{"seq":3,"ok":true,"result":["caf\\u00e9 \\u20ac",0.0,false,false,{}]}\\n'.encode()
            cut = line.index("\\u20ac".encode()) + 1  # inside the euro sign's three bytes
            forge(line[:cut], line[cut:])
        elif action == "over_cap":
            forge(*[b"w" * 65536] * 5)
        elif action == "line_later":
            fd = server().wfd
            threading.Thread(target=lambda: (time.sleep(0.2), os.write(fd, REPLY)), daemon=True).start()
        return f"{self.seed}:{action[:20]}", 0.0, False, False, {}

    def solution(self):
        return []
"""


def _config(level: str, **kw) -> SandboxConfig:
    kw = {"call_timeout_s": 4.0, "soft_timeout_s": 3.0, **kw}
    return SandboxConfig(isolation=level, pool_size=0, preload_numpy=False, max_response_bytes=200_000, **kw)


@pytest.fixture(params=LEVELS)
def pool(request):
    with WorkerPool(_config(request.param)) as pool:
        yield pool


def _envs(pool: WorkerPool, n: int) -> list[RemoteEnv]:
    envs = [RemoteEnv(ENV, pool) for _ in range(n)]
    for seed, env in enumerate(envs):
        env.reset(seed)
    return envs


def test_a_worker_that_stops_reading_a_long_request_holds_up_no_other_call(pool):
    """The I/O thread wrote a request longer than the pipe holds until the call's deadline: every other episode
    waited the whole 4 s, and an honest 120 KB reply that was in time was killed as late (measured before the fix:
    the quick step took 4.0 s, the big one failed with ``call_timeout``)."""

    async def main():
        deaf, quick, big = [await AsyncSandboxEnv.create(ENV, pool) for _ in range(3)]
        for client in (deaf, quick, big):
            await client.reset(0)
        await deaf.step("deaf")
        big_step = asyncio.ensure_future(big.step("big:0.3"))
        await asyncio.sleep(0.05)
        deaf_step = asyncio.ensure_future(deaf.step("a" * 200_000))
        await asyncio.sleep(0.05)
        started = time.monotonic()
        quick_steps = [(await quick.step(f"q{i}"))[0] for i in range(3)]
        quick_took = time.monotonic() - started
        results = await asyncio.gather(deaf_step, big_step, return_exceptions=True)
        for client in (deaf, quick, big):
            await client.close()
        return quick_steps, quick_took, results

    quick_steps, quick_took, (deaf_result, big_result) = asyncio.run(main())
    assert quick_steps == ["0:q0", "0:q1", "0:q2"] and quick_took < 2.0  # not held for the 4 s deadline
    assert big_result[0] == "y" * 60000
    assert isinstance(deaf_result, EnvTimeout) and deaf_result.code == "write_timeout"


def test_call_many_writes_around_a_worker_that_stops_reading(pool):
    """Before the fix the long write held the batch to the deaf worker's deadline, and a call sent before it (an
    honest 120 KB reply, in time) was then killed as late."""
    big, deaf, quick = _envs(pool, 3)
    try:
        deaf.step("deaf")
        calls = [(big.worker, "step", {"action": "big:0.3"}), (deaf.worker, "step", {"action": "a" * 200_000}),
                 (quick.worker, "step", {"action": "q"})]  # fmt: skip
        big_result, deaf_result, quick_result = call_many(calls)
        assert isinstance(deaf_result, EnvTimeout) and deaf_result.code == "write_timeout"
        assert big_result[0] == "y" * 60000 and quick_result[0] == "2:q"
    finally:
        for env in (deaf, big, quick):
            env.close()


def test_env_code_that_closes_its_pipe_and_lives_on_holds_the_thread_briefly(pool):
    """Reading EOF, the host waited up to 1 s for the worker's exit status on the shared thread: eight such envs
    held every other episode ~8 s (measured before the fix: 0.9 s for one)."""

    async def main():
        hostile = [await AsyncSandboxEnv.create(ENV, pool) for _ in range(8)]
        quick = await AsyncSandboxEnv.create(ENV, pool)
        for client in [*hostile, quick]:
            await client.reset(0)
        steps = [asyncio.ensure_future(c.step("close_pipes")) for c in hostile]
        await asyncio.sleep(0.3)  # they have closed their pipes
        started = time.monotonic()
        await quick.step("q")
        quick_took = time.monotonic() - started
        results = await asyncio.gather(*steps, return_exceptions=True)
        for client in [*hostile, quick]:
            await client.close()
        return quick_took, results

    quick_took, results = asyncio.run(main())
    assert all(isinstance(r, EnvCrashed) for r in results)
    assert quick_took < 3.0


def test_a_worker_dying_inside_a_dripped_reply_fails_alone(pool, procs):
    """Dying in the middle of a reply the thread is reading piece by piece (exit, SIGKILL of itself, or killed by
    the host at its deadline), with honest calls in flight on the same thread."""
    actions = ["drip_exit", "sleep:0.5", "drip_sigkill", "sleep:0.5", "drip_forever", "sleep:0.5"]
    envs = _envs(pool, len(actions))
    pids = [env.worker.proc.pid for env in envs]
    try:
        futures = [pool.dispatcher.submit(env.worker, "step", {"action": a}, timeout=2.0)
                   for env, a in zip(envs, actions)]  # fmt: skip
        done, _ = wait(futures, timeout=15)
        assert len(done) == len(futures)
        errors = [f.exception() for f in futures]
        assert [type(e).__name__ for e in errors[0::2]] == ["EnvCrashed", "EnvCrashed", "EnvTimeout"]
        assert [f.result()[0] for f in futures[1::2]] == ["1:sleep:0.5", "3:sleep:0.5", "5:sleep:0.5"]
        assert all(envs[i].worker.dead for i in (0, 2, 4)) and not envs[1].worker.dead
    finally:
        for env in envs:
            env.close()
    procs.assert_gone(pids)


LIES = [  # (action, what the call gives)
    ("wrong_seq", (ProtocolViolation, "wrong_seq")),
    ("two_lines", (ProtocolViolation, "unsolicited_data")),
    ("over_cap", (OutputTooLarge, "reply_too_large")),
    ("split_utf8", "caf\u00e9 \u20ac"),
]


@pytest.mark.parametrize("through", ["dispatcher", "call_many"])
def test_lies_in_a_pumped_reply_fail_only_their_call(pool, through):
    envs = _envs(pool, len(LIES) + 1)
    calls = [(env.worker, "step", {"action": a}) for env, (a, _) in zip(envs, [*LIES, ("honest", None)])]
    try:
        if through == "call_many":
            results = call_many(calls, timeout=3.0)
        else:
            futures = [pool.dispatcher.submit(w, op, payload, timeout=3.0) for w, op, payload in calls]
            wait(futures, timeout=15)
            results = [f.exception() or f.result() for f in futures]
        for (action, expected), result in zip(LIES, results):
            if isinstance(expected, str):
                assert result[0] == expected, action
            else:
                assert isinstance(result, expected[0]) and result.code == expected[1], (action, result)
        assert results[-1][0] == f"{len(LIES)}:honest"
    finally:
        for env in envs:
            env.close()


def test_a_line_sent_after_the_reply_fails_the_next_call_of_that_worker_only(pool):
    liar, honest = _envs(pool, 2)
    try:
        first = pool.dispatcher.submit(liar.worker, "step", {"action": "line_later"}).result(timeout=10)
        time.sleep(0.5)  # the extra line is in
        second = pool.dispatcher.submit(liar.worker, "step", {"action": "x"})
        other = pool.dispatcher.submit(honest.worker, "step", {"action": "y"})
        assert first[0] == "0:line_later" and other.result(timeout=10)[0] == "1:y"
        error = second.exception(timeout=10)
        assert isinstance(error, ProtocolViolation) and error.code == "unsolicited_data" and liar.worker.dead
    finally:
        liar.close()
        honest.close()


def test_a_worker_killed_elsewhere_whose_fds_are_reused_cannot_take_a_new_workers_call(pool):
    """A worker killed by another thread while the I/O thread is busy, and a new worker whose pipes got its fd
    numbers, called before the I/O thread looked again: the old call's entry used to be overwritten by the new
    one (the old call then never finished) or to stand for the new worker's pipe. The I/O thread is held busy here
    by holding its lock, which it takes once per round."""
    victim = _envs(pool, 1)[0]
    dispatcher = pool.dispatcher
    old = dispatcher.submit(victim.worker, "step", {"action": "sleep:3"})
    time.sleep(0.3)  # sent; the I/O thread polls its pipe
    old_fds = {victim.worker._resp_r, victim.worker._req_w}
    with dispatcher._lock:  # the I/O thread's next round waits here
        os.write(dispatcher._wake_w, b"\0")
        time.sleep(0.2)
        victim.worker.kill()  # from this thread, as a shutdown or a misused close would
        fresh = Worker(pool.config, pool.level)
        reused = {fresh._resp_r, fresh._req_w} & old_fds
        fresh.call("init", source=ENV)
        fresh.call("reset", seed=7)
        new: Future = Future()  # submitted as submit() does, without the lock this thread holds
        dispatcher._incoming.append((fresh, "step", {"action": "fresh"}, None, new))
    try:
        assert reused, "the new worker did not get the old one's fd numbers: nothing was tested"
        assert isinstance(old.exception(timeout=1.5), EnvCrashed)  # at once, not at its deadline (4 s)
        assert new.result(timeout=5)[0] == "7:fresh"
    finally:
        fresh.kill()
        victim.close()
