"""Benchmark the curriculum simulator: wall time of the default schedule (400 steps x 5 seeds) per setting.

Run ``.venv/bin/python benchmarks/bench_simulate.py [--steps 400] [--seeds 5]``; it prints the machine's facts and
one table. The target (a full default run well under a minute) is printed next to the numbers, never asserted.
See ``benchmarks/README.md``.
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import time
from collections.abc import Sequence
from pathlib import Path

_ROOT = Path(__file__).resolve().parents[1]
if str(_ROOT) not in sys.path:  # run as a script from a checkout
    sys.path.insert(0, str(_ROOT))

from spade_envs.cli.table import format_table  # noqa: E402
from spade_envs.simulate import SimulationConfig, simulate_many  # noqa: E402

__all__ = ["SETTINGS", "main"]

#: Rows of the table: a name and the config changes from the default.
SETTINGS: dict[str, dict] = {
    "blend (default, memory on)": {},
    "blend, memory off": {"memory": False},
    "regret, no gate, weak hints": {"reward": {"variant": "regret", "require_feasible": False}, "hint_strength": 0.1},
    "fixed pool": {"fixed_pool": True},
}
_TARGET_S = 30.0


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=400, help="steps per run (default 400)")
    parser.add_argument("--seeds", type=int, default=5, help="seeds per setting (default 5)")
    args = parser.parse_args(argv)
    print(f"nproc {os.cpu_count()}, Python {platform.python_version()}, {platform.machine()}; "
          f"{args.steps} steps x {args.seeds} seeds per setting, one process")  # fmt: skip
    base = SimulationConfig(steps=args.steps, seeds=args.seeds)
    target = _TARGET_S * args.steps * args.seeds / 2000  # scaled from 400 x 5
    rows = []
    for name, changes in SETTINGS.items():
        config = base.with_updates(**changes)
        start = time.perf_counter()
        simulate_many(config)
        wall = time.perf_counter() - start
        ok = "yes" if wall < target else "NO"
        rate = f"{args.steps * args.seeds / wall:.0f}"
        rows.append((name, f"{args.seeds} x {args.steps}", f"{wall:.2f} s", f"{wall / args.seeds:.2f} s", rate,
                     f"< {target:.3g} s", ok))  # fmt: skip
    print(format_table(("setting", "runs", "wall", "per run", "steps/s", "target", "ok"), rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
