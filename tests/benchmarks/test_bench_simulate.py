"""The simulator benchmark runs end to end on a tiny schedule and prints one row per setting (never timing)."""

import importlib.util
from pathlib import Path

_PATH = Path(__file__).resolve().parents[2] / "benchmarks" / "bench_simulate.py"


def test_tiny_run_prints_a_row_per_setting(capsys):
    spec = importlib.util.spec_from_file_location("bench_simulate", _PATH)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert module.main(["--steps", "8", "--seeds", "1"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("nproc ") and lines[1].split()[:2] == ["setting", "runs"]
    assert [line.split("  ")[0] for line in lines[3:]] == list(module.SETTINGS)
