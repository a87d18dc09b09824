"""``benchmarks/bench_cpu_update.py`` on the tiny model: the settings run in processes of their own and tabulate.

Structure only: the timings, faults and growth are the benchmark's to print, never asserted (the tiny model's
tensors stay under glibc's mmap threshold, and one torch thread has no barrier to wait at).
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))

import bench_cpu_update  # noqa: E402


def test_the_settings_run_and_tabulate(capsys):
    assert bench_cpu_update.main(["--model", "tiny", "--rounds", "1", "--batches", "2", "--threads", "1",
                                  "--settings", "default", "no mmap", "nice 15 + neighbour"]) == 0  # fmt: skip
    out = capsys.readouterr().out
    rows = {
        line.split("  ")[0]: line.split()
        for line in out.splitlines()
        if line.startswith(tuple(bench_cpu_update.SETTINGS))
    }
    assert set(rows) == {"default", "no mmap", "nice 15 + neighbour"}
    assert rows["default"][-4] == "1.00x"
