"""Simulation output without plotting: the per-step CSV and the per-variant summary table."""

from __future__ import annotations

import csv
import math
import os
from collections.abc import Iterable, Sequence
from dataclasses import astuple, dataclass, fields
from pathlib import Path

import numpy as np

from spade_envs.simulate.loop import Run, StepMetrics

__all__ = ["COLUMNS", "Summary", "csv_rows", "format_summary", "summarize", "write_csv"]

#: CSV header, in :class:`StepMetrics` field order.
COLUMNS: tuple[str, ...] = tuple(f.name for f in fields(StepMetrics))


def _cell(value: object) -> str:
    if isinstance(value, float):
        return "nan" if math.isnan(value) else format(value, ".6g")
    return str(value)


def csv_rows(runs: Iterable[Run]) -> list[list[str]]:
    """The CSV body: one row per step and run, formatted exactly as written (six significant digits)."""
    return [[_cell(v) for v in astuple(row)] for run in runs for row in run.rows]


def write_csv(runs: Iterable[Run], path: str | os.PathLike[str]) -> Path:
    """Write every run's rows with the :data:`COLUMNS` header; returns the path."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", newline="", encoding="utf-8") as f:
        writer = csv.writer(f)
        writer.writerow(COLUMNS)
        writer.writerows(csv_rows(runs))
    return path


@dataclass(frozen=True)
class Summary:
    """One variant over its seeds; "final" means the mean over the last tenth of the steps (at least one step).

    Attributes:
        label: the variant (reward variant or ``fixed``).
        seeds: runs summarised.
        win_rate: final no-hint win rate (share of plays won), mean over seeds.
        win_rate_std: its standard deviation over seeds.
        frac_in_band: final share of live envs in the plateau band, mean over seeds.
        frac_unsolvable: final share of live envs unsolvable even with the hint, mean over seeds.
        ability_gain: mean ability gained over the run (averaged over skills), mean over seeds.
        ability_gain_std: its standard deviation over seeds.
        validity: final share of valid designer samples (NaN for the fixed pool: no designer).
        designer_reward: final mean designer reward (NaN for the fixed pool).
    """

    label: str
    seeds: int
    win_rate: float
    win_rate_std: float
    frac_in_band: float
    frac_unsolvable: float
    ability_gain: float
    ability_gain_std: float
    validity: float
    designer_reward: float


def _final(run: Run, name: str) -> float:
    tail = run.rows[-max(1, len(run.rows) // 10) :]
    values = np.array([getattr(r, name) for r in tail], dtype=float)
    values = values[~np.isnan(values)]
    return float(values.mean()) if values.size else math.nan


def summarize(runs: Sequence[Run]) -> list[Summary]:
    """One :class:`Summary` per label, in order of first appearance."""
    by_label: dict[str, list[Run]] = {}
    for run in runs:
        by_label.setdefault(run.config.label, []).append(run)
    out = []
    for label, group in by_label.items():

        def final(name: str, group: list[Run] = group) -> np.ndarray:
            return np.array([_final(run, name) for run in group])

        gains = np.array([float((run.final_ability - run.initial_ability).mean()) for run in group])
        win = final("win_rate")
        out.append(
            Summary(
                label=label,
                seeds=len(group),
                win_rate=float(win.mean()),
                win_rate_std=float(win.std()),
                frac_in_band=float(final("frac_in_band").mean()),
                frac_unsolvable=float(final("frac_unsolvable").mean()),
                ability_gain=float(gains.mean()),
                ability_gain_std=float(gains.std()),
                validity=float(final("validity").mean()),
                designer_reward=float(final("designer_reward").mean()),
            )
        )
    return out


def _or_dash(value: float, spec: str) -> str:
    return "-" if math.isnan(value) else format(value, spec)  # the fixed pool has no designer


def format_summary(summaries: Sequence[Summary]) -> str:
    """A plain-text table (one row per variant) for the terminal and the docs."""
    header = ("variant", "seeds", "final win rate", "in band", "unsolvable", "ability gain", "validity", "reward")
    rows = [
        (s.label, str(s.seeds), f"{s.win_rate:.2f} ± {s.win_rate_std:.2f}", f"{s.frac_in_band:.2f}",
         f"{s.frac_unsolvable:.2f}", f"{s.ability_gain:.2f} ± {s.ability_gain_std:.2f}", _or_dash(s.validity, ".2f"),
         _or_dash(s.designer_reward, "+.2f"))
        for s in summaries
    ]  # fmt: skip
    widths = [max(len(c) for c in col) for col in zip(header, *rows)]
    line = lambda cells: "  ".join(c.ljust(w) for c, w in zip(cells, widths)).rstrip()  # noqa: E731
    return "\n".join([line(header), line(["-" * w for w in widths]), *(line(r) for r in rows)])
