"""verl 0.9.1's real V1 trainer runs GRPO on CPU through our backend, with the GPU launchers' checkpoint settings.

This is the whole stack for real: Ray, TransferQueue, the FSDP2 engine over gloo, the hf rollout, weight sync, a
reference model with the KL loss, GRPO advantages, the actor update and checkpointing. Only the model is tiny. One run
serves every check (each trainer run costs 1-2 minutes of CI); the path without a reference model is the one every
SPADE run in ``test_spade_on_cpu.py`` takes.

The checkpoint part: the FSDP launchers pin ``trainer.max_actor_ckpt_to_keep`` and ``hf_model`` in
``actor.checkpoint.save_contents``; the run uses exactly those two overrides (taken from run_spade_8b.sh's plan) and
checks what ``spade-eval --serve-checkpoint`` relies on: old checkpoints are pruned, the newest holds loadable HF
weights of the trained model, and ``python -m verl.model_merger`` turns the sharded checkpoint into the same weights
(the path for a checkpoint saved without ``hf_model``).
"""

import re
import subprocess
import sys

import torch
from test_launchers import dry_run
from transformers import AutoModelForCausalLM

PINS = ("trainer.max_actor_ckpt_to_keep=", "actor_rollout_ref.actor.checkpoint.save_contents=")


def weights(path):
    return {k: v.float() for k, v in AutoModelForCausalLM.from_pretrained(path).state_dict().items()}


def test_three_grpo_steps_with_a_reference_model_keep_pruned_checkpoints_with_hf_weights(tmp_path):
    _, overrides = dry_run("run_spade_8b.sh")
    pins = [o for o in overrides if o.startswith(PINS)]
    assert len(pins) == 2 and "trainer.max_actor_ckpt_to_keep=2" in pins
    ckpt = tmp_path / "ckpt"
    command = [
        sys.executable, "-m", "recipe.spade.laptop.main_cpu",
        f"spade_cpu.tiny_model_dir={tmp_path / 'model'}", f"spade_cpu.tiny_data_dir={tmp_path / 'data'}",
        "trainer.total_training_steps=3", "trainer.save_freq=1", f"trainer.default_local_dir={ckpt}",
        "actor_rollout_ref.actor.use_kl_loss=true", *pins,
    ]  # fmt: skip
    run = subprocess.run(command, capture_output=True, text=True, timeout=900, cwd=tmp_path)
    log = run.stdout + run.stderr
    assert run.returncode == 0, log[-4000:]

    steps = {int(m.group(1)): m.group(0) for m in re.finditer(r"step:(\d+) - .*", log)}
    assert set(steps) >= {1, 2, 3}, log[-3000:]
    metrics = dict(re.findall(r"([\w/]+):(-?[\d.e+-]+)", steps[2]))
    # The rollout scores its own tokens with the weights the actor just trained: sync worked.
    assert float(metrics["training/rollout_probs_diff_max"]) < 1e-3
    assert float(metrics["training/rollout_actor_probs_pearson_corr"]) > 0.99
    grads = [float(re.search(r"actor/grad_norm:([\d.e+-]+)", line).group(1)) for line in steps.values()]
    assert max(grads) > 0, "the actor was updated"
    assert float(metrics["timing_s/gen"]) < 1.9, "the fast-poll replay buffer should remove V1's 2 s poll floor"
    assert "response_length/mean" in metrics and "critic/advantages/max" in metrics
    assert "actor/kl_loss" in metrics and "timing_s/ref" in metrics  # the reference model ran, the KL loss entered

    # Two kept (the launchers' setting), the oldest actor checkpoint removed.
    assert [(ckpt / f"global_step_{s}" / "actor").exists() for s in (1, 2, 3)] == [False, True, True]
    hf = ckpt / "global_step_3" / "actor" / "huggingface"
    trained, initial = weights(hf), weights(tmp_path / "model")
    assert trained.keys() == initial.keys()
    assert any(not torch.equal(trained[k], initial[k]) for k in trained), "the saved weights are the trained ones"

    merged = tmp_path / "merged"
    merge = subprocess.run(
        [sys.executable, "-m", "verl.model_merger", "merge", "--backend", "fsdp",
         "--local_dir", str(ckpt / "global_step_3" / "actor"), "--target_dir", str(merged)],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert merge.returncode == 0, merge.stderr[-3000:]
    again = weights(merged)
    assert all(torch.equal(again[k], trained[k]) for k in trained)
