"""PNG plots of simulated runs (needs matplotlib: ``pip install 'spade-verl[sim]'``).

Curves are the mean over seeds of each seed's trailing moving average (``smooth`` steps), with a band of one
standard deviation over seeds. Figures are built with :class:`matplotlib.figure.Figure`, never pyplot, so no
global backend or figure state is touched.
"""

from __future__ import annotations

import io
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from spade_envs.simulate.loop import Run

__all__ = ["have_matplotlib", "plot_compare", "plot_runs"]


def have_matplotlib() -> bool:
    """Whether plots can be drawn here."""
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        return False
    return True


def _figure(rows: int, cols: int, title: str) -> Any:
    try:
        from matplotlib.figure import Figure
    except ImportError as exc:
        raise ImportError("plots need matplotlib: pip install 'spade-verl[sim]' (or pip install matplotlib)") from exc
    fig = Figure(figsize=(4.2 * cols, 3.0 * rows), dpi=90)
    fig.subplots_adjust(left=0.06, right=0.98, bottom=0.09, top=0.9, wspace=0.22, hspace=0.38)
    fig.suptitle(title, fontsize=11)
    return fig, fig.subplots(rows, cols, squeeze=False).ravel()


def _series(runs: Sequence[Run], name: str, smooth: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Steps, mean and std over seeds of the trailing moving average of ``name``; NaN steps are skipped."""
    steps = np.array([r.step for r in runs[0].rows])
    values = np.array([[getattr(r, name) for r in run.rows] for run in runs], dtype=float)
    known = ~np.isnan(values)
    kernel = np.ones(max(1, smooth))
    total = np.array([np.convolve(np.where(k, v, 0.0), kernel)[: v.size] for v, k in zip(values, known)])
    count = np.array([np.convolve(k.astype(float), kernel)[: k.size] for k in known])
    per_seed = np.divide(total, count, out=np.full_like(total, np.nan), where=count > 0)
    ok = ~np.isnan(per_seed)
    n = ok.sum(axis=0)
    mean = np.divide(np.where(ok, per_seed, 0.0).sum(axis=0), n, out=np.full(steps.size, np.nan), where=n > 0)
    sq = np.where(ok, (per_seed - mean) ** 2, 0.0).sum(axis=0)
    std = np.sqrt(np.divide(sq, n, out=np.full(steps.size, np.nan), where=n > 0))
    return steps, mean, std


def _line(ax: Any, runs: Sequence[Run], name: str, smooth: int, label: str, color: str | None = None) -> None:
    steps, mean, std = _series(runs, name, smooth)
    (line,) = ax.plot(steps, mean, label=label, color=color, lw=1.4)
    ax.fill_between(steps, mean - std, mean + std, color=line.get_color(), alpha=0.2, lw=0)


def _band(ax: Any, runs: Sequence[Run], label: str | None = "plateau band") -> None:
    """The plateau band (full reward) and its ramps (falling reward), shaded."""
    r = runs[0].config.reward
    ax.axhspan(r.plateau_low - r.plateau_ramp, r.plateau_high + r.plateau_ramp, color="tab:green", alpha=0.07, lw=0)
    ax.axhspan(r.plateau_low, r.plateau_high, color="tab:green", alpha=0.18, lw=0, label=label)


def _finish(ax: Any, title: str, ylim: tuple[float, float] | None = None, legend: bool = True) -> None:
    ax.set_title(title, fontsize=9)
    ax.set_xlabel("step", fontsize=8)
    ax.tick_params(labelsize=7)
    ax.grid(alpha=0.3)
    if ylim is not None:
        ax.set_ylim(*ylim)
    if legend and ax.get_legend_handles_labels()[0]:
        ax.legend(fontsize=7, loc="best")


def _save(fig: Any, path: str | os.PathLike[str]) -> Path:
    """Write a palette PNG: about a third of the size of matplotlib's RGBA output, for plots committed to docs."""
    from PIL import Image  # a matplotlib dependency

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png")
    buffer.seek(0)
    with Image.open(buffer) as image:
        image.convert("RGB").quantize(colors=256, method=Image.Quantize.MEDIANCUT).save(path, optimize=True)
    return path


def plot_runs(runs: Sequence[Run], path: str | os.PathLike[str], smooth: int = 8, title: str | None = None) -> Path:
    """Six panels for one variant's seeds; returns the PNG path.

    Panels: win rate with the plateau band, difficulty vs ability, in-band and unsolvable shares, validity,
    designer reward, regret (as memory holds it: credited at design time, gates applied).
    """
    if not runs:
        raise ValueError("plot_runs needs at least one run")
    c = runs[0].config
    name = title or f"{c.label}: {len(runs)} seeds, mean ± std, {smooth}-step moving average"
    fig, axes = _figure(2, 3, name)
    _band(axes[0], runs)
    _line(axes[0], runs, "win_rate", smooth, "no-hint win rate", "tab:blue")
    _finish(axes[0], "no-hint win rate (share of plays won)", (0.0, 1.02))
    _line(axes[1], runs, "difficulty", smooth, "env difficulty", "tab:red")
    _line(axes[1], runs, "ability", smooth, "agent ability", "tab:blue")
    steps, ability, _ = _series(runs, "ability", smooth)
    axes[1].plot(steps, ability + c.hint_strength + c.reach, ls="--", color="tab:gray", lw=1,
                 label="unsolvable above (with hint)")  # fmt: skip
    _finish(axes[1], "designer difficulty vs agent ability")
    _line(axes[2], runs, "frac_in_band", smooth, "in plateau band", "tab:green")
    _line(axes[2], runs, "frac_unsolvable", smooth, "unsolvable with hint", "tab:red")
    _finish(axes[2], "share of live envs", (0.0, 1.02))
    _line(axes[3], runs, "validity", smooth, "valid designs", "tab:purple")
    _finish(axes[3], "validity rate", (0.0, 1.02))
    _line(axes[4], runs, "designer_reward", smooth, c.reward.variant, "tab:orange")
    _finish(axes[4], "mean designer reward (penalties included)")
    _line(axes[5], runs, "regret", smooth, "credited regret", "tab:brown")
    _finish(axes[5], "mean regret of the live envs (design time)")
    return _save(fig, path)


def plot_compare(groups: Mapping[str, Sequence[Run]], path: str | os.PathLike[str], smooth: int = 8) -> Path:
    """Four panels, one curve per variant: win rate, difficulty minus ability, share in band, ability."""
    if not groups:
        raise ValueError("plot_compare needs at least one variant")
    fig, axes = _figure(2, 2, f"variants: mean ± std over seeds, {smooth}-step moving average")
    _band(axes[0], next(iter(groups.values())), label=None)
    for label, runs in groups.items():
        _line(axes[0], runs, "win_rate", smooth, label)
        steps, diff, _ = _series(runs, "difficulty", smooth)
        _, ability, _ = _series(runs, "ability", smooth)
        axes[1].plot(steps, diff - ability, lw=1.4, label=label)
        _line(axes[2], runs, "frac_in_band", smooth, label)
        _line(axes[3], runs, "ability", smooth, label)
    axes[1].axhline(0.0, color="tab:gray", lw=0.8)
    _finish(axes[0], "no-hint win rate (share of plays won); plateau band shaded", (0.0, 1.02), legend=False)
    _finish(axes[1], "env difficulty minus agent ability (mean over seeds)", legend=False)
    _finish(axes[2], "share of live envs in the plateau band", (0.0, 1.02), legend=False)
    _finish(axes[3], "agent ability (mean over skills)", legend=False)
    fig.subplots_adjust(bottom=0.13)
    fig.legend(*axes[3].get_legend_handles_labels(), loc="lower center", ncol=min(len(groups), 6), fontsize=8)
    return _save(fig, path)
