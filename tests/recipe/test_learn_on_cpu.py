"""``make learn``'s command end to end, structurally: both arms through the real launcher and verl's V1 trainer with
the tiny random model (one step each; it cannot learn), the step lines, the gap line, the figure and the summary.
The learning run itself is benchmarks/bench_learn.py (SmolLM2, minutes per step)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_make_learns_command_runs_a_frozen_control_and_a_trained_arm_and_summarises(tmp_path):
    env = {**os.environ, "SKIP_DOCTOR": "1"}  # the launchers' preflight has its own tests
    command = [sys.executable, "-m", "recipe.spade.learn", "--fast", "--run-dir", str(tmp_path), "model_dir=tiny",
               "rungs=[CompareEnv]", "arm.steps=1", "arm.n=2", "arm.micro_batch=4",
               "arm.prompt_length=512"]  # fmt: skip
    run = subprocess.run(command, capture_output=True, text=True, timeout=900, cwd=ROOT, env=env)
    logs = "".join(
        (tmp_path / a / "learn.log").read_text()[-3000:] for a in ("control", "trained") if (tmp_path / a).exists()
    )
    assert run.returncode == 0, run.stdout + run.stderr + logs
    lines = run.stdout.splitlines()
    assert re.match(r"  control  step  0  win 0\.\d\d \(\d+/4\)  \d+ s \(incl\. start-up\)$", lines[1]), lines
    assert re.match(r"  trained  step  0  win 0\.\d\d \(\d+/4\)  control 0\.\d\d  \d+ s", lines[3]), lines
    assert (
        lines[-2].startswith("trained - control over the last third (step 0): ") and "bootstrap interval" in lines[-2]
    )
    summary = json.loads((tmp_path / "learn_summary.json").read_text())
    assert summary["rungs"] == ["CompareEnv"] and summary["gap"]["steps"] == [0]
    assert [s["plays"] for s in summary["steps"]["control"]] == [4] == [s["plays"] for s in summary["steps"]["trained"]]
    assert (tmp_path / "learn.png").stat().st_size > 1000
    control, trained = ((tmp_path / a / "learn.log").read_text() for a in ("control", "trained"))
    assert "actor/pg_loss" not in control and "actor/pg_loss" in trained  # only the trained arm updates the actor
