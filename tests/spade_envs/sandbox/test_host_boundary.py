"""The host survives any reply: malformed results of every method give typed errors, and leak nothing.

Env code shares its process with the worker loop, so it can replace any reply (here: it patches the worker's
``protocol.encode`` at import time, the way an attacker would). Whatever the line holds, the host must return a
checked result or raise a :class:`SandboxError` with a known code, kill the worker when the reply was invalid, and
give back the worker's process, scratch dir and pool slot (issue 18, "a closed host boundary").
"""

from __future__ import annotations

import json
import os
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from spade_envs.envs.failures import FAILURE_CODES
from spade_envs.sandbox import RemoteEnv, SandboxConfig, SandboxError, WorkerPool, probe_isolation
from spade_envs.sandbox.errors import SANDBOX_FAILURE_CODES, SandboxUnavailable
from spade_envs.sandbox.process import Worker
from spade_envs.sandbox.protocol import decode
from spade_envs.sandbox.replies import MAX_DEPTH, BadReply, _plainly_fine, check_json, check_result

OPS = ("init", "reset", "step", "step_calls", "call_tool", "tools", "solution")
MAX_CHARS = 1000

FORGER = """
import sys

_protocol = sys.modules["spade_envs.sandbox.protocol"]
_encode = _protocol.encode
FORGED = @FORGED@
TARGET = @TARGET@


def _forge(message):
    if message.get("seq") == TARGET:
        return FORGED.replace(b"@SEQ@", str(TARGET).encode())
    return _encode(message)


_protocol.encode = _forge


class ForgeEnv:
    max_turns = 3

    def reset(self, seed=None):
        return "ready", {}

    def step(self, action):
        return "ok", 0.0, False, False, {}

    def solution(self):
        return ["x"]
"""

# -- what a forged line may hold ----------------------------------------------------------------------------------
_scalars = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(10**30), max_value=10**30)
    | st.floats()
    | st.text(max_size=20)
    | st.sampled_from(["\ud800", "\U0001f600", "x" * (MAX_CHARS + 1), "pong", 10**18, 2**63, 1e308, -(2**63)])
)
_json = st.recursive(
    _scalars,
    lambda children: st.lists(children, max_size=5) | st.dictionaries(st.text(max_size=5), children, max_size=4),
)
_RAW = [
    b"[" * 100_000 + b"]" * 100_000,  # nesting deep enough to exhaust the decoder's recursion
    b"1" * 400,  # a 400-digit integer
    b"1e999",
    b"-Infinity",
    b"NaN",
    b'"\\ud800"',
    b'"' + b"x" * 5000 + b'"',
    b"{" * 30 + b"}" * 30,
]


def _shaped(op: str) -> st.SearchStrategy[Any]:
    """Near misses of the right shape for ``op``, where the bugs hide."""
    if op == "init":
        return st.fixed_dictionaries(
            {"class_name": _scalars, "setting": st.sampled_from(["games", "tool_use", "x"]), "max_turns": _scalars}
        )
    if op == "reset":
        return st.tuples(_scalars, st.just({}) | _json, _scalars | st.just(2**63)).map(list)
    if op in ("step", "step_calls"):
        return st.tuples(_scalars, _scalars | st.just(10**400), _scalars, _scalars, _json).map(list)
    if op == "tools":
        return st.lists(st.just({"type": "function", "function": {"name": "f"}}) | _json, max_size=3)
    return st.lists(_scalars, max_size=3) | _json


def _line(op: str) -> st.SearchStrategy[bytes]:
    """A whole forged reply line (``@SEQ@`` stands for the right sequence number)."""
    result = (_shaped(op) | _json).map(lambda value: json.dumps(value, allow_nan=True).encode()) | st.sampled_from(_RAW)
    ok = result.map(lambda raw: b'{"seq":@SEQ@,"ok":true,"result":' + raw + b"}")
    error = st.tuples(st.sampled_from(["timeout", "too_large", "raised", "bogus", None]), _scalars).map(
        lambda ke: json.dumps({"seq": "@SEQ@", "ok": False, "kind": ke[0], "code": ke[1], "error": "e"}).encode()
    )
    error = error.map(lambda raw: raw.replace(b'"@SEQ@"', b"@SEQ@"))
    garbage = st.binary(max_size=40).map(lambda raw: raw.replace(b"\n", b""))
    return ok | error | garbage | st.sampled_from([b'{"seq":@SEQ@}', b'{"seq":@SEQ@,"ok":1}', b"[]"])


# -- the host's decode and checks alone: many cases, no process --------------------------------------------------
@settings(max_examples=400, deadline=None)
@given(op=st.sampled_from(OPS), data=st.data())
def test_decoding_and_checking_any_line_raises_only_value_errors(op, data):
    line = data.draw(_line(op)).replace(b"@SEQ@", b"2")
    try:
        reply = decode(line)
    except (BadReply, ValueError, UnicodeDecodeError):
        return
    try:
        check_json(reply, MAX_CHARS, MAX_DEPTH + 4, line)  # as the host does: a fast scan of the line, or the walk
        if reply.get("ok") is True:
            check_result(op, reply.get("result"), MAX_CHARS, walk=False)
    except BadReply:
        pass
    if _plainly_fine(line, MAX_CHARS, MAX_DEPTH + 4):  # the scan may only skip walks that would have passed
        check_json(reply, MAX_CHARS, MAX_DEPTH + 4)


