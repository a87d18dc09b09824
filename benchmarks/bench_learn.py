"""``python benchmarks/bench_learn.py [--fast] [--summary PATH] [learn.yaml overrides]``: the learning run as a table.

Runs ``make learn``'s code (``recipe.spade.laptop.learn``) into ``--run-dir`` and prints, per step, the trained and
control
win rates and seconds next to the recorded run (``benchmarks/learn_recorded.json``: the ``learn_summary.json`` of the
run docs/cpu.md reports), then the gap lines of both. A change to the training path shows as a different curve.
``--summary PATH`` tabulates an existing ``learn_summary.json`` without training.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path

_ROOT = Path(__file__).resolve().parents[1]
RECORDED = _ROOT / "benchmarks" / "learn_recorded.json"


def _gap(summary: dict) -> str:
    g = summary["gap"]
    if g is None:
        return "none (one arm ran)"
    return f"{g['gap']:+.2f} [{g['low']:+.2f}, {g['high']:+.2f}] over steps {g['steps'][0]}-{g['steps'][-1]}"


def table(summary: dict, recorded: dict | None) -> list[str]:
    """Fixed-width lines: one per step of this run (with the recorded run's win rates), then both gaps."""

    def by_step(s: dict, arm: str) -> dict[int, dict]:
        return {row["step"]: row for row in s["steps"].get(arm, [])}

    arms = {a: by_step(summary, a) for a in ("trained", "control")}
    old = {a: by_step(recorded, a) for a in ("trained", "control")} if recorded else {"trained": {}, "control": {}}
    lines = [f"{'step':>4}  {'trained':>7}  {'control':>7}  {'rec. trained':>12}  {'rec. control':>12}  "
             f"{'trained s':>9}  {'control s':>9}"]  # fmt: skip
    for step in sorted(set(arms["trained"]) | set(arms["control"])):
        cells = []
        for source in (arms, old):
            for arm in ("trained", "control"):
                row = source[arm].get(step)
                cells.append(f"{row['wins'] / row['plays']:.2f}" if row and row["plays"] else "-")
        seconds = [f"{arms[a][step]['seconds']:.0f}" if step in arms[a] else "-" for a in ("trained", "control")]
        lines.append(f"{step:>4}  {cells[0]:>7}  {cells[1]:>7}  {cells[2]:>12}  {cells[3]:>12}  {seconds[0]:>9}  "
                     f"{seconds[1]:>9}")  # fmt: skip
    lines.append(f"gap (trained - control, bootstrap interval): this run {_gap(summary)}"
                 + (f"; recorded {_gap(recorded)}" if recorded else ""))  # fmt: skip
    lines.append(
        f"wall: this run {summary['wall_s']:.0f} s" + (f"; recorded {recorded['wall_s']:.0f} s" if recorded else "")
    )
    return lines


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--summary", help="tabulate this learn_summary.json instead of running")
    parser.add_argument("--run-dir", default=str(_ROOT / "runs" / "bench-learn"), help="where the run writes")
    parser.add_argument("--fast", action="store_true", help="learn.yaml's fast sizes (a quick look)")
    parser.add_argument("overrides", nargs="*", help="dotlist overrides of learn.yaml")
    args = parser.parse_args(argv)
    if args.summary:
        path = Path(args.summary)
    else:
        from recipe.spade.laptop.learn import main as learn

        learn(["--run-dir", args.run_dir, *(["--fast"] if args.fast else []), *args.overrides])
        path = Path(args.run_dir) / "learn_summary.json"
    recorded = json.loads(RECORDED.read_text()) if RECORDED.exists() else None
    print("\n".join(table(json.loads(path.read_text()), recorded)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
