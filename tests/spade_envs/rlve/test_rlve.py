"""Real RLVE environments (rlve-gym) played through SPADE's contract inside the sandbox."""

from __future__ import annotations

import random
import re

import pytest

from spade_envs.envs.contract import extract_command, is_win, outcome_reward
from spade_envs.rlve import OFFICIAL16, RLVEEnvSet, SlidingWindow, SlidingWindowConfig, UnknownRLVEEnv, rlve_catalog
from spade_envs.sandbox import RemoteEnv, SandboxConfig, WorkerPool

# Real envs of official16 with a reference answer, plus one outside it.
PLAYED = ("Multiplication", "Sorting", "SAT", "SpiralMatrix", "GCDOne_Counting", "Division")


@pytest.fixture(scope="module")
def pool():
    with WorkerPool(SandboxConfig(call_timeout_s=20.0, soft_timeout_s=15.0, pool_size=1)) as p:
        assert p.level != "none"
        yield p


@pytest.fixture(scope="module")
def envs() -> RLVEEnvSet:
    return RLVEEnvSet.from_names([*PLAYED, "Cinema"])


def _play(pool: WorkerPool, envs: RLVEEnvSet, env_id: str, difficulty: int, seed: int, answer: str | None):
    """Reset, then answer (the reference answer when ``answer`` is None); return (prompt, outcome, info)."""
    inst = envs.instance(env_id, difficulty, seed)
    env = RemoteEnv(inst.source, pool)
    try:
        assert env.setting == "games" and env.max_turns == 1
        prompt, info = env.reset(inst.seed)
        assert info == {"rlve_env": env_id, "difficulty": difficulty, "problem_seed": seed}
        if answer is None:
            (answer,) = env.solution()
        agent_text = f"Let me think. The answer is \\boxed{{{answer}}}"
        _obs, reward, terminated, truncated, step_info = env.step(extract_command(agent_text))
        assert terminated and not truncated
        return prompt, outcome_reward(reward, terminated, truncated), step_info
    finally:
        env.close()


@pytest.mark.parametrize("env_id", PLAYED)
def test_right_answer_wins_wrong_answer_loses(pool, envs, env_id):
    prompt, won, info = _play(pool, envs, env_id, 1, 11, None)
    assert is_win(won) and info["rlve_accuracy"] == 1
    prompt_again, lost, info = _play(pool, envs, env_id, 1, 11, "0 0 0 zzz")
    assert prompt_again == prompt  # same seed, same problem, in another worker
    assert not is_win(lost) and info["rlve_accuracy"] == 0


def test_seeds_give_different_problems(pool, envs):
    prompts = {_play(pool, envs, "Sorting", 0, seed, None)[0] for seed in (1, 2, 3)}
    assert len(prompts) == 3


def test_answer_already_in_rlve_markers_is_scored_as_is(pool, envs):
    inst = envs.instance("Multiplication", 0, 5)
    env = RemoteEnv(inst.source, pool)
    try:
        env.reset(5)
        (answer,) = env.solution()
        assert env.step(f"<answer>{answer}</answer>")[1] == 1.0
        assert env.step(answer)[:3] == ("The episode is over.", 0.0, True)  # one answer per episode
    finally:
        env.close()


def test_difficulty_comes_from_rlve_controller(pool, envs):
    """Multiplication's controller adds one digit per level: level d multiplies numbers of at most d + 2 digits."""

    def widest(difficulty: int) -> int:
        prompts = [_play(pool, envs, "Multiplication", difficulty, seed, None)[0] for seed in range(4)]
        return max(len(n) for p in prompts for n in re.findall(r"\d+", p))

    assert widest(0) == 2
    assert widest(3) == 5


def test_sliding_window_raises_the_difficulty_of_the_next_instances(pool, envs):
    window = SlidingWindow(["Multiplication"], SlidingWindowConfig(window_attempts=2, accuracy=0.9, width=2))
    rng = random.Random(0)
    for expected_high in (1, 2):
        difficulty = window.sample("Multiplication", rng)
        assert difficulty == expected_high - 1  # the window sits at its top: every play so far won
        wins = sum(is_win(_play(pool, envs, "Multiplication", difficulty, s, None)[1]) for s in (0, 1))
        assert window.record("Multiplication", difficulty, wins, 2)
    assert window.bounds("Multiplication") == (1, 2)
    prompt = _play(pool, envs, "Multiplication", 2, 0, None)[0]
    assert max(len(n) for n in re.findall(r"\d+", prompt)) <= 4


def test_sets():
    catalog = rlve_catalog()
    assert len(catalog) >= 390
    official = RLVEEnvSet.from_names("official16")
    assert official.env_ids == OFFICIAL16 and len(official) == 16
    assert RLVEEnvSet.from_names("all").env_ids == tuple(catalog)
    with pytest.raises(UnknownRLVEEnv, match="'Sortting'.*did you mean Sorting"):
        RLVEEnvSet.from_names(["Multiplication", "Sortting"])
    with pytest.raises(ValueError, match="unknown RLVE set 'official17'"):
        RLVEEnvSet.from_names("official17")
    with pytest.raises(ValueError, match="twice"):
        RLVEEnvSet.from_names(["SAT", "SAT"])
    spec = official.instance("SAT", 2, 9).spec()
    assert (spec.env_id, spec.setting, spec.skill, spec.metadata) == (
        "rlve_SAT_d2",
        "games",
        "SAT",
        {"rlve_env": "SAT", "difficulty": 2},
    )
    assert spec.source == official.instance("SAT", 2, 10).source  # one source per (env, difficulty), any seed
    with pytest.raises(ValueError, match="difficulty must be an int >= 0"):
        official.instance("SAT", -1, 0)