# -- end to end, through a real sandboxed worker --------------------------------------------------------------------
@pytest.fixture(scope="module")
def pool():
    try:
        level = probe_isolation(SandboxConfig(isolation="landlock", preload_numpy=False))
    except SandboxUnavailable:
        level = "auto"
    config = SandboxConfig(
        isolation=level, preload_numpy=False, pool_size=1, max_workers=2, max_observation_chars=MAX_CHARS,
        call_timeout_s=5.0, soft_timeout_s=2.0,
    )  # fmt: skip
    with WorkerPool(config) as pool:
        yield pool


def _call(env: RemoteEnv, op: str) -> Any:
    return {
        "reset": lambda: env.reset(0),
        "step": lambda: env.step("a"),
        "step_calls": lambda: env.step_calls([]),
        "call_tool": lambda: env.call_tool("f", {}),
        "tools": env.tools,
        "solution": env.solution,
    }[op]()


@pytest.mark.parametrize("op", OPS)
@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_a_forged_reply_gives_a_typed_error_and_leaks_nothing(pool, procs, op, data):
    line = data.draw(_line(op))
    target = 1 if op == "init" else 2  # init is the first request; the method under test the second
    source = FORGER.replace("@FORGED@", repr(line + b"\n")).replace("@TARGET@", str(target))
    workers: list[Worker] = []
    acquire = pool.acquire

    def spy(timeout: float | None = None) -> Worker:
        workers.append(acquire(timeout))
        return workers[-1]

    pool.acquire = spy  # type: ignore[method-assign]
    env = None
    try:
        env = RemoteEnv(source, pool)
        if op != "init":
            _call(env, op)
    except SandboxError as exc:  # anything else fails the test
        assert exc.code in SANDBOX_FAILURE_CODES or exc.code in FAILURE_CODES, exc.code
        assert workers[0].dead or type(exc).__name__ in ("EnvRaised", "EnvTimeout", "OutputTooLarge")
    finally:
        del pool.acquire
        if env is not None:
            env.close()
    worker = workers[0]
    assert worker.dead
    procs.assert_gone({worker.proc.pid})
    assert not os.path.exists(worker.scratch)
    assert pool.live_count == 0 and pool._slots.free == pool.config.max_workers


def test_a_hostile_tree_in_a_plain_scratch_dir_is_removed_without_recursion(monkeypatch, tmp_path):
    """Where the host cannot mount the scratch tmpfs, removal walks the tree: ``shutil.rmtree`` raised
    RecursionError on a deep chain and left the tree (and the pool slot) behind."""
    from spade_envs.sandbox import scratch

    monkeypatch.setattr(scratch, "_can_mount", False)
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "keep").write_text("keep")
    box = scratch.Scratch(16, 256)
    assert not box.mounted
    fd = os.open(box.path, os.O_RDONLY)
    for _ in range(1100):  # deeper than the recursion limit, and a path longer than PATH_MAX
        os.mkdir("dddd", dir_fd=fd)
        child = os.open("dddd", os.O_RDONLY, dir_fd=fd)
        os.close(fd)
        fd = child
    os.mkdir("locked", 0, dir_fd=fd)
    os.symlink(str(outside), "link", dir_fd=fd)
    os.close(fd)
    box.remove()
    assert not os.path.exists(box.path)
    assert (outside / "keep").read_text() == "keep"  # the link was removed, not followed


def test_the_sweep_removes_only_leftovers_of_dead_hosts_of_this_pid_namespace(tmp_path):
    from spade_envs.sandbox.cgroups import host_tag
    from spade_envs.sandbox.scratch import PREFIX, sweep_stale

    namespace, _, pid = host_tag().partition(".")
    dead = 2**22 + 12345  # above the default pid_max: no process has it
    names = {
        "dead host": f"{PREFIX}{namespace}.{dead}-abc",
        "this host": f"{PREFIX}{namespace}.{pid}-abc",
        "live host": f"{PREFIX}{namespace}.1-abc",
        "other namespace": f"{PREFIX}{int(namespace) + 1}.{dead}-abc",
        "not ours": "spade-env-abc",
    }
    for name in names.values():
        (tmp_path / name / "sub").mkdir(parents=True)
    assert sweep_stale(str(tmp_path)) == 1
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(n for k, n in names.items() if k != "dead host")


def test_a_long_or_invalid_exception_text_stays_an_env_error(pool):
    """The worker cuts and repairs error texts to what the host accepts: an honest env fault is never read as a
    protocol violation (which would kill the worker), whatever text the env's exception carries."""
    source = (
        FORGER.replace("@FORGED@", "b''")
        .replace("@TARGET@", "-1")
        .replace('return "ok", 0.0, False, False, {}', 'raise ValueError("\\ud800" + "x" * 5000)')
    )
    env = RemoteEnv(source, pool)
    try:
        env.reset(0)
        with pytest.raises(SandboxError) as info:
            env.step("a")
        assert type(info.value).__name__ == "EnvRaised" and info.value.code == "exception"
        assert not env.worker.dead and env.worker.call("ping") == "pong"
    finally:
        env.close()


def test_a_request_that_is_not_json_is_a_typed_error_and_spares_the_worker(pool):
    """Tool arguments come from parsing agent text, and Python's json accepts NaN: that must not crash the host."""
    env = RemoteEnv(FORGER.replace("@FORGED@", "b''").replace("@TARGET@", "-1"), pool)
    try:
        env.reset(0)
        for arguments in ({"x": float("nan")}, {"x": object()}):
            with pytest.raises(SandboxError) as info:
                env.call_tool("f", arguments)
            assert info.value.code == "bad_request"
        assert env.step("a")[0] == "ok"
    finally:
        env.close()
