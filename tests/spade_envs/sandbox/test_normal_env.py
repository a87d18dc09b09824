"""Legitimate environments work in the sandbox: at every isolation level, and every built-in at the default one."""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import pytest

from spade_envs.builtin import BUILTINS, builtin_source, load_builtin
from spade_envs.envs.contract import is_win, outcome_reward
from spade_envs.envs.gym_adapter import TextEnv
from spade_envs.sandbox import (
    ISOLATION_LEVELS,
    AsyncSandboxEnv,
    EnvRaised,
    RemoteEnv,
    SandboxConfig,
    SandboxedEnv,
    SandboxUnavailable,
    WorkerPool,
)

SEEDS = range(3)

NORMAL_SOURCE = '''
import collections
import dataclasses
import enum
import random
from collections import namedtuple

import numpy as np

Point = namedtuple("Point", "row col")


class Move(enum.Enum):
    UP = (-1, 0)
    DOWN = (1, 0)
    LEFT = (0, -1)
    RIGHT = (0, 1)


@dataclasses.dataclass
class Board:
    size: int
    goal: Point
    pos: Point = Point(0, 0)
    visits: collections.Counter = dataclasses.field(default_factory=collections.Counter)


class GridWalkEnv:
    """Walk from the top-left corner of a numpy grid to the goal the seed placed."""

    max_turns = 20

    def reset(self, seed=None):
        rng = random.Random(seed)
        size = rng.randint(3, 6)
        self.board = Board(size, Point(rng.randrange(1, size), rng.randrange(1, size)))
        self.grid = np.zeros((size, size), dtype=np.int64)
        self.grid[self.board.goal] = 1
        self.recent = collections.deque(maxlen=3)
        return self.render("Moves: up, down, left, right."), {"size": size, "grid": self.grid}

    def render(self, note):
        rows = ["".join("G" if v else "." for v in row) for row in self.grid]
        return f"{note} You are at {tuple(self.board.pos)}.\\n" + "\\n".join(rows)

    def step(self, action):
        try:
            move = Move[action.strip().upper()]
        except KeyError:
            return self.render(f"Unknown move {action!r}."), np.float64(0.0), np.bool_(False), False, {}
        board = self.board
        row, col = board.pos.row + move.value[0], board.pos.col + move.value[1]
        if 0 <= row < board.size and 0 <= col < board.size:
            board.pos = Point(row, col)
        board.visits[board.pos] += 1
        self.recent.append(move.name)
        won = bool(self.grid[board.pos] == 1)
        info = {"pos": np.array(board.pos), "recent": list(self.recent), "visited": len(board.visits)}
        return self.render("You won!" if won else "Keep going."), np.float64(won), np.bool_(won), False, info

    def solution(self):
        goal = self.board.goal
        return ["down"] * goal.row + ["right"] * goal.col
'''

#: Standard-library modules the worker does not preload; a generated env may import any of them.
STDLIB_SOURCE = """
import bisect
import copy
import fractions
import heapq
import statistics
import threading


class StdlibEnv:
    max_turns = 3

    def reset(self, seed=None):
        half = fractions.Fraction(1, 3) + fractions.Fraction(1, 6)
        return f"mean {statistics.mean([1, 2, 3, 6])}, half {half}, at {bisect.bisect([1, 5, 9], 6)}", {}

    def step(self, action):
        with threading.Lock():
            best = heapq.nsmallest(1, copy.deepcopy([3, 1, 2]))[0]
        return f"best {best}", 1.0, True, False, {}

    def solution(self):
        return ["go"]
"""


def _config(level: str) -> SandboxConfig:
    if level == "auto":
        return SandboxConfig()  # the default: the strongest level that works here
    return SandboxConfig(isolation=level, call_timeout_s=5.0, soft_timeout_s=2.0, start_timeout_s=10, pool_size=1)


#: Tests of built-ins use the default configuration (``indirect`` parametrisation of ``pool``); one pool lives at
#: a time, so that each can check that none of its workers outlived it.
DEFAULT = pytest.mark.parametrize("pool", ["auto"], indirect=True)


def _interpreter_world_readable() -> bool:
    from spade_envs.sandbox.hardening import world_readable
    from spade_envs.sandbox.process import _read_only_paths

    return all(world_readable(p) for p in _read_only_paths())


