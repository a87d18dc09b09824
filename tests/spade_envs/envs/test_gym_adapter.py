import gymnasium
import pytest
from gymnasium.utils.env_checker import check_env

import spade_envs  # noqa: F401  (registers the built-ins)
from spade_envs.builtin import BUILTINS, load_builtin
from spade_envs.envs.gym_adapter import OBSERVATION_CHARSET, TextEnv

IDS = [f"spade_envs/{e.name}-v0" for e in BUILTINS]


@pytest.mark.parametrize("env_id", IDS)
def test_check_env_passes(env_id):
    env = gymnasium.make(env_id)
    check_env(env.unwrapped)
    env.close()


@pytest.mark.parametrize("entry", BUILTINS, ids=lambda e: e.name)
def test_observations_fit_the_text_space_for_50_seeds(entry):
    env = TextEnv(load_builtin(entry.name))
    for seed in range(50):
        obs, info = env.reset(seed=seed)
        assert obs in env.observation_space, f"seed {seed}: {sorted(set(obs) - set(OBSERVATION_CHARSET))}"
        assert info["episode_seed"] == seed
        for action in env.env.solution():
            obs, *_ = env.step(f"\\boxed{{{action}}}" if entry.setting == "games" else action)
            assert obs in env.observation_space


def test_unseeded_resets_follow_the_seeded_one():
    env = gymnasium.make("spade_envs/VaultCodeEnv-v0").unwrapped
    env.reset(seed=5)
    a = [env.reset()[0] for _ in range(3)]
    env.reset(seed=5)
    assert [env.reset()[0] for _ in range(3)] == a


def test_adapter_truncates_at_max_turns():
    env = TextEnv(load_builtin("VaultCodeEnv"), max_turns=2)
    env.reset(seed=0)
    assert env.step("\\boxed{nothing}")[3] is False
    assert env.step("\\boxed{nothing}")[3] is True
