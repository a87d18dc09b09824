"""Training on per-turn samples (``spade.agent.thinking``): mini-batches and loss weights for a variable row count.

In thinking mode an agent episode is as many training rows as it has turns, so a step's row count varies. verl 0.9.1
sizes the update from the config alone: ``PPOTrainer._update_actor`` gives the actor mini-batches of
``actor.ppo_mini_batch_size x rollout.n`` rows and uses that number as the seq-mean denominator, and
``_balance_batch`` pads the batch to a multiple of it. Left alone, ten turns per episode would mean ten times the
optimizer steps, each a tenth of the intended size. SPADE's trainer instead keeps what a step does fixed:

* **optimizer steps**: ``k = data.train_batch_size / actor.ppo_mini_batch_size`` per epoch in both modes; the step's
  rows are padded (verl's own no-op padding rows) to a multiple of ``k x lcm(dp, n, dp x micro-batch sizes)`` and
  split into ``k`` equal mini-batches (the shuffle of ``actor.shuffle`` may put an episode's turns into different
  mini-batches of the step; over the step each episode counts once);
* **loss weight per episode**: under ``actor.loss_agg_mode`` ``token-mean`` / ``token-sum`` (verl's default) an
  episode's trained tokens weigh exactly what the same tokens weigh in one growing sequence, so no weight is needed.
  Under the ``seq-mean-*`` modes each row is a sequence, so every token of a turn sample gets the weight
  ``rows per mini-batch / (episodes per mini-batch x turns of its episode)`` (``rollout_is_weights``, which verl's
  policy loss multiplies in): an episode's turns sum to one sequence, as many episodes per mini-batch as without
  thinking. The KL-loss and entropy terms read no weight: there a turn sample counts as a sequence of its own.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

__all__ = ["batch_multiple", "check_thinking_config", "is_episode_row", "loss_weights", "mini_batches"]

#: loss_agg_mode values that average over sequences (rows), where per-turn rows need a weight
SEQ_MEAN_MODES = ("seq-mean-token-mean", "seq-mean-token-sum", "seq-mean-token-sum-norm")


def is_episode_row(extra: Mapping[str, Any]) -> bool:
    """Whether a row stands for its episode: the last turn sample, or any sample outside thinking mode."""
    turns = extra.get("spade_turns")
    return turns is None or extra.get("spade_turn") == int(turns) - 1


def mini_batches(config: Any) -> int:
    """Optimizer steps per step and epoch, the same as without thinking: train_batch_size / ppo_mini_batch_size."""
    rows, mini = int(config.data.train_batch_size), int(config.actor_rollout_ref.actor.ppo_mini_batch_size)
    if mini < 1 or rows % mini:
        raise ValueError(
            f"spade.agent.thinking needs data.train_batch_size ({rows}) to be a multiple of "
            f"actor_rollout_ref.actor.ppo_mini_batch_size ({mini}): a step keeps that many optimizer steps"
        )
    return rows // mini


def batch_multiple(dp_size: int, k: int, n: int, micro_sizes: Sequence[int | None] = ()) -> int:
    """Rows a step's batch is padded to a multiple of: ``k`` mini-batches that split over dp ranks and micro-batches.

    A mini-batch must be a multiple of ``n`` too, since verl derives its size from ``ppo_mini_batch_size x n``.
    """
    unit = math.lcm(dp_size, n, *(dp_size * m for m in micro_sizes if m))
    return k * unit


def loss_weights(turns: Sequence[int], loss_agg_mode: str, rows_per_mini_batch: int, episodes: int) -> list[float]:
    """Per-row loss weight: each episode's turns together count as one sequence (see the module docstring).

    ``turns`` holds each row's episode length (1 for designer, padding and non-thinking rows); ``episodes`` is the
    number of episodes (and designer samples) a mini-batch stands for, ``ppo_mini_batch_size x n``.
    """
    if loss_agg_mode not in SEQ_MEAN_MODES:
        return [1.0] * len(turns)
    return [rows_per_mini_batch / (episodes * max(1, int(t))) for t in turns]


def check_thinking_config(config: Any) -> None:
    """Refuse thinking-mode settings that cannot work, before Ray starts (``ValueError`` naming the keys)."""
    if not config.spade.agent.get("thinking"):
        return
    if config.algorithm.adv_estimator != "grpo":
        raise ValueError(
            f"spade.agent.thinking=true needs algorithm.adv_estimator=grpo, got {config.algorithm.adv_estimator!r}: "
            "only verl's grpo scores an episode by its last turn sample (compute_advantage_for_multi_trajectories); "
            "any other estimator would treat every turn as an episode of its own"
        )
    if config.algorithm.get("use_kl_in_reward"):
        raise ValueError(
            "spade.agent.thinking=true cannot use algorithm.use_kl_in_reward=true: verl's grpo scores an episode by "
            "its last turn sample's token_level_rewards, so only the last turn's KL penalty would count; use "
            "actor_rollout_ref.actor.use_kl_loss instead"
        )
    rollout_rs = (config.algorithm.get("rollout_correction") or {}).get("rollout_rs")
    if rollout_rs:
        raise ValueError(
            f"spade.agent.thinking=true cannot use algorithm.rollout_correction.rollout_rs={rollout_rs!r}: rejection "
            "sampling masks single turn samples, and a rejected last turn would give its whole episode advantage 0 "
            "while its score stays in the group baseline; leave rollout_rs unset (null)"
        )
    sync_step = int(((config.trainer.get("v1") or {}).get("sync") or {}).get("parameter_sync_step", 1) or 1)
    if sync_step > 1:
        raise ValueError(
            f"spade.agent.thinking=true needs trainer.v1.sync.parameter_sync_step=1, got {sync_step}: each update "
            "would see train_batch_size / parameter_sync_step prompts, while the mini-batch count and the turn "
            "weights assume the whole train_batch_size"
        )
    mini_batches(config)
    actor = config.actor_rollout_ref.actor
    if actor.loss_agg_mode not in (*SEQ_MEAN_MODES, "token-mean", "token-sum"):
        raise ValueError(f"unknown actor_rollout_ref.actor.loss_agg_mode {actor.loss_agg_mode!r}")
    loss_mode = (actor.get("policy_loss") or {}).get("loss_mode", "vanilla")
    if actor.loss_agg_mode in SEQ_MEAN_MODES and loss_mode == "bypass_mode":
        raise ValueError(
            "spade.agent.thinking=true with a seq-mean loss weighs turn samples through rollout_is_weights, which "
            "actor_rollout_ref.actor.policy_loss.loss_mode=bypass_mode ignores: use another loss mode or token-mean"
        )