#: As root, the rlimits level has no filesystem boundary but the worker's uid, so it refuses to start when that uid
#: could not read the interpreter (e.g. Python under /root/.pyenv); test_rlimits_refusal covers that case.
LEVELS = [lvl for lvl in ISOLATION_LEVELS if lvl != "rlimits" or os.geteuid() != 0 or _interpreter_world_readable()]


def test_rlimits_level_works_or_refuses_clearly() -> None:
    if "rlimits" in LEVELS:
        with WorkerPool(_config("rlimits")) as pool:
            assert pool.level == "rlimits"
        return
    with pytest.raises(SandboxUnavailable, match="needs an interpreter readable by an unprivileged uid"):
        WorkerPool(_config("rlimits"))


@pytest.fixture(scope="module", params=LEVELS)
def pool(request: pytest.FixtureRequest, procs: Any) -> Iterator[WorkerPool]:
    pool = WorkerPool(_config(request.param))  # a level that does not work fails the tests, never skips them
    try:
        assert pool.level == request.param or (request.param == "auto" and pool.level != "none")
        yield pool
    finally:
        pool.shutdown()
    procs.assert_no_workers_left()


@pytest.mark.parametrize("seed", SEEDS)
def test_normal_env_wins_at_every_level(pool: WorkerPool, seed: int) -> None:
    env = RemoteEnv(NORMAL_SOURCE, pool)
    try:
        assert (env.class_name, env.setting, env.max_turns) == ("GridWalkEnv", "games", 20)
        obs, info = env.reset(seed)
        assert env.reset(seed) == (obs, info), "the same seed must give the same episode"
        assert sum(map(sum, info["grid"])) == 1 and len(info["grid"]) == info["size"]  # numpy became plain lists
        unknown = obs.replace("Moves: up, down, left, right.", "Unknown move 'jump'.")
        assert env.step("jump")[:4] == (unknown, 0.0, False, False)  # garbage input is explained, not raised
        actions = env.solution()
        assert actions and all(a in ("down", "right") for a in actions)
        for turn, action in enumerate(actions):
            obs, reward, terminated, truncated, info = env.step(action)
            assert terminated == (turn == len(actions) - 1) and not truncated
        assert obs.startswith("You won!") and info["recent"] == [a.upper() for a in actions[-3:]]
        assert isinstance(info["pos"], list) and reward == 1.0
        assert is_win(outcome_reward(reward, terminated, truncated))
    finally:
        env.close()


def test_stdlib_modules_import_at_every_level(pool: WorkerPool) -> None:
    # The worker preloads a few modules before it drops privileges; env code may import any other stdlib module.
    try:
        env = RemoteEnv(STDLIB_SOURCE, pool)
    except EnvRaised as exc:
        pytest.fail(f"a legitimate env cannot import the standard library at level {pool.level}: {exc}")
    try:
        assert env.reset(0)[0] == "mean 3, half 1/2, at 2"
        assert env.step("go") == ("best 1", 1.0, True, False, {})
    finally:
        env.close()


@DEFAULT
@pytest.mark.parametrize("entry", BUILTINS, ids=lambda e: e.name)
def test_builtin_solution_wins_in_the_sandbox(pool: WorkerPool, entry: Any) -> None:
    """Every built-in wins with its solution through ``SandboxedEnv``, turn for turn as it plays in-process."""
    source = builtin_source(entry.name)
    for seed in SEEDS:
        local = TextEnv(load_builtin(entry.name))
        with SandboxedEnv(source, pool) as env:
            assert env.setting == entry.setting
            obs, info = env.reset(seed=seed)
            assert (obs, info) == local.reset(seed=seed)
            actions = env.env.solution()
            assert actions == local.env.solution()
            for action in actions:
                text = f"\\boxed{{{action}}}" if entry.setting == "games" else action
                result = env.step(text)
                assert result == local.step(text)
                obs, reward, terminated, truncated, info = result
                if terminated or truncated:
                    break
            assert terminated and not truncated, f"seed {seed}: the solution did not finish the episode"
            assert is_win(outcome_reward(reward, terminated, truncated)), f"seed {seed}: reward {reward}"


@DEFAULT
async def test_async_client_plays_an_episode(pool: WorkerPool) -> None:
    env = await AsyncSandboxEnv.create(NORMAL_SOURCE, pool)
    try:
        await env.reset(7)
        for action in await env.solution():
            obs, reward, terminated, truncated, _ = await env.step(action)
        assert obs.startswith("You won!") and reward == 1.0 and terminated and not truncated
    finally:
        await env.close()
