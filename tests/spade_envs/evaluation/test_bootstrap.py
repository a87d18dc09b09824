"""The compare table's 95% intervals cover: a simulation with a known delta at the paper's suite sizes."""

from __future__ import annotations

import numpy as np
import pytest

from spade_envs.evaluation.bootstrap import mean_of, stratified_bootstrap
from spade_envs.evaluation.compare import paired_bootstrap
from spade_envs.evaluation.records import SampleRecord

SHIFT = 0.05  # the trained model's mean gain per item, before clipping to [0, 1]


def _suites(rng: np.random.Generator, replicates: int, items: int, samples: int) -> np.ndarray:
    """Per replicate, per item: run minus base accuracy over ``samples`` Bernoulli samples each.

    Item accuracies are drawn from a population (Beta(0.7, 0.9), many items near 0 or 1, as on AIME), and the
    trained model's accuracy is the base's plus N(SHIFT, 0.15), clipped: items are a draw from a population, which
    is what a bootstrap over items estimates.
    """
    p = rng.beta(0.7, 0.9, (replicates, items))
    q = np.clip(p + rng.normal(SHIFT, 0.15, (replicates, items)), 0.0, 1.0)
    return rng.binomial(samples, q) / samples - rng.binomial(samples, p) / samples


@pytest.mark.parametrize(("items", "samples", "replicates", "draws"), [
    (9, 8, 2000, 1000),  # RG-Logic: 9 tasks x 8 episodes
    (30, 64, 1000, 1000),  # AIME: 30 problems x 64 samples
    (198, 8, 1000, 500),  # GPQA-Diamond: 198 questions x 8 samples
])  # fmt: skip
def test_the_interval_covers_a_known_delta_at_the_papers_suite_sizes(items, samples, replicates, draws):
    rng = np.random.default_rng(20261202)
    population = rng.beta(0.7, 0.9, 400_000)
    truth = float(np.mean(np.clip(population + rng.normal(SHIFT, 0.15, population.size), 0, 1) - population))
    covered = 0
    for chunk in range(replicates // 500 or 1):
        diffs = _suites(rng, min(500, replicates), items, samples)
        low, high = stratified_bootstrap([diffs], [1.0], draws=draws, seed=chunk).interval()
        covered += int(np.sum((low <= truth) & (truth <= high)))
    assert 0.93 <= covered / replicates <= 0.97


def test_the_average_combines_the_suites_draw_by_draw_and_covers_as_well():
    rng = np.random.default_rng(7)
    population = rng.beta(0.7, 0.9, 400_000)
    truth = float(np.mean(np.clip(population + rng.normal(SHIFT, 0.15, population.size), 0, 1) - population))
    parts = [stratified_bootstrap([_suites(rng, 1000, n, 8)], [1.0], draws=1000, seed=k)
             for k, n in enumerate((9, 24, 30, 31))]  # fmt: skip
    low, high = mean_of(parts).interval()
    assert 0.93 <= float(np.mean((low <= truth) & (truth <= high))) <= 0.97


def test_a_stratified_suite_follows_its_own_weights():
    """BFCL non-live-like: two categories weighted 3:1 and a zero-weight one; the delta is the weighted one."""
    base, run = {}, {}
    for category, n, right_before, right_after in (("a", 4, 0, 4), ("b", 4, 0, 0), ("irrelevance", 4, 4, 0)):
        for i in range(n):
            key = (f"{category}{i}", 0)
            base[key] = SampleRecord("s", key[0], 0, float(i < right_before), detail={"category": category})
            run[key] = SampleRecord("s", key[0], 0, float(i < right_after), detail={"category": category})

    def weighted(records):
        means = {}
        for r in records:
            means.setdefault(r.detail["category"], []).append(r.score)
        return {"score": 0.75 * np.mean(means["a"]) + 0.25 * np.mean(means["b"])}

    delta, boot, n = paired_bootstrap(base, run, weighted, draws=200, seed=1)
    assert n == 12 and delta == pytest.approx(0.75) and float(boot.delta) == pytest.approx(0.75)
    assert boot.interval() == (pytest.approx(0.75), pytest.approx(0.75))  # every item of a category moved alike


def test_percentile_intervals_would_undercover_at_nine_items():
    """The check has teeth: the percentile interval of the same draws (the old rule) covers about 0.88 here."""
    rng = np.random.default_rng(20261202)
    population = rng.beta(0.7, 0.9, 400_000)
    truth = float(np.mean(np.clip(population + rng.normal(SHIFT, 0.15, population.size), 0, 1) - population))
    boot = stratified_bootstrap([_suites(rng, 2000, 9, 8)], [1.0], draws=1000, seed=0)
    low, high = np.quantile(boot.draws, 0.025, axis=-1), np.quantile(boot.draws, 0.975, axis=-1)
    assert float(np.mean((low <= truth) & (truth <= high))) < 0.91
