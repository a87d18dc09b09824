"""``benchmarks/bench_cpu_malloc.py`` on the tiny model: both settings run in processes of their own and tabulate.

Structure only: the timings, faults and growth are the benchmark's to print, never asserted (the tiny model's
tensors stay under glibc's mmap threshold, so the settings barely differ there).
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))

import bench_cpu_malloc  # noqa: E402


def test_both_settings_run_and_tabulate(capsys):
    assert bench_cpu_malloc.main(["--model", "tiny", "--rounds", "1", "--batches", "2", "--threads", "1"]) == 0
    out = capsys.readouterr().out
    rows = {
        line.split("  ")[0]: line.split()
        for line in out.splitlines()
        if line.startswith(tuple(bench_cpu_malloc.SETTINGS))
    }
    assert set(rows) == set(bench_cpu_malloc.SETTINGS)
    assert rows["glibc default"][-4] == "1.00x"
