"""Paired, stratified, studentized bootstrap intervals for a difference of two runs' scores.

The delta of a suite is a weighted sum of per-stratum mean item differences (``run - base``, each item's samples
averaged): BFCL weighs its categories, ACEBench its kinds, every other suite is one stratum. Items are drawn with
replacement within each stratum, the same draw for both runs (paired). The interval is the symmetric bootstrap-t
(Hall 1988): the 95th percentile of ``|delta* - delta| / se*`` over the draws, times the observed standard error.
Percentile intervals undercover on suites of 9 to 30 items (measured 0.88 at 9 items); the coverage test in
``tests/spade_envs/evaluation/test_bootstrap.py`` checks this one at 9, 30 and 198 items. Vectorised with numpy:
a batch of independent difference vectors (the coverage simulation) is bootstrapped in one call.

A table of many rows needs more than per-row intervals: with twelve rows and no real difference, 44% of tables
show some row whose 95% interval excludes zero (review 3's simulation). :meth:`Bootstrap.p_value` is the same
bootstrap-t's p-value of "no difference", and :func:`holm` adjusts a table's p-values so that a row below 0.05
differs at a family-wise 5% level (Holm 1979; valid whatever the rows' dependence, as the average's on its parts).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

__all__ = ["Bootstrap", "holm", "mean_of", "stratified_bootstrap"]

_TINY = 1e-12


@dataclass(frozen=True)
class Bootstrap:
    """A delta, its standard error and its bootstrap draws; arrays have a leading batch axis when batched."""

    delta: np.ndarray
    se: np.ndarray
    draws: np.ndarray
    draw_se: np.ndarray

    def _t_draws(self) -> np.ndarray:
        """``|delta* - delta| / se*`` per draw."""
        gap = np.abs(self.draws - self.delta[..., None])
        # a draw of identical items has no spread: no deviation (t 0) or an unbounded one (t inf, conservative)
        return np.where(self.draw_se > _TINY, gap / np.maximum(self.draw_se, _TINY), np.where(gap > _TINY, np.inf, 0.0))

    def interval(self, level: float = 0.95) -> tuple[np.ndarray, np.ndarray]:
        """Symmetric bootstrap-t interval, clipped to [-1, 1]; a delta without spread (all items agree) is a point."""
        t = self._t_draws()
        half = np.where(self.se > _TINY, np.quantile(t, level, axis=-1, method="higher") * self.se, 0.0)
        return np.clip(self.delta - half, -1.0, 1.0), np.clip(self.delta + half, -1.0, 1.0)

    def p_value(self) -> np.ndarray:
        """Two-sided p-value of "no difference": the share of draws whose t is at least the observed ``|delta|/se``.

        Counted as ``(1 + hits) / (1 + draws)``, so never 0; the interval excludes zero about when this is below
        ``1 - level``. A delta without spread is certain: p 1 when it is 0, the smallest p otherwise.
        """
        observed = np.where(self.se > _TINY, np.abs(self.delta) / np.maximum(self.se, _TINY),
                            np.where(np.abs(self.delta) > _TINY, np.inf, 0.0))  # fmt: skip
        hits = (self._t_draws() >= observed[..., None]).sum(axis=-1)
        return (1.0 + hits) / (1.0 + self.draws.shape[-1])


def stratified_bootstrap(
    diffs: Sequence[np.ndarray], weights: Sequence[float], *, draws: int = 1000, seed: int = 0
) -> Bootstrap:
    """Bootstrap ``sum_s weights[s] * mean(diffs[s])``.

    A draw is a multinomial count per item (resampling with replacement), so each draw's mean and variance are
    matrix products: fast enough to bootstrap thousands of simulated suites at once.

    Args:
        diffs: per stratum, the item differences, shape ``(n_s,)`` or ``(batch, n_s)`` (the same batch for all).
        weights: per stratum, its weight in the suite's score (one stratum of weight 1 for a plain mean; BFCL
            non-live weighs a simple-Python item's category 1/12 and irrelevance 0).
        draws: bootstrap draws.
        seed: seeds the draws, so a table is reproducible.
    """
    if len(diffs) != len(weights) or not diffs:
        raise ValueError("give one weight per stratum, and at least one stratum")
    rng = np.random.default_rng(seed)
    batch = np.asarray(diffs[0]).shape[:-1]
    delta, var = np.zeros(batch), np.zeros(batch)
    boot, boot_var = np.zeros((*batch, draws)), np.zeros((*batch, draws))
    for d, w in zip(diffs, weights):
        d = np.asarray(d, dtype=float)
        n = d.shape[-1]
        counts = rng.multinomial(n, np.full(n, 1.0 / n), size=draws).T.astype(float)  # (n, draws)
        mean, total_sq = d.mean(axis=-1), (d * d).sum(axis=-1)
        m, m_sq = d @ counts / n, (d * d) @ counts
        spread = n - 1 if n > 1 else 1  # a single item has no spread: its variance terms are 0
        delta = delta + w * mean
        var = var + w * w * np.maximum(total_sq - n * mean**2, 0.0) / spread / n
        boot = boot + w * m
        boot_var = boot_var + w * w * np.maximum(m_sq - n * m**2, 0.0) / spread / n
    return Bootstrap(delta, np.sqrt(var), boot, np.sqrt(boot_var))


def mean_of(parts: Sequence[Bootstrap]) -> Bootstrap:
    """The bootstrap of the mean of independent deltas (the table's average), draw by draw."""
    k = len(parts)
    return Bootstrap(sum(p.delta for p in parts) / k, np.sqrt(sum(p.se**2 for p in parts)) / k,
                     sum(p.draws for p in parts) / k, np.sqrt(sum(p.draw_se**2 for p in parts)) / k)  # fmt: skip


def holm(p_values: Sequence[float]) -> list[float]:
    """Holm's step-down adjusted p-values, in the given order.

    A row whose adjusted p is below ``alpha`` is a difference at family-wise level ``alpha`` over all the rows given.
    """
    order = sorted(range(len(p_values)), key=lambda i: p_values[i])
    adjusted = [0.0] * len(p_values)
    running = 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (len(p_values) - rank) * p_values[i]))
        adjusted[i] = running
    return adjusted
