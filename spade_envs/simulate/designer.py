"""The designer stand-in (a learning policy over difficulty per skill) and the fixed-pool baseline.

Designer model, per skill ``k`` (``lambda``, learning rates and bounds are fields of
:class:`~spade_envs.simulate.config.SimulationConfig`):

- The curriculum picks the skill of each design (the active skills in turn). The designer writes invalid code
  with probability ``q_k = sigmoid(theta_k)`` (such a program has no difficulty; it gets a failure code drawn
  uniformly from :data:`INVALID_CODES` and :func:`~spade_envs.design.rewards.failure_penalty` as its reward);
  otherwise it picks a difficulty ``x ~ N(m, s_k^2)`` around a proposal mean
  ``m = (1 - lambda) mu_k + lambda * mean(exemplar difficulties)`` (``m = mu_k`` without positive exemplars;
  ``lambda = exemplar_pull``).
- In the step that made them, each sample has its designer reward (from :mod:`spade_envs.design.rewards`) and its
  advantage ``A`` from :func:`~spade_envs.design.rewards.designer_advantages` (reward minus its skill's batch mean,
  scale 1). Per skill, policy-gradient steps in natural-gradient form: over the skill's valid samples,
  ``mu_k += lr_mu * mean(A (x - m))`` and ``log s_k += lr_s * mean(A ((x - m)^2 / s_k^2 - 1)) / 2`` (then
  clipped to ``[designer_min_std, designer_max_std]``); over all its samples,
  ``theta_k += lr_q * mean(A (invalid - q_k))``. Invalid samples score below their skill's mean, so ``q_k``
  falls as the designer learns. The exemplar pull is treated as context, not as a parameter (``x - m`` is the
  score of ``mu_k``).

Fixed-pool baseline: ``fixed_pool_size`` envs with difficulties ``fixed_mean + fixed_std * N(0, 1)`` (skills
cycling), drawn once per seed; as the recipe's fixed-environment baseline, they are the live envs of the whole run
(no designer).
"""

from __future__ import annotations

import math

import numpy as np

from spade_envs.envs.spec import EnvSpec
from spade_envs.simulate.config import SimulationConfig

__all__ = ["INVALID_CODES", "FixedPool", "GaussianDesigner", "sim_spec"]

#: Failure codes an invalid simulated design is given (uniformly): parse and run errors, an unreplayable
#: solution, a hang. Their penalties come from ``RewardConfig.penalties``.
INVALID_CODES = ("syntax_error", "exec_error", "solution_does_not_win", "timeout")


def sim_spec(env_id: str, index: int, skill: str, difficulty: float, step: int, kind: str = "Sim") -> EnvSpec:
    """A real :class:`EnvSpec` for a simulated env: a tiny source, unique by its class name and constants.

    ``kind`` starts the class name (``Builtin`` for the stand-ins of the built-in envs).

    The memory deduplicates by normalised AST hash, which keeps class names and constants, so two simulated
    envs never merge while the same pool env re-entering memory is recognised as a duplicate.
    """
    source = f"# sim env {index}: {skill}\nclass {kind}{index}Env:\n    difficulty = {difficulty!r}\n"
    return EnvSpec(env_id, "games", skill, source, created_step=step, metadata={"difficulty": difficulty})


def _sigmoid(x: np.ndarray) -> np.ndarray:
    return 0.5 * (1.0 + np.tanh(0.5 * x))


class GaussianDesigner:
    """Per-skill Gaussian over difficulty plus an invalid-code logit, trained by the rewards code's advantages."""

    def __init__(self, config: SimulationConfig) -> None:
        n = len(config.skills)
        self.config = config
        self.mean = np.full(n, float(config.designer_init_mean))
        self.log_std = np.full(n, math.log(config.designer_init_std))
        rate = config.invalid_rate
        self.invalid_logit = np.full(n, -math.inf if rate == 0.0 else math.log(rate / (1.0 - rate)))

    @property
    def std(self) -> np.ndarray:
        return np.exp(self.log_std)

    @property
    def invalid_propensity(self) -> np.ndarray:
        """``q_k``, the probability of writing invalid code, per skill."""
        return _sigmoid(self.invalid_logit)

    def proposal_mean(self, skills: np.ndarray, anchors: np.ndarray) -> np.ndarray:
        """``m`` per slot; ``anchors`` holds each slot's mean exemplar difficulty, NaN where it has none."""
        skills, anchors = np.asarray(skills, dtype=int), np.asarray(anchors, dtype=float)
        pull = self.config.exemplar_pull
        mu = self.mean[skills]
        return np.where(np.isnan(anchors), mu, (1.0 - pull) * mu + pull * np.nan_to_num(anchors))

    def propose(
        self, skills: np.ndarray, anchors: np.ndarray, rng: np.random.Generator
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, list[str | None]]:
        """Difficulties (NaN for invalid code), proposal means, invalid flags and failure codes, per slot."""
        skills = np.asarray(skills, dtype=int)
        means = self.proposal_mean(skills, anchors)
        invalid = rng.random(skills.size) < self.invalid_propensity[skills]
        difficulty = np.where(invalid, np.nan, means + self.std[skills] * rng.standard_normal(skills.size))
        picks = rng.integers(0, len(INVALID_CODES), skills.size)
        codes = [INVALID_CODES[p] if bad else None for p, bad in zip(picks, invalid)]
        return difficulty, means, invalid, codes

    def update(
        self,
        skills: np.ndarray,
        difficulty: np.ndarray,
        means: np.ndarray,
        invalid: np.ndarray,
        advantages: np.ndarray,
    ) -> None:
        """One policy-gradient step per skill from a closed batch (see the module docstring)."""
        c = self.config
        skills, adv = np.asarray(skills, dtype=int), np.asarray(advantages, dtype=float)
        invalid = np.asarray(invalid, dtype=bool)
        q = self.invalid_propensity[skills]
        valid = ~invalid
        dx = np.where(valid, np.asarray(difficulty, dtype=float) - np.asarray(means, dtype=float), 0.0)
        z2 = dx**2 / self.std[skills] ** 2

        def per_skill(values: np.ndarray, mask: np.ndarray) -> np.ndarray:
            counts = np.bincount(skills[mask], minlength=self.mean.size)
            total = np.bincount(skills[mask], weights=values[mask], minlength=self.mean.size).astype(float)
            return np.divide(total, counts, out=np.zeros_like(total), where=counts > 0)

        self.mean += c.designer_lr * per_skill(adv * dx, valid)
        self.log_std += c.designer_std_lr * per_skill(adv * (z2 - 1.0), valid) / 2.0
        self.log_std = np.clip(self.log_std, math.log(c.designer_min_std), math.log(c.designer_max_std))
        finite = np.isfinite(self.invalid_logit)
        step = c.validity_lr * per_skill(adv * (invalid - q), np.ones(skills.size, dtype=bool))
        self.invalid_logit = np.where(finite, self.invalid_logit + step, self.invalid_logit)


class FixedPool:
    """The baseline's static pool: difficulties drawn once; its envs are the seed (and live) envs of the run."""

    def __init__(self, config: SimulationConfig, rng: np.random.Generator) -> None:
        n, k = config.fixed_pool_size, len(config.skills)
        self.skills = np.arange(n) % k
        self.difficulty = config.fixed_mean + config.fixed_std * rng.standard_normal(n)
        self.specs = [
            sim_spec(f"pool{i}", i, config.skills[self.skills[i]], float(self.difficulty[i]), 0) for i in range(n)
        ]
