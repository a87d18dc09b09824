"""The comparison as a PNG: one horizontal bar per benchmark delta, with its 95% interval as an error bar."""

from __future__ import annotations

from pathlib import Path

from spade_envs.evaluation.compare import Comparison

__all__ = ["write_chart"]


def write_chart(comparison: Comparison, path: Path, title: str) -> bool:
    """Draw the deltas (x100) with their intervals to ``path``; ``False`` when matplotlib is not installed."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    rows = [row for row in comparison.rows if row.delta is not None]
    labels = [row.label for row in rows]
    deltas = [100 * row.delta for row in rows]  # type: ignore[operator]
    low = [100 * (row.delta - row.low) if row.low is not None else 0.0 for row in rows]  # type: ignore[operator]
    high = [100 * (row.high - row.delta) if row.high is not None else 0.0 for row in rows]  # type: ignore[operator]
    colors = ["#3a7d44" if d >= 0 else "#b23a48" for d in deltas]
    figure, axes = plt.subplots(figsize=(7.5, 0.45 * len(rows) + 1.4))
    positions = list(range(len(rows)))[::-1]
    axes.barh(positions, deltas, color=colors, xerr=[low, high], capsize=3, ecolor="#333333")
    axes.set_yticks(positions, labels)
    axes.axvline(0, color="#333333", linewidth=0.8)
    axes.set_xlabel("delta, run - base (points; bars: 95% paired-bootstrap interval)")
    axes.set_title(title, fontsize=10)
    figure.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=120)
    plt.close(figure)
    return True
