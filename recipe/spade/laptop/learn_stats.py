"""The statistics of ``make learn``: per-step win rates of two arms, their gap with a bootstrap interval, a figure.

Kept apart from the runners (``learn.py``, ``learn_spade.py``, which both take their thread settings from here) so
the arithmetic is tested without a trainer. A step's win rate comes with its number of plays
(``spade/solve/plays``), so the gap's interval resamples episodes, not steps: each arm's episodes of the last third
of the steps are resampled with replacement, within their step, and the difference of the two means is taken
``resamples`` times.
"""

from __future__ import annotations

import math
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

__all__ = ["Gap", "StepRate", "gap_over_last_third", "last_third", "thread_env", "write_figure"]


@dataclass(frozen=True)
class StepRate:
    """One step of one arm: wins out of plays, and the step's seconds."""

    step: int
    wins: int
    plays: int
    seconds: float

    @property
    def rate(self) -> float:
        return self.wins / self.plays if self.plays else float("nan")


@dataclass(frozen=True)
class Gap:
    """Trained minus control win rate over ``steps``, with a percentile bootstrap interval at ``level``."""

    steps: tuple[int, ...]
    trained: float
    control: float
    low: float
    high: float
    level: float

    @property
    def gap(self) -> float:
        return self.trained - self.control

    @property
    def excludes_zero(self) -> bool:
        return self.low > 0 or self.high < 0


def last_third(steps: Sequence[int]) -> list[int]:
    """The last ``ceil(len / 3)`` steps (at least one)."""
    ordered = sorted(steps)
    return ordered[len(ordered) - max(1, math.ceil(len(ordered) / 3)) :]


def _outcomes(rates: Sequence[StepRate]) -> list[np.ndarray]:
    return [np.array([1.0] * r.wins + [0.0] * (r.plays - r.wins)) for r in rates if r.plays]


def gap_over_last_third(
    trained: Sequence[StepRate], control: Sequence[StepRate], *, resamples: int = 2000, level: float = 0.95,
    seed: int = 0,
) -> Gap:  # fmt: skip
    """Trained-minus-control win rate over the last third of the steps both arms logged, with its interval.

    Raises:
        ValueError: the arms share no step with plays, or ``level`` is not in (0, 1).
    """
    if not 0 < level < 1:
        raise ValueError(f"level must be in (0, 1), got {level}")
    common = sorted({r.step for r in trained if r.plays} & {r.step for r in control if r.plays})
    if not common:
        raise ValueError("the trained and control runs share no step with plays")
    steps = last_third(common)
    arms = [_outcomes([r for r in arm if r.step in steps]) for arm in (trained, control)]
    rng = np.random.default_rng(seed)
    means = np.zeros((2, resamples))
    for a, groups in enumerate(arms):
        total = sum(len(g) for g in groups)
        for g in groups:  # resample within each step, so every resample keeps the steps' sizes
            means[a] += rng.choice(g, size=(resamples, len(g)), replace=True).sum(axis=1)
        means[a] /= total
    diffs = means[0] - means[1]
    tail = (1 - level) / 2
    point = [float(np.concatenate(groups).mean()) for groups in arms]
    return Gap(tuple(steps), point[0], point[1], float(np.quantile(diffs, tail)), float(np.quantile(diffs, 1 - tail)),
               level)  # fmt: skip


def _band(rate: StepRate, z: float = 1.96) -> tuple[float, float]:
    """Wilson score interval of one step's win rate (sensible at 0 and 1, unlike the normal one)."""
    n, p = rate.plays, rate.rate
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return max(0.0, centre - half), min(1.0, centre + half)


def write_figure(path: Path, arms: dict[str, Sequence[StepRate]], title: str) -> Path | None:
    """Win rate per step of each arm with its 95% Wilson band; ``None`` when matplotlib is not installed."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    fig, ax = plt.subplots(figsize=(7, 4))
    for label, rates in arms.items():
        rows = [r for r in rates if r.plays]
        steps = [r.step for r in rows]
        bands = [_band(r) for r in rows]
        ax.plot(steps, [r.rate for r in rows], marker="o", label=label)
        ax.fill_between(steps, [b[0] for b in bands], [b[1] for b in bands], alpha=0.2)
    ax.set(xlabel="training step", ylabel="win rate (training plays)", ylim=(-0.02, 1.02), title=title)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path


def thread_env(threads: int) -> dict[str, str]:
    """The environment that sets the trainer's and the rollout server's torch threads (``0``: every core)."""
    if threads < 0:
        raise ValueError(f"threads must be 0 (every core) or a positive count, got {threads}")
    count = str(threads or os.cpu_count() or 1)
    return {"OMP_NUM_THREADS": count, "HF_ROLLOUT_THREADS": count}
