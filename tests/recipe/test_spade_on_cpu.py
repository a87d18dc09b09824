"""SPADE end to end on verl 0.9.1's real V1 trainer, on CPU, through examples/run_spade_tiny_cpu.sh.

The designer is a scripted stand-in at the model boundary (``rollout.name=hf_scripted``, recipe/spade/cpu/scripted.py):
of the two samples of each designer row one is a built-in environment and one broken code, and hint-writer prompts
get a fixed hint, so both the admitted and the rejected path run. Everything else is real: the agent's turns come
from the tiny model through the hf rollout, environments run in the sandbox, and rewards, memory, GRPO and the actor
update are the real code.
"""

import json
import os
import re
import subprocess
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[2] / "examples" / "run_spade_tiny_cpu.sh"


def run_spade(tmp_path: Path, steps: int, *extra: str) -> str:
    env = {**os.environ, "PYTHON": str(Path(os.sys.executable)), "RUN_DIR": str(tmp_path / "run"), "STEPS": str(steps)}
    command = ["bash", str(SCRIPT), f"spade_cpu.tiny_model_dir={tmp_path / 'model'}",
               "actor_rollout_ref.rollout.name=hf_scripted", *extra]  # fmt: skip
    run = subprocess.run(command, capture_output=True, text=True, timeout=1200, cwd=tmp_path, env=env)
    log = run.stdout + run.stderr
    assert run.returncode == 0, log[-5000:]
    return log


def test_three_self_play_steps_then_resume_with_the_same_memory(tmp_path):
    log = run_spade(tmp_path, 3)
    spade_dir = tmp_path / "run" / "spade"
    rows = [json.loads(line) for line in (spade_dir / "spade_metrics.jsonl").read_text().splitlines()]
    by_step = {int(r["spade/step"]): r for r in rows}
    assert set(by_step) == {0, 1, 2}
    for regen in (0, 2):  # regen_every=2: designer rows at steps 0 and 2; one sample of each row admitted
        assert by_step[regen]["spade/propose/validity_rate"] == 0.5
        assert by_step[regen]["spade/propose/failure/syntax_error"] == 2
        assert "spade/propose/designer_reward_mean" in by_step[regen]
    for step in (0, 1, 2):  # agent rows every step, played in the sandbox, no env faults
        assert by_step[step]["spade/solve/env_fault_rate"] == 0.0
    trainer_steps = {int(m.group(1)): m.group(0) for m in re.finditer(r"step:(\d+) - .*", log)}
    assert {1, 2, 3} <= set(trainer_steps)
    for step in (1, 3):  # trainer steps 1 and 3 hold designer rows whose two samples scored differently
        grad = float(re.search(r"actor/grad_norm:([\d.e+-]+)", trainer_steps[step]).group(1))
        assert grad > 0, "designer and agent samples entered the update and the actor changed"
    assert (spade_dir / "report.md").exists()

    memory = [json.loads(line) for line in (spade_dir / "memory.jsonl").read_text().splitlines()[1:]]
    played = sum(r["plays"] for r in memory)
    assert played > 0, "training plays re-score the memory"

    run_spade(tmp_path, 1)  # same run dir: the pool restores the memory instead of re-seeding it
    memory = [json.loads(line) for line in (spade_dir / "memory.jsonl").read_text().splitlines()[1:]]
    assert sum(r["plays"] for r in memory) > played
