"""SPADE's dual-role reward manager, on verl 0.9.1's reward loop (``verl.experimental.reward_loop``).

Selected by ``reward.reward_manager`` (``source: importlib``, ``module.path: pkg://recipe.spade.reward_manager``,
``name: SpadeRewardManager``) and also registered as ``spade``. verl's reward-loop workers call it once per
trajectory, streaming, as each agent loop finishes. The loops do not score themselves: they report what happened
in ``extra_fields`` and this manager turns it into the reward, so every reward setting lives under ``reward.*``:

* agent samples (``spade_role == "agent"``): the episode outcome in [0, 1]; an env fault scores 0 (its tokens are
  masked out of the loss by the loop anyway);
* designer samples: the configured designer reward (``reward.reward_kwargs.designer``, :class:`RewardConfig`) from
  the paired no-hint / hint measurement plays, or the negative penalty of the failure code when the candidate was
  rejected or broke during play;
* anything else (validation rows of held-out benchmarks, ``trainer.test_freq``): verl's ``naive`` manager with
  ``reward.custom_reward_function`` (e.g. ``spade_envs/evaluation/verl_data.py``), exactly as without SPADE.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from omegaconf import OmegaConf
from verl import DataProto
from verl.experimental.reward_loop.reward_manager import register
from verl.experimental.reward_loop.reward_manager.base import RewardManagerBase
from verl.experimental.reward_loop.reward_manager.naive import NaiveRewardManager

from spade_envs.design.rewards import RewardConfig, SkillEMA, WindowStats, designer_reward, failure_penalty

__all__ = ["SpadeRewardManager", "designer_reward_config", "score_sample"]


def designer_reward_config(config: Any) -> RewardConfig:
    """``reward.reward_kwargs.designer`` of the trainer config as a checked :class:`RewardConfig`."""
    designer = (config.reward.get("reward_kwargs") or {}).get("designer")
    data = OmegaConf.to_container(designer, resolve=True) if OmegaConf.is_config(designer) else designer
    return RewardConfig.from_dict(data)


def score_sample(cfg: RewardConfig, fields: Mapping[str, Any]) -> tuple[float, dict[str, Any]]:
    """The reward of one sample from the ``extra_fields`` its SPADE loop wrote, and (numeric) extra info."""
    role = fields.get("spade_role")
    if role == "agent":
        fault = fields.get("spade_env_fault") or ""
        outcome = 0.0 if fault else float(fields["spade_outcome"])
        return outcome, {"spade_is_designer": 0.0}
    if role != "designer":
        raise ValueError(f"not a SPADE sample: extra_fields['spade_role'] is {role!r} (expected agent or designer)")
    failure = fields.get("spade_failure") or ""
    if failure:
        return failure_penalty(cfg, failure), {"spade_is_designer": 1.0}
    m = fields["spade_measure"]
    hinted = list(m["hint"])
    window = WindowStats(skill=fields["spade_skill"], outcomes=m["no_hint"],
                         paired_no_hint=m["no_hint"] if hinted else (), paired_hint=hinted,
                         seeds_no_hint=m["seeds"] if hinted else (), seeds_hint=m["seeds"] if hinted else (),
                         hint_failure=m.get("hint_failure") or None,
                         paired_placebo=m.get("placebo") or ())  # fmt: skip
    slow = m.get("lp_slow")  # the skill's slow EMA when the design was made (env pool), for learning_potential
    ema = SkillEMA(cfg.lp_slow_ema, {fields["spade_skill"]: slow} if slow is not None else None)
    return designer_reward(cfg, window, ema), {"spade_is_designer": 1.0}


@register("spade")
class SpadeRewardManager(RewardManagerBase):
    """Agent reward = outcome; designer reward = hint-based regret blend (or a penalty). See module docstring."""

    def __init__(self, config: Any, tokenizer: Any, compute_score: Any = None, **kwargs: Any) -> None:
        super().__init__(config, tokenizer, compute_score)
        self.designer = designer_reward_config(config)
        self.others = NaiveRewardManager(config, tokenizer, compute_score, **kwargs)

    async def run_single(self, data: DataProto) -> dict:
        extra = data.non_tensor_batch.get("tool_extra_fields")
        fields = extra[-1] if extra is not None else {}
        if not isinstance(fields, Mapping) or "spade_role" not in fields:
            return await self.others.run_single(data)
        reward, info = score_sample(self.designer, fields)
        return {"reward_score": float(reward), "reward_extra_info": info}
