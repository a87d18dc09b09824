"""The starter ladder: each rung's solution wins, wrong or empty answers lose, resets are deterministic, and every
rung loads and plays in the sandbox from the pool ``write_ladder_pool`` writes (as the trainer plays it)."""

from __future__ import annotations

import ast
import json
import sys

import pytest

from spade_envs.builtin.ladder import LADDER, ladder_source, load_rung, write_ladder_pool
from spade_envs.envs.episode import do_nothing_policy, play, solution_policy
from spade_envs.envs.skills import SKILLS
from spade_envs.sandbox.client import RemoteEnv
from spade_envs.sandbox.config import SandboxConfig
from spade_envs.sandbox.pool import WorkerPool

NAMES = [r.name for r in LADDER]
SEEDS = range(30)


@pytest.mark.parametrize("name", NAMES)
def test_solution_wins_and_wrong_or_empty_answers_lose(name):
    for seed in SEEDS:
        env = load_rung(name)()
        env.reset(seed)
        assert play(env, solution_policy(env.solution(), "games"), seed, setting="games").won
        assert not play(env, do_nothing_policy("games"), seed, setting="games").won
        wrong = play(env, lambda _obs, _turn: "\\boxed{zebra 1000}", seed, setting="games")
        assert not wrong.won and wrong.terminated


@pytest.mark.parametrize("name", NAMES)
def test_reset_is_deterministic_and_stdlib_only(name):
    cls = load_rung(name)
    assert cls.__name__ == name and 1 <= cls.max_turns <= 3
    assert [cls().reset(s)[0] for s in SEEDS] == [cls().reset(s)[0] for s in SEEDS]
    assert len({cls().reset(s)[0] for s in SEEDS}) > 3
    for node in ast.walk(ast.parse(ladder_source(name))):
        if isinstance(node, ast.ImportFrom | ast.Import):
            module = node.module if isinstance(node, ast.ImportFrom) else node.names[0].name
            assert module.split(".")[0] in set(sys.stdlib_module_names) | {"__future__"}


def test_lenient_rules_read_the_reply_as_the_trainer_extracts_it():
    say = load_rung("SayWordEnv")()
    obs, _ = say.reset(1)
    word = say.solution()[0]
    assert word in obs and say.step(f"Sure! The word is {word.upper()}.")[1] == 1.0
    add = load_rung("AddEnv")()
    add.reset(2)
    assert add.step(f"{add.a} + {add.b} = {add.a + add.b}")[1] == 1.0  # the last number counts
    doors = load_rung("ThreeDoorsEnv")()
    doors.reset(3)
    first, second, _ = doors.solution()
    assert doors.step(first)[1:3] == (0.0, False)
    assert doors.step(first if first != second else "nothing")[1:3] == (0.0, True)  # a wrong word ends it


def test_write_ladder_pool_plays_every_rung_in_the_sandbox(tmp_path):
    root = write_ladder_pool(tmp_path / "pool", NAMES)
    rows = [json.loads(line) for line in (root / "manifest.jsonl").read_text().splitlines()]
    assert [r["env_id"] for r in rows] == [f"ladder-{n}" for n in NAMES]
    assert all(r["valid"] and r["skill"] in SKILLS["games"] for r in rows)
    with WorkerPool(SandboxConfig(call_timeout_s=5.0, soft_timeout_s=2.0, pool_size=1)) as pool:
        assert pool.level != "none"
        for row in rows:
            env = RemoteEnv((root / "envs" / f"{row['env_id']}.py").read_text(), pool)
            try:
                assert env.setting == "games"
                assert play(env, solution_policy(_solution(env), "games"), 7, setting="games").won
            finally:
                env.close()
    with pytest.raises(ValueError, match="at least one rung"):
        write_ladder_pool(tmp_path / "empty", [])
    with pytest.raises(KeyError, match="no ladder rung 'NopeEnv'"):
        write_ladder_pool(tmp_path / "bad", ["NopeEnv"])


def _solution(env: RemoteEnv) -> list[str]:
    env.reset(7)
    return env.solution()
