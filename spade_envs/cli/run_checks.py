"""Checks of what a long run needs late: a logger that can start, and disk for its checkpoints.

Both fail only after the model has loaded, minutes or days in: verl's wandb logger raises ``UsageError: No API key
configured`` on a host without a wandb login, and a 30B checkpoint is about 400 GiB. ``spade-envs doctor --launcher``
runs them before the launch (``examples/lib/launch.sh``), which also falls back to the console logger when wandb
cannot start: ``python -m spade_envs.cli.run_checks wandb`` exits 1 then.
"""

from __future__ import annotations

import netrc
import os
import shutil
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

from spade_envs.cli.model_shapes import checkpoint_bytes, shape_of
from spade_envs.cli.preflight import Check

__all__ = ["disk_check", "logger_check", "wandb_ready"]

GIB = 2**30
#: verl's default ``actor.checkpoint.save_contents`` (trainer/config/actor/actor.yaml), when a launch does not set it.
VERL_SAVE_CONTENTS = ("model", "optimizer", "extra")


def wandb_ready(env: Mapping[str, str] | None = None) -> tuple[bool, str]:
    """Whether ``wandb.init`` can start without a prompt: offline or disabled, an API key, or a login in netrc."""
    env = os.environ if env is None else env
    mode = env.get("WANDB_MODE", "").lower()
    if mode in ("offline", "disabled", "dryrun"):
        return True, f"WANDB_MODE={mode}"
    if env.get("WANDB_API_KEY"):
        return True, "WANDB_API_KEY is set"
    host = urlparse(env.get("WANDB_BASE_URL") or "https://api.wandb.ai").hostname or "api.wandb.ai"
    path = Path(env.get("NETRC") or Path(env.get("HOME") or Path.home()) / ".netrc")
    try:
        if path.is_file() and netrc.netrc(str(path)).authenticators(host):
            return True, f"wandb login for {host} in {path}"
    except (netrc.NetrcParseError, OSError) as exc:
        return False, f"{path} unreadable ({exc})"
    return False, f"no WANDB_API_KEY, no login for {host} in {path}, WANDB_MODE={mode or 'unset'}"


def _loggers(values: Mapping[str, Any]) -> list[str]:
    value = values.get("trainer.logger", ["console", "wandb"])  # verl's default (ppo_trainer.yaml)
    return [str(v) for v in (value if isinstance(value, list) else [value])]


def logger_check(values: Mapping[str, Any], env: Mapping[str, str] | None = None) -> Check:
    """The launch's ``trainer.logger``: a wandb logger needs a login or offline mode, else the launch uses console."""
    loggers = _loggers(values)
    if "wandb" not in loggers:
        return Check("logger", "ok", f"trainer.logger={loggers}")
    ready, why = wandb_ready(env)
    if ready:
        return Check("logger", "ok", f"wandb: {why}")
    return Check("logger", "warn", f"wandb cannot start ({why}): the launch falls back to trainer.logger=[console]",
                 "wandb login, or WANDB_MODE=offline (sync later with wandb sync)")  # fmt: skip


def disk_check(values: Mapping[str, Any], megatron: bool) -> Check:
    """Free disk under ``trainer.default_local_dir`` against the checkpoint plan.

    One checkpoint x (kept + 1): verl writes a new checkpoint before it deletes the oldest.
    """
    model, where = values.get("actor_rollout_ref.model.path"), values.get("trainer.default_local_dir")
    if not model or not where or model == "tiny":
        return Check("disk", "ok", "no model or checkpoint directory to plan for")
    try:
        params = shape_of(str(model)).params
    except (ValueError, KeyError, OSError) as exc:
        return Check("disk", "warn", f"cannot size a checkpoint of {model}: {exc}", "check free disk by hand")
    contents = values.get("actor_rollout_ref.actor.checkpoint.save_contents") or list(VERL_SAVE_CONTENTS)
    contents = contents if isinstance(contents, list) else [contents]
    keep = values.get("trainer.max_actor_ckpt_to_keep")
    per = checkpoint_bytes(params, "megatron" if megatron else "fsdp", [str(c) for c in contents])
    need = per * ((int(keep) if isinstance(keep, int) and keep > 0 else 0) + 1)
    existing = Path(str(where)).expanduser().absolute()
    while not existing.exists():
        existing = existing.parent
    free = shutil.disk_usage(existing).free
    unit = f"{per / GIB:.0f} GiB per checkpoint x ({keep} kept + 1) = {need / GIB:.0f} GiB"
    detail = f"{free / GIB:.0f} GiB free under {existing}; checkpoints need {unit}"
    if not keep or keep <= 0:
        return Check("disk", "warn", detail + " (never pruned: grows every save)", "set KEEP_CKPTS")
    if free < need:
        return Check("disk", "fail", detail, "free disk, set RUN_DIR on a larger volume, or lower KEEP_CKPTS")
    return Check("disk", "ok", detail)


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m spade_envs.cli.run_checks wandb``: exit 0 when wandb can start here, 1 (with the reason) when not."""
    args = list(sys.argv[1:] if argv is None else argv)
    if args != ["wandb"]:
        print("usage: python -m spade_envs.cli.run_checks wandb", file=sys.stderr)
        return 2
    ready, why = wandb_ready()
    print(why)
    return 0 if ready else 1


if __name__ == "__main__":
    raise SystemExit(main())
