"""A small end-of-run report from ``spade_metrics.jsonl``: a table, and PNG plots when matplotlib is installed."""

from __future__ import annotations

import json
from pathlib import Path

__all__ = ["write_report"]

_PLOTS = (
    ("spade/propose/validity_rate", "validity rate"),
    ("spade/propose/regret_mean", "regret (admitted envs)"),
    ("spade/solve/win_rate", "agent win rate (training plays)"),
    ("spade/designer/reward_mean", "designer reward"),
)


def write_report(run_dir: Path) -> Path:
    """Write ``report.md`` (and ``report.png``) next to ``spade_metrics.jsonl``; returns the Markdown path."""
    rows = [json.loads(line) for line in (run_dir / "spade_metrics.jsonl").read_text().splitlines() if line.strip()]
    keys = [k for k, _ in _PLOTS]
    lines = ["| step | " + " | ".join(label for _, label in _PLOTS) + " |", "|---" * (len(keys) + 1) + "|"]
    for row in rows:
        cells = [f"{row[k]:.3f}" if k in row else "-" for k in keys]
        lines.append(f"| {int(row['spade/step'])} | " + " | ".join(cells) + " |")
    failures = sorted({k.rsplit("/", 1)[1] for row in rows for k in row if k.startswith("spade/propose/failure/")})
    text = "# SPADE run report\n\n" + "\n".join(lines) + "\n"
    if failures:
        text += "\nDesign failures seen: " + ", ".join(failures) + "\n"
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        text += "\n(install matplotlib for report.png)\n"
    else:
        fig, axes = plt.subplots(1, len(_PLOTS), figsize=(4 * len(_PLOTS), 3))
        for ax, (key, label) in zip(axes, _PLOTS):
            points = [(row["spade/step"], row[key]) for row in rows if key in row]
            if points:
                ax.plot(*zip(*points), marker="o")
            ax.set_title(label, fontsize=9)
            ax.set_xlabel("step")
        fig.tight_layout()
        fig.savefig(run_dir / "report.png", dpi=80)
        plt.close(fig)
        text += "\n![metrics](report.png)\n"
    path = run_dir / "report.md"
    path.write_text(text, encoding="utf-8")
    return path
