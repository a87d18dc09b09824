"""The GPU launchers' checkpoint settings, run for real through verl 0.9.1's trainer on CPU (FSDP2 engine).

The FSDP launchers pin ``trainer.max_actor_ckpt_to_keep`` and ``hf_model`` in ``actor.checkpoint.save_contents``;
this runs verl's own GRPO on the tiny model with exactly those two overrides (taken from run_spade_8b.sh's plan) and
checks what ``spade-eval --serve-checkpoint`` relies on: old checkpoints are pruned, the newest holds loadable HF
weights of the trained model, and ``python -m verl.model_merger`` turns the sharded checkpoint into the same weights
(the path for a checkpoint saved without ``hf_model``).
"""

import subprocess
import sys

import torch
from test_launchers import dry_run
from transformers import AutoModelForCausalLM

PINS = ("trainer.max_actor_ckpt_to_keep=", "actor_rollout_ref.actor.checkpoint.save_contents=")


def weights(path):
    return {k: v.float() for k, v in AutoModelForCausalLM.from_pretrained(path).state_dict().items()}


def test_pruned_checkpoints_hold_hf_weights_and_the_merger_reproduces_them(tmp_path):
    _, overrides = dry_run("run_spade_8b.sh")
    pins = [o for o in overrides if o.startswith(PINS)]
    assert len(pins) == 2 and "trainer.max_actor_ckpt_to_keep=2" in pins
    ckpt = tmp_path / "ckpt"
    command = [
        sys.executable, "-m", "recipe.spade.cpu.main_cpu",
        f"spade_cpu.tiny_model_dir={tmp_path / 'model'}", f"spade_cpu.tiny_data_dir={tmp_path / 'data'}",
        "trainer.total_training_steps=3", "trainer.save_freq=1", f"trainer.default_local_dir={ckpt}", *pins,
    ]  # fmt: skip
    run = subprocess.run(command, capture_output=True, text=True, timeout=900, cwd=tmp_path)
    assert run.returncode == 0, (run.stdout + run.stderr)[-4000:]

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
