"""Benchmark the environment memory at scale: sampling latency, persistence time and exact restore.

Run ``.venv/bin/python benchmarks/bench_memory.py [--records 100000] [--source-chars 2000] [--repeats 50]``; it
builds a memory of synthetic games records (each with its own ``--source-chars``-long source), then prints one
table. Targets are printed next to the numbers, never asserted. See ``benchmarks/README.md``.
"""

from __future__ import annotations

import argparse
import hashlib
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np

_ROOT = Path(__file__).resolve().parents[1]
if str(_ROOT) not in sys.path:  # run as a script from a checkout
    sys.path.insert(0, str(_ROOT))

from spade_envs.cli.table import format_table  # noqa: E402
from spade_envs.design.memory import EnvMemory, MemoryConfig, MemoryRecord  # noqa: E402
from spade_envs.envs.skills import SKILLS  # noqa: E402
from spade_envs.envs.spec import EnvSpec  # noqa: E402

__all__ = ["build", "main"]

_SKILLS = tuple(SKILLS["games"])
_BODY = '''
import random


class Record{i}Env:
    """Synthetic record {i}."""

    max_turns = 8

    def reset(self, seed=None):
        self.rng = random.Random(seed)
        self.target = self.rng.randint(0, {i})
        return "guess a number", {{}}

    def step(self, action):
        won = action.strip() == str(self.target)
        return ("right" if won else "wrong"), float(won), won, False, {{}}

    def solution(self):
        return [str(self.target)]
'''


def _source(i: int, chars: int) -> str:
    body = _BODY.format(i=i)
    pad = max(0, chars - len(body))
    return body + "\n# " + ("padding " * (pad // 8 + 1))[:pad] + "\n"


def build(n: int, chars: int, seed: int = 0) -> EnvMemory:
    """A full memory of ``n`` games records with mixed skills, win rates, regrets and play steps.

    AST hashes are given (the sha256 of the index) instead of parsed: parsing 100k sources measures ``ast``, not
    the memory.
    """
    rng = np.random.default_rng(seed)
    memory = EnvMemory(MemoryConfig(capacity=n))
    wins = rng.integers(0, 9, n) / 8
    regrets = np.round(rng.random(n) * 0.5, 4)
    steps = rng.integers(0, 400, n)
    for i in range(n):
        spec = EnvSpec(f"env{i}", "games", _SKILLS[i % len(_SKILLS)], _source(i, chars), created_step=int(steps[i]))
        memory.add(
            MemoryRecord(
                spec,
                win_rate=float(wins[i]),
                regret=float(regrets[i]),
                plays=32,
                last_played_step=int(steps[i]),
                ast_hash=hashlib.sha256(str(i).encode()).hexdigest(),
            )
        )
    return memory


def _timed(fn: Callable[[], object], repeats: int) -> tuple[float, float]:
    """Median and max seconds of ``repeats`` calls."""
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times), max(times)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=100_000, help="records in the memory (default 100000)")
    parser.add_argument("--source-chars", type=int, default=2000, help="length of each env source (default 2000)")
    parser.add_argument("--repeats", type=int, default=50, help="timed calls per sampling row (default 50)")
    args = parser.parse_args(argv)
    n = args.records

    start = time.perf_counter()
    memory = build(n, args.source_chars)
    build_s = time.perf_counter() - start
    rng = np.random.default_rng(1)
    skill = _SKILLS[0]
    ms = lambda pair: (f"{pair[0] * 1e3:.2f} ms", f"{pair[1] * 1e3:.2f} ms")  # noqa: E731
    rows = []

    def cold_replay() -> None:  # a re-score invalidates the rank cache, as in training
        memory.update_stats(f"env{int(rng.integers(n))}", 0.5, 0.1, 8, 400)
        memory.sample_replay(32, 401, rng)

    timings = {
        "replay batch of 32, after a re-score": _timed(cold_replay, args.repeats),
        "replay batch of 32, cached ranks": _timed(lambda: memory.sample_replay(32, 401, rng), args.repeats),
        "exemplars (2 positive, 1 negative)": _timed(lambda: memory.exemplars(skill, "games", rng), args.repeats),
    }
    for name, pair in timings.items():
        rows.append((name, *ms(pair), "< 10 ms", "yes" if pair[0] < 0.010 else "NO"))
    fresh = iter(MemoryRecord(EnvSpec(f"new{i}", "games", skill, _source(n + i, 100)), win_rate=0.5, plays=8,
                              last_played_step=401) for i in range(args.repeats))  # fmt: skip
    rows.append(("add at capacity (evicts one)", *ms(_timed(lambda: memory.add(next(fresh)), args.repeats)), "-", "-"))

    with tempfile.TemporaryDirectory(prefix="bench_memory_") as tmp:
        path = Path(tmp) / "memory.jsonl"
        start = time.perf_counter()
        memory.save(path)
        first_s = time.perf_counter() - start
        ids = [r.env_id for r in memory]  # the evictions above removed some
        for _ in range(32):  # one regeneration step's worth of changes
            memory.update_stats(ids[int(rng.integers(len(ids)))], 0.25, None, 8, 402)
        start = time.perf_counter()
        memory.save(path)
        again_s = time.perf_counter() - start
        size_mb = path.stat().st_size / 1e6
        start = time.perf_counter()
        restored = EnvMemory.load(path)
        load_s = time.perf_counter() - start
    a, b = np.random.default_rng(9), np.random.default_rng(9)
    exact = (
        list(restored) == list(memory)
        and restored.stats() == memory.stats()
        and all(restored.sample_replay(32, 402, a) == memory.sample_replay(32, 402, b) for _ in range(5))
        and all(restored.exemplars(s, "games", a) == memory.exemplars(s, "games", b) for s in _SKILLS)
    )
    for name, secs in ((f"persist, first save ({size_mb:.0f} MB, fsync)", first_s),
                       ("persist again after 32 re-scores", again_s)):  # fmt: skip
        rows.append((name, f"{secs:.2f} s", "-", "< 2 s", "yes" if secs < 2 else "NO"))
    rows.append(("restore", f"{load_s:.2f} s", "-", "exact", "yes" if exact else "NO"))
    print(f"{n} records, {args.source_chars}-char sources, built in {build_s:.1f} s; {args.repeats} calls per row\n")
    print(format_table(("measurement", "median", "max", "target", "ok"), rows))
    return 0 if exact else 1


if __name__ == "__main__":
    raise SystemExit(main())
