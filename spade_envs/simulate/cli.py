"""``spade-envs simulate``: run the curriculum simulator, print a summary, write a CSV and PNG plots.

``main(argv)`` parses its own arguments; :func:`add_arguments` and :func:`run_args` let the ``spade-envs``
parser host the same options as a subcommand.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Sequence
from typing import Any

from spade_envs.design.rewards import VARIANTS
from spade_envs.simulate.config import SimulationConfig

__all__ = ["CHOICES", "add_arguments", "build_config", "main", "run_args"]

#: ``--variant`` values: the reward variants plus ``fixed``, the fixed-pool baseline.
CHOICES = (*VARIANTS, "fixed")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Add the simulator's options to ``parser``."""
    parser.add_argument("--variant", choices=CHOICES, default="blend",
                        help="designer reward, or 'fixed' for the fixed-pool baseline (default blend)")  # fmt: skip
    parser.add_argument("--compare", nargs="*", choices=CHOICES, metavar="VARIANT",
                        help="run several variants (all if none given); writes one comparison plot")  # fmt: skip
    parser.add_argument("--steps", type=int, default=400, help="training steps (default 400)")
    parser.add_argument("--seeds", type=int, default=5, help="seeds 0..N-1 (default 5)")
    parser.add_argument("--no-memory", action="store_true", help="no replay stream and no exemplars")
    parser.add_argument("--unpaired", action="store_true", help="the hinted arm plays fresh instances")
    parser.add_argument("--no-placebo", action="store_true", help="the paper's two arms: no placebo arm")
    parser.add_argument("--hint-strength", type=float, help="ability the hint adds (default 1.0; weak: 0.1)")
    parser.add_argument("--plays", type=int, help="plays per arm, G (default 8)")
    parser.add_argument("--no-feasibility-gate", action="store_true",
                        help="count regret without a hinted win (RewardConfig.require_feasible=False)")  # fmt: skip
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                        help="set any SimulationConfig field (reward.X, memory_config.X); VALUE is JSON")  # fmt: skip
    parser.add_argument("--out", help="directory for <name>.csv and <name>.png (and per-variant PNGs)")
    parser.add_argument("--name", help="file stem in --out (default: the variant, or 'compare')")
    parser.add_argument("--variant-plots", action="store_true",
                        help="with --compare, also write each variant's own plot as <name>-<variant>.png")  # fmt: skip
    parser.add_argument("--smooth", type=int, default=8, help="moving-average window of the plots (default 8)")


def _parse_value(text: str) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return text


def build_config(args: argparse.Namespace, variant: str) -> SimulationConfig:
    """The :class:`SimulationConfig` of ``variant`` under the parsed options.

    Raises:
        ValueError: a malformed ``--set`` or an invalid value (the message names the option).
    """
    data: dict[str, Any] = {"steps": args.steps, "seeds": args.seeds, "memory": not args.no_memory,
                            "paired": not args.unpaired, "placebo": not args.no_placebo,
                            "fixed_pool": variant == "fixed"}  # fmt: skip
    reward: dict[str, Any] = {"variant": "blend" if variant == "fixed" else variant}
    if args.no_feasibility_gate:
        reward["require_feasible"] = False
    memory: dict[str, Any] = {}
    if args.hint_strength is not None:
        data["hint_strength"] = args.hint_strength
    if args.plays is not None:
        data["plays_per_arm"] = args.plays
    for item in args.set:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise ValueError(f"--set expects KEY=VALUE, got {item!r}")
        if key in ("variant", "reward.variant", "fixed_pool"):
            raise ValueError(f"use --variant / --compare instead of --set {key}")
        target, _, field_name = key.rpartition(".")
        nested = {"": data, "reward": reward, "memory_config": memory}.get(target)
        if nested is None:
            raise ValueError(f"--set {key}: only reward.X and memory_config.X are nested")
        nested[field_name] = _parse_value(value)
    return SimulationConfig.from_dict(data | {"reward": reward, "memory_config": memory})


def run_args(args: argparse.Namespace) -> int:
    """Run what ``args`` asks for; 0 on success, 2 on a bad option."""
    from spade_envs.simulate.loop import simulate_many
    from spade_envs.simulate.report import format_summary, summarize

    variants = list(dict.fromkeys(args.compare or CHOICES)) if args.compare is not None else [args.variant]
    try:
        configs = [build_config(args, v) for v in variants]
    except ValueError as exc:
        print(f"spade-envs simulate: {exc}", file=sys.stderr)
        return 2
    groups, start = {}, time.perf_counter()
    for config in configs:
        groups[config.label] = simulate_many(config)
    elapsed = time.perf_counter() - start
    runs = [run for group in groups.values() for run in group]
    print(format_summary(summarize(runs)))
    print(f"\n{len(configs)} variant(s) x {args.seeds} seeds x {args.steps} steps in {elapsed:.1f} s")
    if args.out:
        _write(args, groups, runs, compare=args.compare is not None)
    return 0


def _write(args: argparse.Namespace, groups: dict, runs: list, compare: bool) -> None:
    from pathlib import Path

    from spade_envs.simulate.plots import have_matplotlib, plot_compare, plot_runs
    from spade_envs.simulate.report import write_csv

    out = Path(args.out)
    stem = args.name or ("compare" if compare else next(iter(groups)))
    print(f"wrote {write_csv(runs, out / f'{stem}.csv')}")
    if not have_matplotlib():
        print("no plots: matplotlib is not installed (pip install 'spade-verl[sim]')", file=sys.stderr)
        return
    if not compare or args.variant_plots:
        for label, group in groups.items():
            name = f"{stem}-{label}" if compare else stem
            print(f"wrote {plot_runs(group, out / f'{name}.png', smooth=args.smooth)}")
    if compare:
        print(f"wrote {plot_compare(groups, out / f'{stem}.png', smooth=args.smooth)}")


def main(argv: Sequence[str] | None = None) -> int:
    """Parse ``argv`` (default ``sys.argv[1:]``) and run; returns the exit status."""
    parser = argparse.ArgumentParser(prog="spade-envs simulate", description=__doc__.splitlines()[0])
    add_arguments(parser)
    return run_args(parser.parse_args(argv))
