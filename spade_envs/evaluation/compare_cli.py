"""``spade-eval compare BASE_DIR RUN_DIR [--out FILE]``: print, write and chart the paper-style comparison.

Exit status: 0 on success, 2 on bad arguments, a missing ``results.json`` or runs with different protocols (the
message lists every difference; ``--allow-mismatch`` compares anyway and notes them under the table).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from spade_envs.evaluation.compare import CompareError, compare_runs, format_comparison
from spade_envs.evaluation.compare_plot import write_chart

__all__ = ["compare_parser", "main"]


def compare_parser() -> argparse.ArgumentParser:
    """The ``compare`` sub-command's parser (the docs test checks the documented flags against it)."""
    p = argparse.ArgumentParser(prog="spade-eval compare", description=__doc__.split("\n")[0])
    p.add_argument("base_dir", type=Path, help="results directory of the base checkpoint")
    p.add_argument("run_dir", type=Path, help="results directory of the trained checkpoint")
    p.add_argument("--out", type=Path, default=None, help="also write the Markdown table here (and FILE.png)")
    p.add_argument("--plot", type=Path, default=None, help="the bar chart's path (default: --out with .png)")
    p.add_argument("--bootstrap", type=int, default=1000, help="bootstrap draws per interval (default 1000)")
    p.add_argument("--seed", type=int, default=0, help="bootstrap seed")
    p.add_argument("--allow-mismatch", action="store_true", help="compare runs whose protocols differ (noted)")
    return p


def main(argv: Sequence[str]) -> int:
    """Run ``compare``; see the module docstring for the exit status."""
    args = compare_parser().parse_args(argv)
    if args.bootstrap < 1:
        print("spade-eval compare: --bootstrap must be >= 1", file=sys.stderr)
        return 2
    try:
        comparison = compare_runs(args.base_dir, args.run_dir, allow_mismatch=args.allow_mismatch,
                                  draws=args.bootstrap, seed=args.seed)  # fmt: skip
    except CompareError as exc:
        print(f"spade-eval compare: {exc}", file=sys.stderr)
        return 2
    table = format_comparison(comparison, args.base_dir.name, args.run_dir.name)
    print(table, end="")
    if args.out is not None:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(table, encoding="utf-8")
    plot = args.plot or (args.out.with_suffix(".png") if args.out is not None else None)
    if plot is not None and not write_chart(comparison, plot, f"{args.run_dir.name} vs {args.base_dir.name}"):
        print("spade-eval compare: matplotlib is not installed; no chart written", file=sys.stderr)
    return 0
