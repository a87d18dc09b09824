"""verl 0.9.1's real V1 trainer runs two GRPO steps on CPU through our backend (one command, a subprocess).

This is the whole stack for real: Ray, TransferQueue, the FSDP2 engine over gloo, the hf rollout, weight sync,
GRPO advantages and the actor update. Only the model is tiny.
"""

import re
import subprocess
import sys

import pytest


@pytest.mark.parametrize("extra", [[], ["actor_rollout_ref.actor.use_kl_loss=true"]], ids=["grpo", "grpo-ref-kl"])
def test_two_grpo_steps_on_the_v1_trainer(tmp_path, extra):
    command = [
        sys.executable, "-m", "recipe.spade.cpu.main_cpu",
        f"spade_cpu.tiny_model_dir={tmp_path / 'model'}", f"spade_cpu.tiny_data_dir={tmp_path / 'data'}",
        "trainer.total_training_steps=2", f"trainer.default_local_dir={tmp_path / 'ckpt'}", *extra,
    ]  # fmt: skip
    run = subprocess.run(command, capture_output=True, text=True, timeout=900, cwd=tmp_path)
    log = run.stdout + run.stderr
    assert run.returncode == 0, log[-4000:]
    steps = {int(m.group(1)): m.group(0) for m in re.finditer(r"step:(\d+) - .*", log)}
    assert set(steps) >= {1, 2}, log[-3000:]
    metrics = dict(re.findall(r"([\w/]+):(-?[\d.e+-]+)", steps[2]))
    # The rollout scores its own tokens with the weights the actor just trained: sync worked.
    assert float(metrics["training/rollout_probs_diff_max"]) < 1e-3
    assert float(metrics["training/rollout_actor_probs_pearson_corr"]) > 0.99
    grads = [float(re.search(r"actor/grad_norm:([\d.e+-]+)", line).group(1)) for line in steps.values()]
    assert max(grads) > 0, "the actor was updated"
    assert float(metrics["timing_s/gen"]) < 1.9, "the fast-poll replay buffer should remove V1's 2 s poll floor"
    assert "response_length/mean" in metrics and "critic/advantages/max" in metrics
    if extra:  # the reference model ran and the KL loss entered the update
        assert "actor/kl_loss" in metrics and "timing_s/ref" in metrics
