import asyncio
import time
from pathlib import Path

import pytest
from gymnasium.utils.env_checker import check_env

from spade_envs.builtin import builtin_source
from spade_envs.envs.episode import play, solution_policy
from spade_envs.envs.tooluse import tool_call
from spade_envs.sandbox import (
    AsyncSandboxEnv,
    EnvRaised,
    EnvTimeout,
    RemoteEnv,
    SandboxConfig,
    SandboxedEnv,
    SandboxUnavailable,
    WorkerPool,
    probe_isolation,
)

CONFIG = SandboxConfig(call_timeout_s=4.0, soft_timeout_s=1.0, pool_size=2, max_workers=16)

FLAKY_ENV = """
import time

class FlakyEnv:
    max_turns = 5
    def reset(self, seed=None):
        return "ready", {}
    def step(self, action):
        if action == "raise":
            raise KeyError("broken lookup")
        if action == "slow":
            end = time.time() + 30
            while time.time() < end:
                pass
        if action == "bad":
            return "o", "not a number", False, False, {}
        return "ok " + action, 0.0, False, False, {"echo": action}
    def solution(self):
        return ["a", "b", "c"]
"""


@pytest.fixture(scope="module")
def pool():
    with WorkerPool(CONFIG) as p:
        yield p


def _processes_in_groups(groups: set[int]) -> set[int]:
    """Live (non-zombie) processes whose process group is one of ``groups`` (each worker leads its own group)."""
    found = set()
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit():
            try:
                stat = (proc / "stat").read_text()
            except OSError:
                continue
            fields = stat[stat.rindex(")") + 2 :].split()
            if fields[0] != "Z" and int(fields[2]) in groups:
                found.add(int(proc.name))
    return found


def test_auto_picks_a_real_isolation_level(pool):
    assert pool.level in ("bwrap", "landlock", "rlimits")
    assert probe_isolation(SandboxConfig(isolation="none")) == "none"


def test_sandboxed_env_passes_gymnasium_check_env(pool):
    with SandboxedEnv(builtin_source("VaultCodeEnv"), pool) as env:
        check_env(env, skip_render_check=True)
        obs, info = env.reset(seed=4)
        assert "vault" in obs.lower() and info["episode_seed"] == 4


@pytest.mark.parametrize("name", ["SurveyRouteEnv", "TripBookingEnv"])
def test_solution_wins_through_the_sandbox(pool, name):
    env = RemoteEnv(builtin_source(name), pool)
    try:
        for seed in range(3):
            env.reset(seed)
            assert play(env, solution_policy(env.solution(), env.setting), seed).won
    finally:
        env.close()


@pytest.mark.parametrize(
    ("source", "code"),
    [("class BadEnv(:\n", "syntax_error"), ("x = 1\n", "no_env_class"), ("raise ValueError('x')\n", "exec_error")],
)
def test_invalid_source_reports_its_failure_code(pool, source, code):
    with pytest.raises(EnvRaised) as info:
        RemoteEnv(source, pool)
    assert info.value.code == code


def test_env_exceptions_are_typed_and_the_worker_survives(pool):
    env = RemoteEnv(FLAKY_ENV, pool)
    try:
        env.reset(0)
        with pytest.raises(EnvRaised, match="KeyError: 'broken lookup'") as info:
            env.step("raise")
        assert info.value.code == "exception"
        with pytest.raises(EnvRaised, match="reward must be a number") as info:
            env.step("bad")
        assert info.value.code == "bad_types"
        started = time.monotonic()
        with pytest.raises(EnvTimeout, match="exceeded 1.0 s"):
            env.step("slow")
        assert time.monotonic() - started < CONFIG.call_timeout_s
        assert env.step("x")[0] == "ok x"
    finally:
        env.close()


def test_async_client_runs_many_envs_concurrently(pool):
    async def one(seed: int) -> float:
        env = await AsyncSandboxEnv.create(builtin_source("RetailAfterSalesEnv"), pool)
        try:
            await env.reset(seed)
            assert {t["function"]["name"] for t in await env.tools()} >= {"get_order", "create_return"}
            reward = 0.0
            for turn in await env.solution():
                _, reward, *_ = await env.step(turn)
            return reward
        finally:
            await env.close()

    async def main() -> list[float]:
        return await asyncio.gather(*(one(seed) for seed in range(6)))

    assert asyncio.run(main()) == [1.0] * 6


def test_async_tool_calls_match_the_in_process_env(pool):
    from spade_envs.builtin import load_builtin

    local = load_builtin("CrmReportEnv")()
    local.reset(2)
    call = ("list_customers", {"region": "North", "page": 1})

    async def main() -> tuple[str, tuple]:
        env = await AsyncSandboxEnv.create(builtin_source("CrmReportEnv"), pool)
        try:
            await env.reset(2)
            out = await env.call_tool(*call)
            native = await env.step_calls([{"name": call[0], "arguments": call[1]}])
            return out, native
        finally:
            await env.close()

    out, native = asyncio.run(main())
    assert out == local.call_tool(*call)
    assert native == local.step(tool_call(call[0], **call[1]))


def test_pool_bounds_workers_and_leaves_no_processes():
    with WorkerPool(SandboxConfig(pool_size=1, max_workers=2)) as small:
        a, b = small.acquire(), small.acquire()
        with pytest.raises(SandboxUnavailable, match="max_workers=2") as info:
            small.acquire(timeout=0.2)
        assert info.value.code == "acquire_timeout"
        small.release(a)
        small.release(a)  # releasing twice is harmless
        c = small.acquire(timeout=5)
        assert c.call("ping") == "pong" and b.call("ping") == "pong"
        groups = {w.proc.pid for w in (a, b, c, *small._ready)}
        assert _processes_in_groups(groups)
    deadline = time.monotonic() + 5
    while _processes_in_groups(groups) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _processes_in_groups(groups)


def test_bwrap_has_no_writable_tmp_that_could_hide_binds():
    """Regression: a tmpfs at /tmp hid a checkout or venv under /tmp (every bwrap worker died at start when CI cloned
    the repository there), and mounted first it let env code write beside the binds. Scratch is the only writable
    place; TMPDIR points at it."""
    from spade_envs.sandbox.launch import hidden_paths
    from spade_envs.sandbox.process import _bwrap_prefix

    args = _bwrap_prefix("/tmp/spade-env-x")
    tmpfs = [args[i + 1] for i, arg in enumerate(args) if arg == "--tmpfs"]
    assert tmpfs == hidden_paths()  # only the empty read-only covers over evaluation data (issue 24)
    assert all(args[args.index(p) + 1 : args.index(p) + 3] == ["--remount-ro", p] for p in tmpfs)
    assert args[args.index("--bind") + 1 : args.index("--bind") + 3] == ["/tmp/spade-env-x", "/tmp/spade-env-x"]
    assert args[len(args) - 1 - args[::-1].index("--remount-ro") + 1] == "/"  # the last remount: the root
