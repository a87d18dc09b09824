"""Validation throughput: admissible and broken env programs validated in the sandbox, envs per second.

Run: ``.venv/bin/python benchmarks/bench_validate.py [--rounds 3] [--isolation auto]``. Prints one table.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Sequence

from spade_envs.builtin import BUILTINS, builtin_source
from spade_envs.design.validate import validate_source
from spade_envs.sandbox import SandboxConfig, WorkerPool

#: Broken programs that fail early (load) and late (solution replay), the two ends of validation's cost.
BROKEN = {
    "syntax_error": "class BrokenEnv(:\n    pass\n",
    "solution_does_not_win": builtin_source("VaultCodeEnv").replace('[f"enter {self.code}"]', '["enter 0000"]'),
}


def run(rounds: int, isolation: str) -> list[tuple[str, str, float, float]]:
    """``(program, verdict, median seconds, envs per second)`` rows."""
    programs = {e.name: builtin_source(e.name) for e in BUILTINS} | BROKEN
    rows = []
    with WorkerPool(SandboxConfig(isolation=isolation, pool_size=2)) as pool:
        for name, source in programs.items():
            times, verdict = [], ""
            for _ in range(rounds):
                report = validate_source(source, pool)
                times.append(report.duration_s)
                verdict = "admissible" if report.ok else f"rejected: {report.code}"
            median = statistics.median(times)
            rows.append((name, verdict, median, 1.0 / median))
        level = pool.level
    print(f"isolation level: {level}; {rounds} rounds per program; default ValidationConfig (3 seeds)")
    return rows


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--isolation", default="auto")
    args = parser.parse_args(argv)
    started = time.perf_counter()
    rows = run(args.rounds, args.isolation)
    width = max(len(r[0]) for r in rows)
    print(f"{'program':<{width}}  {'verdict':<38}  {'median s':>9}  {'envs/s':>7}")
    for name, verdict, median, rate in rows:
        print(f"{name:<{width}}  {verdict:<38}  {median:>9.3f}  {rate:>7.1f}")
    admitted = [r[2] for r in rows if r[1] == "admissible"]
    rate, each = len(admitted) / sum(admitted), statistics.median(admitted)
    print(f"admissible envs: {rate:.1f} envs/s sequential (median {each:.3f} s each); "
          f"total {time.perf_counter() - started:.1f} s")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
