"""What fails a long run late, checked before it starts: the wandb logger without a login (verl raises
``UsageError: No API key configured`` after the model load) and the disk the checkpoint plan needs."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from spade_envs.cli.doctor import Plan, _value
from spade_envs.cli.model_shapes import SHAPES, checkpoint_bytes
from spade_envs.cli.run_checks import disk_check, logger_check, wandb_ready

ROOT = Path(__file__).resolve().parents[3]
MODEL_30B = "Qwen/Qwen3-30B-A3B-Instruct-2507"


def values(*overrides: str) -> dict:
    """A launch's overrides as doctor reads them (Plan, then each value as Python)."""
    return {key: _value(value) for key, value in Plan("spade_megatron_trainer", overrides).values.items()}


@pytest.mark.parametrize(
    ("env", "ready"),
    [({}, False), ({"WANDB_MODE": "offline"}, True), ({"WANDB_MODE": "disabled"}, True),
     ({"WANDB_API_KEY": "k"}, True), ({"netrc": "machine api.wandb.ai login user password k\n"}, True),
     ({"netrc": "machine example.org login user password k\n"}, False)],
)  # fmt: skip
def test_wandb_is_ready_with_a_login_a_key_or_offline(tmp_path, env, ready):
    if "netrc" in env:
        (tmp_path / ".netrc").write_text(env.pop("netrc"))
    assert wandb_ready({"HOME": str(tmp_path), **env})[0] is ready


def test_the_logger_check_warns_and_names_the_fallback(tmp_path):
    home = {"HOME": str(tmp_path)}
    check = logger_check(values('trainer.logger=["console","wandb"]'), home)
    assert check.status == "warn" and "falls back to trainer.logger=[console]" in check.line()
    assert logger_check(values("trainer.logger=console"), home).status == "ok"
    assert logger_check(values('trainer.logger=["console","wandb"]'), {**home, "WANDB_MODE": "offline"}).status == "ok"


def test_a_30b_checkpoint_is_about_427_gb():
    # Megatron: fp32 master + m + v (12 bytes a parameter) + bf16 HF weights once (2)
    per = checkpoint_bytes(SHAPES[MODEL_30B].params, "megatron", ["model", "optimizer", "extra", "hf_model"])
    assert round(per / 1e9) == 427


def test_the_disk_check_wants_kept_plus_one_checkpoints(tmp_path):
    plan = ["actor_rollout_ref.model.path=" + MODEL_30B, f"trainer.default_local_dir={tmp_path}/run/ckpt",
            "actor_rollout_ref.actor.checkpoint.save_contents=[model,optimizer,extra,hf_model]"]  # fmt: skip
    check = disk_check(values(*plan, "trainer.max_actor_ckpt_to_keep=2"), megatron=True)
    assert "398 GiB per checkpoint x (2 kept + 1) = 1194 GiB" in check.line()
    free = os.statvfs(tmp_path).f_bavail * os.statvfs(tmp_path).f_frsize
    assert check.status == ("fail" if free < 1194 * 2**30 else "ok")
    assert disk_check(values(*plan, "trainer.max_actor_ckpt_to_keep=null"), megatron=True).status in ("warn", "fail")
    model = tmp_path / "tiny"
    model.mkdir()
    (model / "config.json").write_text(
        '{"hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4, '
        '"num_key_value_heads": 2, "vocab_size": 1000, "intermediate_size": 128}'
    )
    tiny = disk_check(values(f"actor_rollout_ref.model.path={model}", f"trainer.default_local_dir={tmp_path}/c",
                             "trainer.max_actor_ckpt_to_keep=1"), megatron=False)  # fmt: skip
    assert tiny.status == "ok", tiny.line()


def test_the_launch_falls_back_to_the_console_without_a_wandb_login(tmp_path):
    """The real launch tail (examples/lib/launch.sh) on a host without a login: main_spade gets the console logger.

    ``PYTHON`` is a wrapper that records the trainer's command line instead of running it (everything before it, the
    budget line, runs for real)."""
    wrapper = tmp_path / "python"
    wrapper.write_text(f'#!/usr/bin/env bash\nif [ "$2" = recipe.spade.main_spade ]; then printf "%s\\n" "$@" '
                       f'> {tmp_path}/trainer_args; exit 0; fi\nexec {sys.executable} "$@"\n')  # fmt: skip
    wrapper.chmod(0o755)
    env = {k: v for k, v in os.environ.items() if not k.startswith("WANDB_")}
    env.update(HOME=str(tmp_path), PYTHON=str(wrapper), SKIP_DOCTOR="1", RUN_DIR=str(tmp_path / "run"))
    out = subprocess.run(["bash", str(ROOT / "examples" / "run_spade_8b.sh")], capture_output=True, text=True,
                         timeout=300, env=env, cwd=ROOT)  # fmt: skip
    assert out.returncode == 0, out.stderr[-2000:]
    assert "warning: wandb cannot start here" in out.stderr
    args = (tmp_path / "trainer_args").read_text().splitlines()
    assert args[-1] == 'trainer.logger=["console"]' and 'trainer.logger=["console","wandb"]' in args
