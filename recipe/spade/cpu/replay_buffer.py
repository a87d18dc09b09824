"""V1 replay buffer with a configurable poll interval, plugged in through verl's own custom-sampler config.

verl's V1 ``ReplayBuffer`` sleeps ``poll_interval`` (2 s by default) between polls for finished rollouts; on a
tiny CPU model that sleep is most of a training step. ``trainer.v1.sampler.custom_sampler`` lets a config name a
subclass, which then receives ``trainer.v1.sampler.sampler_kwargs``; this one reads its poll interval and batch
sizes from there. DAPO group filtering is not wired through this path (it is off in the CPU preset).
"""

from __future__ import annotations

from typing import Any

from verl.trainer.ppo.v1.replay_buffer import ReplayBuffer

__all__ = ["FastPollReplayBuffer"]


class FastPollReplayBuffer(ReplayBuffer):
    """``ReplayBuffer`` whose ``poll_interval`` and ``train_batch_size`` come from ``sampler_kwargs``."""

    def __init__(self, *, sampler_kwargs: Any, **kwargs: Any) -> None:
        options = dict(sampler_kwargs or {})
        unknown = sorted(set(options) - {"poll_interval", "train_batch_size"})
        if unknown:
            raise ValueError(
                f"unknown sampler_kwargs {unknown}; FastPollReplayBuffer reads poll_interval, train_batch_size"
            )
        if "train_batch_size" not in options:
            raise ValueError(
                "FastPollReplayBuffer needs sampler_kwargs.train_batch_size (set it to data.train_batch_size)"
            )
        batch = int(options["train_batch_size"])
        super().__init__(
            sampler_kwargs=sampler_kwargs,
            poll_interval=float(options.get("poll_interval", 0.05)),
            train_batch_size=batch,
            gen_batch_size=batch,
            **kwargs,
        )
