"""The learning benchmark's table from a learn_summary.json (the run itself is minutes per step: never in tests)."""

import importlib.util
import json
from pathlib import Path

_PATH = Path(__file__).resolve().parents[2] / "benchmarks" / "bench_learn.py"


def _summary(trained, control, wall):
    steps = {arm: [{"step": i, "wins": w, "plays": 32, "seconds": 60.0 + i} for i, w in enumerate(wins)]
             for arm, wins in (("trained", trained), ("control", control))}  # fmt: skip
    return {"steps": steps, "wall_s": wall, "gap": {"gap": 0.5, "low": 0.3, "high": 0.7, "steps": [2, 3]}}


def test_table_puts_this_run_next_to_the_recorded_one(tmp_path, monkeypatch, capsys):
    spec = importlib.util.spec_from_file_location("bench_learn", _PATH)
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    recorded = tmp_path / "recorded.json"
    recorded.write_text(json.dumps(_summary([8, 16, 24], [8, 8, 8], 900.0)))
    monkeypatch.setattr(bench, "RECORDED", recorded)
    path = tmp_path / "learn_summary.json"
    path.write_text(json.dumps(_summary([8, 16, 24, 32], [8, 8, 9, 8], 1000.0)))
    assert bench.main(["--summary", str(path)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split() == ["step", "trained", "control", "rec.", "trained", "rec.", "control", "trained", "s",
                                "control", "s"]  # fmt: skip
    assert lines[3].split() == ["2", "0.75", "0.28", "0.75", "0.25", "62", "62"]
    assert lines[4].split()[:5] == ["3", "1.00", "0.25", "-", "-"]
    assert lines[5].startswith("gap (trained - control, bootstrap interval): this run +0.50 [+0.30, +0.70]")
    assert lines[6] == "wall: this run 1000 s; recorded 900 s"
