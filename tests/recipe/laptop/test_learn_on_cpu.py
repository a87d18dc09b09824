"""``make learn``'s command end to end, structurally: the frozen control arm through the real launcher and verl's V1
trainer with the tiny random model (one step; it cannot learn), its step line and summary, and that verl never
updates its actor. The trained arm differs only in ``trainer.critic_warmup`` (pinned in test_learn_stats.py, with
the gap, its line and the figure); its actor update is the one every other CPU trainer run makes. One arm keeps CI's
time down (each arm is a trainer start-up). The learning run itself is benchmarks/bench_learn.py."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]


def test_make_learns_control_arm_runs_through_the_trainer_and_never_updates_the_actor(tmp_path):
    env = {**os.environ, "SKIP_DOCTOR": "1"}  # the launchers' preflight has its own tests
    command = [sys.executable, "-m", "recipe.spade.laptop.learn", "--fast", "--run-dir", str(tmp_path),
    "model_dir=tiny",
               "rungs=[CompareEnv]", "arm.steps=1", "arm.n=2", "arm.micro_batch=4",
               "arm.prompt_length=512", "arms=[control]", "threads=1"]  # fmt: skip
    run = subprocess.run(command, capture_output=True, text=True, timeout=900, cwd=ROOT, env=env)
    log = tmp_path / "control" / "learn.log"
    assert run.returncode == 0, run.stdout + run.stderr + (log.read_text()[-3000:] if log.exists() else "")
    lines = run.stdout.splitlines()
    assert re.match(r"  control  step  0  win 0\.\d\d \(\d+/4\)  \d+ s \(incl\. start-up\)$", lines[1]), lines
    assert lines[-1].startswith("only the control arm ran: no gap; total "), lines
    summary = json.loads((tmp_path / "learn_summary.json").read_text())
    assert summary["rungs"] == ["CompareEnv"] and summary["gap"] is None and list(summary["steps"]) == ["control"]
    assert [s["plays"] for s in summary["steps"]["control"]] == [4]
    assert not (tmp_path / "trained").exists()
    control = log.read_text()
    # verl ran the step (the rollout's metrics are logged) and skipped the actor update: the control stays frozen
    assert "spade/solve/win_rate" in control and "actor/pg_loss" not in control
