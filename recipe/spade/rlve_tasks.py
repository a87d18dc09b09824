"""The RLVE baseline's agent tasks: RLVE's verifiable environments at RLVE's adaptive difficulty (the paper's baseline).

Used by the env pool when ``spade.fixed_env.rlve.enable`` is set (``spade.fixed_env.enable`` too: no designer rows).
Each agent row of a step is one RLVE environment at one difficulty and one seed, so its ``rollout.n`` plays are one
GRPO group on one instance (the paper: 16 envs x 16 plays per step). Every play's win (RLVE's passing threshold,
outcome 1) feeds RLVE's sliding window (``spade_envs.rlve.SlidingWindow``), whose state lives in the pool's
checkpoint and whose per-env upper bounds are step metrics.
"""

from __future__ import annotations

import random
from typing import Any

from spade_envs.rlve import RLVEEnvSet, SlidingWindow, SlidingWindowConfig

__all__ = ["RLVETasks"]


class RLVETasks:
    """Agent tasks over an RLVE set; ``rlve`` is the ``spade.fixed_env.rlve`` block."""

    def __init__(self, rlve: dict[str, Any], run_seed: int) -> None:
        self.envs = RLVEEnvSet.from_names(rlve["envs"], generate_timeout_s=int(rlve["generate_timeout_s"]))
        self.window = SlidingWindow(self.envs.env_ids, SlidingWindowConfig.from_dict(rlve["window"]))
        self.run_seed = run_seed

    def agent_task(self, step: int, slot: int) -> dict[str, Any]:
        """Row ``slot`` of ``step``: envs in turn (all of a small set every step), difficulty drawn from its window."""
        env_id = self.envs.env_ids[(step * 7919 + slot) % len(self.envs)]
        rng = random.Random(f"{self.run_seed}:rlve:{step}:{slot}")
        instance = self.envs.instance(env_id, self.window.sample(env_id, rng), seed=rng.randrange(2**31))
        spec = instance.spec()
        return {"env_id": spec.env_id, "source": instance.source, "setting": spec.setting, "seed": instance.seed,
                "skill": env_id, "step": step, "rlve_env": env_id, "difficulty": instance.difficulty}  # fmt: skip

    def record(self, task: dict[str, Any], outcome: float, fault: str | None) -> None:
        """One play finished: a healthy play is one attempt at its difficulty (a win when RLVE's verifier passed)."""
        if fault is None:
            self.window.record(task["rlve_env"], task["difficulty"], successes=int(outcome >= 1.0), attempts=1)

    def metrics(self) -> dict[str, float]:
        return self.window.metrics()

    def state_dict(self) -> dict[str, Any]:
        return self.window.state_dict()

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.window.load_state_dict(state)
