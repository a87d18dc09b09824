"""SPADE's dual-role reward manager (on verl's reward-loop API) and per-role advantages, on hand-computed cases."""

import asyncio

import numpy as np
import pytest
import torch
from omegaconf import OmegaConf
from verl import DataProto
from verl.experimental.reward_loop.reward_manager import get_reward_manager_cls
from verl.trainer.ppo.reward import resolve_reward_manager_cls

from recipe.spade.advantages import designer_scale_for, role_advantages
from recipe.spade.reward_manager import SpadeRewardManager, designer_reward_config, score_sample
from recipe.spade.trainer import role_metrics

SEEDS = [8, 15, 22, 29]


@pytest.fixture(autouse=True)
def event_loop_for_verl():
    """verl's reward managers capture the current event loop at construction, as in its reward-loop worker."""
    loop = asyncio.new_event_loop()
    asyncio.set_event_loop(loop)
    yield loop
    loop.close()
    asyncio.set_event_loop(None)


def config(**designer):
    base = OmegaConf.load("recipe/spade/config/spade/default.yaml")
    cfg = OmegaConf.create({"reward": OmegaConf.to_container(base.reward)})
    for key, value in designer.items():
        OmegaConf.update(cfg, f"reward.reward_kwargs.designer.{key}", value)
    return cfg


def designer(no_hint, hint, hint_failure="", failure=""):
    measure = (
        None
        if failure
        else {"no_hint": no_hint, "hint": hint, "seeds": SEEDS[: len(no_hint)], "hint_failure": hint_failure}
    )
    return {"spade_role": "designer", "spade_skill": "optimization", "spade_failure": failure, "spade_measure": measure}


def test_the_packaged_config_selects_spades_reward_manager_through_verls_resolver():
    assert resolve_reward_manager_cls(config()) is SpadeRewardManager
    assert get_reward_manager_cls("spade") is SpadeRewardManager


def test_agent_reward_is_the_outcome_and_an_env_fault_scores_zero():
    cfg = designer_reward_config(config())
    assert score_sample(cfg, {"spade_role": "agent", "spade_outcome": 0.75, "spade_env_fault": ""})[0] == 0.75
    assert score_sample(cfg, {"spade_role": "agent", "spade_outcome": 1.0, "spade_env_fault": "env_timeout"})[0] == 0


@pytest.mark.parametrize(
    ("no_hint", "hint", "expected"),
    [
        # w = 0.5 (full plateau), regret 1.0 - 0.5 = 0.5 -> regret term clip(0.5 / 0.15) = 1: 0.6 * 1 + 0.4 * 1
        ([1.0, 0.0], [1.0, 1.0], 1.0),
        # w = 0 (plateau 0: 0.4 below the band, ramp 0.25), regret 0.5 -> 1: 0.4
        ([0.0, 0.0], [1.0, 0.0], 0.4),
        # partial credit is no win: w = 0 (plateau 0), regret 0.5 - 0 -> 1: 0.4
        ([0.9, 0.0], [1.0, 0.0], 0.4),
        # w = 0.25: plateau 1 - 0.15 / 0.25 = 0.4; regret 0.5 - 0.25 -> 1: 0.6 * 0.4 + 0.4
        ([1.0, 0.0, 0.0, 0.0], [1.0, 1.0, 0.0, 0.0], 0.64),
        # only partial credit in both arms: no win, w = 0 and no regret (it paid 1.0 before issue 37)
        ([0.5, 0.5], [0.9, 0.9], 0.0),
    ],
)
def test_designer_reward_is_the_blend_of_plateau_and_paired_regret(no_hint, hint, expected):
    reward, _ = score_sample(designer_reward_config(config()), designer(no_hint, hint))
    assert reward == pytest.approx(expected)


def test_designer_penalties_for_rejection_and_failed_hints_are_negative_and_configurable():
    cfg = designer_reward_config(config(penalties={"syntax_error": -0.7}))
    assert score_sample(cfg, designer([], [], failure="syntax_error"))[0] == -0.7
    assert score_sample(cfg, designer([], [], failure="timeout"))[0] == cfg.penalties["timeout"] < 0
    # a leaking hint: regret 0, plateau of w = 0.5 (0.6), plus the hint_leak penalty
    leak, _ = score_sample(cfg, designer([1.0, 0.0], [], hint_failure="hint_leak"))
    assert leak == pytest.approx(0.6 + cfg.penalties["hint_leak"])


def test_variants_and_bad_settings():
    assert score_sample(designer_reward_config(config(variant="regret")), designer([0, 0], [1, 0]))[0] == 0.5
    lp = designer_reward_config(config(variant="learning_potential"))
    sample = designer([1.0, 1.0, 1.0, 0.0], [1, 1, 1, 1])  # w = 0.75
    assert score_sample(lp, sample)[0] == 0.0  # no history of the skill yet: no potential
    sample["spade_measure"]["lp_slow"] = 0.25  # the skill's slow EMA when the design was made
    assert score_sample(lp, sample)[0] == pytest.approx(0.5)
    with pytest.raises(ValueError, match="unknown failure code"):
        designer_reward_config(config(penalties={"no_such_code": -1.0}))
    with pytest.raises(ValueError, match="not a SPADE sample"):
        score_sample(designer_reward_config(config()), {"spade_role": None})


def test_run_single_reads_the_loop_extra_fields_like_verls_reward_worker_sends_them():
    manager = SpadeRewardManager(config(), tokenizer=None, compute_score=None)
    data = DataProto.from_dict(
        tensors={"responses": torch.zeros(1, 3, dtype=torch.long)},
        non_tensors={"tool_extra_fields": np.array([designer([1.0, 0.0], [1.0, 1.0])], dtype=object)},
    )
    result = manager.loop.run_until_complete(manager.run_single(data))
    assert result == {"reward_score": 1.0, "reward_extra_info": {"spade_is_designer": 1.0}}


