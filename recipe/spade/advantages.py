"""Per-role advantages for SPADE's mixed batch (pure tensors: the trainer fetches and stores them).

Agent samples keep verl's estimator (GRPO over the ``rollout.n`` plays of one env instance and seed). Designer
samples are re-scored: reward minus the mean reward of designer samples of the same skill in the batch (of all
designer samples, for a skill with one design), no std division, times a scale, so that the few designer samples are
not drowned by the many agent samples.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

from spade_envs.design.rewards import designer_advantages, designer_scale

__all__ = ["designer_scale_for", "role_advantages", "step_designer_scale"]


def designer_scale_for(setting: Any, n_agent: int, n_designer: int, regen_every: int, cap: float) -> float:
    """``spade.advantage.designer_scale``: a positive number, or ``auto`` (:func:`designer_scale`)."""
    if setting == "auto":
        return designer_scale(max(1, n_agent), max(1, n_designer), regen_every, cap)
    value = float(setting)
    if not value > 0:
        raise ValueError(f"spade.advantage.designer_scale must be 'auto' or a positive number, got {setting!r}")
    return value


def step_designer_scale(config: Any, n_designer: int) -> float:
    """The designer scale of a step with ``n_designer`` designer samples (trainer config: ``spade``, ``data``, ``n``).

    ``auto`` is the paper's min(cap, n_actor / n_env x regen_every), with n_actor the agent plays a step generates,
    ``data.train_batch_size x rollout.n`` (192 in the paper's runs: 192 / 24 x 4 = 32 for games, 50 for tool use), not
    the agent samples left in a regeneration step's batch (168), nor per-turn rows in thinking mode.
    """
    spade = config["spade"]
    n_actor = int(config["data"]["train_batch_size"]) * int(config["actor_rollout_ref"]["rollout"]["n"])
    advantage = spade["advantage"]
    return designer_scale_for(advantage["designer_scale"], n_actor, n_designer, int(spade["regen_every"]),
                              float(advantage["designer_scale_cap"]))  # fmt: skip


def role_advantages(
    advantages: torch.Tensor,
    response_mask: torch.Tensor,
    scores: Sequence[float],
    roles: Sequence[str],
    skills: Sequence[str],
    scale: float,
) -> torch.Tensor:
    """``advantages`` (rows x tokens) with every designer row replaced by its skill-centred, scaled reward.

    Agent rows (and anything not ``designer``) are returned unchanged; a designer row's advantage is the same on all
    of its response tokens and 0 where ``response_mask`` is 0.
    """
    if not len(scores) == len(roles) == len(skills) == advantages.shape[0]:
        raise ValueError(
            f"need one score, role and skill per row: {advantages.shape[0]} rows, {len(scores)} scores, "
            f"{len(roles)} roles, {len(skills)} skills"
        )
    rows = [i for i, role in enumerate(roles) if role == "designer"]
    out = advantages.clone()
    if not rows:
        return out
    values = designer_advantages([float(scores[i]) for i in rows], [skills[i] for i in rows], scale)
    for i, value in zip(rows, values):
        out[i] = value * response_mask[i].to(out.dtype)
    return out
