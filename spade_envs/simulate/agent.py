"""The agent stand-in: an ability per skill, a parametric outcome model, and learning from outcome variance.

Model (all quantities in one "difficulty unit"; ``T``, ``eps``, ``D``, ``kappa``, ``H``, ``beta``, ``eta`` are
fields of :class:`~spade_envs.simulate.config.SimulationConfig`):

- An env has a difficulty ``d`` and a skill ``k``; an instance (a seed) has difficulty ``d_i = d + sigma * z_i``
  with ``z_i ~ N(0, 1)`` (``sigma = instance_noise``). The agent's effective ability is ``e = a_k`` without the
  hint and ``e = a_k + H`` with it (the hint's bounded help), and ``x = e - d_i`` is the gap.
- Win probability: ``p(x) = clip((sigmoid(x / T) - eps) / (1 - 2 eps), 0, 1)``, a logistic rescaled to reach
  exactly 0 at ``x = -r`` and 1 at ``x = r`` with ``r = T ln((1 - eps) / eps)`` (``SimulationConfig.reach``).
  So an instance harder than ``a_k + H + r`` is unsolvable even with the hint.
- A lost episode still earns partial credit ``kappa * pi``: progress ``pi(x) = clip(1 + x / D, 0, 1)`` without
  the hint, and ``pi_h = pi(x) + beta (1 - pi(x))`` with it (a hint explains part of what the agent had not
  worked out, winnable or not). The outcome is 1 on a win, else ``kappa * pi``, so it lies in [0, 1]; its
  expectation is ``p + (1 - p) kappa pi``.
- Learning (GRPO needs outcome differences within a group: a group of identical outcomes has zero advantage):
  each step the agent's update budget is shared by the batch's groups (an agent row: ``G`` no-hint plays of one env),
  ``a_k <- a_k + eta * sum_{groups g of skill k} var(g) / n_groups``. Ability thus grows with what the agent
  plays, fastest on envs it sometimes wins and sometimes loses, and not at all on envs it always wins or whose
  outcomes never differ. Hinted plays only measure and never train, as in training.
"""

from __future__ import annotations

import numpy as np

from spade_envs.simulate.config import SimulationConfig

__all__ = ["Agent", "expected_outcome", "progress", "win_probability"]


def win_probability(gap: np.ndarray, temperature: float, floor: float) -> np.ndarray:
    """``p(x)``: the rescaled logistic of the module docstring (exactly 0 beyond the reach)."""
    logistic = 0.5 * (1.0 + np.tanh(np.asarray(gap, dtype=float) / (2.0 * temperature)))  # sigmoid, no overflow
    return np.clip((logistic - floor) / (1.0 - 2.0 * floor), 0.0, 1.0)


def progress(gap: np.ndarray, span: float, hint_progress: float = 0.0) -> np.ndarray:
    """``pi(x)`` (``hint_progress = 0``) or ``pi_h`` (``hint_progress = beta``): progress on a lost episode."""
    base = np.clip(1.0 + np.asarray(gap, dtype=float) / span, 0.0, 1.0)
    return base + hint_progress * (1.0 - base)


def expected_outcome(gap: np.ndarray, config: SimulationConfig, hinted: bool = False) -> np.ndarray:
    """``p + (1 - p) kappa pi`` at gap ``x`` (the hint's ``H`` is added here when ``hinted``)."""
    x = np.asarray(gap, dtype=float) + (config.hint_strength if hinted else 0.0)
    p = win_probability(x, config.temperature, config.win_floor)
    pi = progress(x, config.progress_span, config.hint_progress if hinted else 0.0)
    return p + (1.0 - p) * config.partial_credit * pi


class Agent:
    """Abilities per skill; plays instances and learns from the no-hint groups of each step."""

    def __init__(self, config: SimulationConfig, ability: np.ndarray) -> None:
        ability = np.asarray(ability, dtype=float)
        if ability.shape != (len(config.skills),) or not np.all(np.isfinite(ability)):
            raise ValueError(f"need one finite ability per skill ({len(config.skills)}), got {ability!r}")
        self.config = config
        self.ability = ability.copy()

    @classmethod
    def initial(cls, config: SimulationConfig, rng: np.random.Generator) -> Agent:
        """Starting abilities ``initial_ability + ability_spread * N(0, 1)`` per skill."""
        spread = config.ability_spread * rng.standard_normal(len(config.skills))
        return cls(config, config.initial_ability + spread)

    def gap(self, skills: np.ndarray, instance_difficulty: np.ndarray) -> np.ndarray:
        """``a_k - d_i`` for an ``(n,)`` array of skill indices and ``(n, G)`` instance difficulties."""
        return self.ability[np.asarray(skills)][:, None] - np.asarray(instance_difficulty, dtype=float)

    def expected(self, skills: np.ndarray, instance_difficulty: np.ndarray, hinted: bool = False) -> np.ndarray:
        """Expected outcome of each instance, ``(n, G)``."""
        return expected_outcome(self.gap(skills, instance_difficulty), self.config, hinted)

    def play(
        self, skills: np.ndarray, instance_difficulty: np.ndarray, hinted: bool, rng: np.random.Generator
    ) -> np.ndarray:
        """One episode per instance: 1.0 on a win (probability ``p``), else ``kappa * pi``; shape ``(n, G)``."""
        c = self.config
        x = self.gap(skills, instance_difficulty) + (c.hint_strength if hinted else 0.0)
        won = rng.random(x.shape) < win_probability(x, c.temperature, c.win_floor)
        partial = c.partial_credit * progress(x, c.progress_span, c.hint_progress if hinted else 0.0)
        return np.where(won, 1.0, partial)

    def learn(self, skills: np.ndarray, outcomes: np.ndarray) -> np.ndarray:
        """Apply one step's update from the no-hint groups (rows of ``outcomes``); returns the ability gain."""
        skills = np.asarray(skills, dtype=int)
        outcomes = np.asarray(outcomes, dtype=float)
        if outcomes.ndim != 2 or outcomes.shape[0] != skills.size:
            raise ValueError(f"need one row of outcomes per group, got {outcomes.shape} for {skills.size} groups")
        gain = np.zeros_like(self.ability)
        if skills.size:
            np.add.at(gain, skills, outcomes.var(axis=1))
            gain *= self.config.agent_lr / skills.size
        self.ability += gain
        return gain