def test_role_advantages_keep_agent_rows_and_centre_designers_per_skill():
    mask = torch.tensor([[1, 1, 0], [1, 0, 0], [1, 1, 1], [1, 1, 0], [0, 1, 1]], dtype=torch.long)
    verl_adv = torch.tensor([[0.7, 0.7, 0.0], [-0.7, 0.0, 0.0], [9.0, 9.0, 9.0], [9.0, 9.0, 0.0], [0.0, 9.0, 9.0]])
    roles = ["agent", "agent", "designer", "designer", "designer"]
    skills = ["", "", "optimization", "optimization", "causal_inference"]
    scores = [1.0, 0.0, 0.4, -1.0, 0.3]
    out = role_advantages(verl_adv, mask, scores, roles, skills, scale=2.0)
    assert torch.equal(out[:2], verl_adv[:2])  # agent rows: verl's GRPO untouched
    # optimization: mean -0.3 -> (0.7, -0.7) x 2; causal_inference alone: centred on the designer mean -0.1
    assert torch.allclose(out[2], torch.tensor([1.4, 1.4, 1.4]))
    assert torch.allclose(out[3], torch.tensor([-1.4, -1.4, 0.0]))
    assert torch.allclose(out[4], torch.tensor([0.0, 0.8, 0.8]))
    with pytest.raises(ValueError, match="one score, role and skill per row"):
        role_advantages(verl_adv, mask, scores[:2], roles, skills, 1.0)


def test_designer_scale_auto_up_weights_the_few_designer_samples():
    assert designer_scale_for("auto", n_agent=192, n_designer=24, regen_every=4, cap=50.0) == 32.0
    assert designer_scale_for("auto", n_agent=1000, n_designer=2, regen_every=4, cap=50.0) == 50.0
    assert designer_scale_for(3, n_agent=1, n_designer=1, regen_every=1, cap=50.0) == 3.0
    with pytest.raises(ValueError, match="designer_scale"):
        designer_scale_for(0, 1, 1, 1, 50.0)


def test_role_metrics_split_rewards_by_role_and_skip_padding():
    extra = [
        {"spade_role": "agent", "spade_env_fault": "", "spade_sandbox_s": 1.0, "spade_wall_s": 4.0,
         "spade_truncated_by_length": True},
        {"spade_role": "agent", "spade_env_fault": "env_crashed", "spade_sandbox_s": 1.0, "spade_wall_s": 4.0},
        designer([0.5, 1.0], [1.0, 1.0]) | {"spade_sandbox_s": 3.0, "spade_prompt_fit": "shortened",
                                           "spade_hint_prompt_fit": "refused"},
        {"spade_role": "agent", "spade_env_fault": "", "spade_sandbox_s": 9.0, "spade_wall_s": 9.0,
         "spade_truncated_by_length": True},
    ]  # fmt: skip
    metrics = role_metrics(extra, [1.0, 0.0, 0.8, 5.0], [True, True, True, False], designer_reward_config(config()))
    assert metrics["spade/agent/samples"] == 2 and metrics["spade/agent/reward_mean"] == 0.5
    assert metrics["spade/designer/samples"] == 1 and metrics["spade/designer/reward_mean"] == pytest.approx(0.8)
    assert metrics["spade/agent/env_fault_rate"] == 0.5
    assert metrics["spade/agent/truncated_by_length_rate"] == 0.5  # the padding row's flag is not counted
    assert metrics["spade/designer/plateau_mean"] == 1.0  # w = 0.5: a win and a loss paid 0.5 (no win)
    assert metrics["spade/sandbox_time_share"] == 0.25
    assert metrics["spade/designer/sandbox_s_mean"] == 3.0
    # designer and hint prompts fitted to rollout.prompt_length (prompt_fit.py), counted per step
    assert (metrics["spade/designer/prompt_shortened"], metrics["spade/designer/prompt_refused"]) == (1, 0)
    assert (metrics["spade/designer/hint_prompt_shortened"], metrics["spade/designer/hint_prompt_refused"]) == (0, 1)


def test_validation_rows_of_held_out_benchmarks_are_scored_by_the_custom_reward_function():
    from recipe.spade.cpu.tiny_model import build_tokenizer
    from spade_envs.evaluation.verl_data import DATA_SOURCES, compute_score

    tokenizer = build_tokenizer()
    manager = SpadeRewardManager(config(), tokenizer=tokenizer, compute_score=compute_score)

    def row(answer: str) -> DataProto:  # what verl's agent loop sends its reward worker for one trajectory
        prompt = torch.tensor([tokenizer.encode("Which letter?")])
        response = torch.tensor([tokenizer.encode(answer)])
        return DataProto.from_dict(
            tensors={"prompts": prompt, "responses": response,
                     "attention_mask": torch.ones(1, prompt.shape[1] + response.shape[1], dtype=torch.long)},
            non_tensors={"data_source": np.array([DATA_SOURCES["gpqa_diamond"]], dtype=object),
                         "reward_model": np.array([{"ground_truth": "B"}], dtype=object),
                         "extra_info": np.array([{}], dtype=object),
                         "tool_extra_fields": np.array([{"turn_scores": []}], dtype=object)},
        )  # fmt: skip

    right = manager.loop.run_until_complete(manager.run_single(row("Answer: B")))
    wrong = manager.loop.run_until_complete(manager.run_single(row("Answer: C")))
    assert right["reward_score"] == 1.0 and wrong["reward_score"] == 0.0
