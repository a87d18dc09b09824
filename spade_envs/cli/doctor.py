"""``spade-envs doctor``: a preflight of this machine (or a cluster node) for a SPADE run, one line per check.

A missing sandbox level, a wrong verl, a corpus typo or an absent vLLM otherwise shows up only after minutes of Ray
start-up, deep in a log. Every check here is framework-free at import time: torch, verl, vLLM and megatron-core
are looked up inside the checks that need them. Exit status 0 when nothing failed (warnings allowed), else 1.

``--launcher examples/run_spade_30b.sh`` checks what that launcher runs: its Hydra overrides are read from the
launcher itself (``DRY_RUN=1``), or given after ``--`` (what ``examples/lib/launch.sh`` does before every launch),
including its logger and the free disk its checkpoints need (``spade_envs/cli/run_checks.py``).
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.metadata
import importlib.util
import json
import logging
import os
import socket
import subprocess
import sys
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

from spade_envs.cli.preflight import Check, check_spade_block
from spade_envs.cli.run_checks import disk_check, logger_check

__all__ = ["Plan", "add_arguments", "main", "plan_of", "run_args", "run_doctor"]

_ROOT = Path(__file__).resolve().parents[2]
#: The verl pin of the recipe (a file, so that doctor reads it without importing the recipe).
DEFAULT_VERL_PIN = _ROOT / "recipe" / "spade" / "REQUIRED_VERL.txt"
#: Values of the recipe's ``spade:`` block the checks read when the launcher does not override them
#: (``recipe/spade/config/spade/default.yaml``; a test keeps the two equal).
SPADE_DEFAULTS: dict[str, Any] = {
    "setting": "games",
    "corpus": None,
    "skills": {"names": None},
    "designer": {"grounding": "corpus"},
    "fixed_env": {"enable": False, "pool_dir": None},
    "sandbox": {"isolation": "auto", "pool_size": 4, "pool_max_ready": 64, "memory_mb": 1024},
}
_GPU_INSTALL = "pip install -e '.[gpu]' on a GPU node (docs/gpu.md has the exact commands)"


class Plan:
    """What a launch runs, as far as the checks care: config name and Hydra overrides (``key=value``)."""

    def __init__(self, config_name: str | None, overrides: Sequence[str], launcher: str | None = None) -> None:
        self.config_name, self.launcher = config_name, launcher
        self.values: dict[str, str] = {}
        for item in overrides:
            key, sep, value = item.lstrip("+~").partition("=")
            if sep:
                self.values[key] = value

    @property
    def known(self) -> bool:
        """Whether a launch was described at all (else: a machine check only)."""
        return bool(self.config_name or self.values)

    @property
    def cpu(self) -> bool:
        return self.values.get("backend") == "cpu" or self.values.get("trainer.device") == "cpu"

    @property
    def rollout(self) -> str:
        return self.values.get("actor_rollout_ref.rollout.name", "hf" if self.cpu else "vllm")

    @property
    def megatron(self) -> bool:
        return "megatron" in (self.config_name or "")

    def spade(self) -> dict[str, Any]:
        """The ``spade:`` block: the recipe's defaults with this launch's ``spade.*`` overrides applied."""
        block = json.loads(json.dumps(SPADE_DEFAULTS))
        for key, value in self.values.items():
            if not key.startswith("spade."):
                continue
            *parents, leaf = key.split(".")[1:]
            node = block
            for part in parents:
                node = node.setdefault(part, {})
            node[leaf] = _value(value)
        return block


def _value(text: str) -> Any:
    """A Hydra override value as Python: null, booleans, numbers, ``[a,b]`` lists, else the string."""
    if text.startswith("[") and text.endswith("]"):
        return [_value(t.strip()) for t in text[1:-1].split(",") if t.strip()]
    lowered = text.lower()
    if lowered in ("null", "none", "~"):
        return None
    if lowered in ("true", "false"):
        return lowered == "true"
    for kind in (int, float):
        with contextlib.suppress(ValueError):
            return kind(text)
    return text.strip("'\"")


def plan_of(launcher: str, extra: Sequence[str] = ()) -> Plan:
    """Read a launcher's config name and overrides by running it with ``DRY_RUN=1`` (it prints them, runs nothing).

    Raises:
        RuntimeError: the launcher refused to plan (a required variable unset, a bad layout): its message.
    """
    env = {"PYTHON": sys.executable, **os.environ, "DRY_RUN": "1", "SKIP_DOCTOR": "1"}
    run = subprocess.run(["bash", launcher, *extra], capture_output=True, text=True, env=env, timeout=120)
    if run.returncode != 0:
        why = [line for line in run.stderr.splitlines() if not line.startswith("+")][-1:] or ["no message"]
        raise RuntimeError(f"{launcher} (DRY_RUN=1) exited {run.returncode}: {why[0]}")
    lines = run.stdout.splitlines()
    config = next((ln.split("config ", 1)[1].split(",")[0] for ln in lines if ln.startswith("== SPADE plan")), None)
    marker = lines.index("== overrides (DRY_RUN) ==") if "== overrides (DRY_RUN) ==" in lines else len(lines)
    return Plan(config, [ln for ln in lines[marker + 1 :] if "=" in ln], launcher)


# -- the checks ---------------------------------------------------------------------------------------------------
def _python() -> Check:
    version = ".".join(map(str, sys.version_info[:3]))
    if (3, 10) <= sys.version_info[:2] <= (3, 12):
        return Check("python", "ok", f"{version} ({sys.executable})")
    return Check("python", "fail", f"{version}: SPADE supports 3.10-3.12", "use Python 3.12 (GPU) or 3.10-3.12 (CPU)")


def _torch(plan: Plan) -> Check:
    try:
        import torch
    except ImportError as exc:
        return Check("torch", "fail", f"not importable ({exc})", "pip install -e . (CPU) or " + _GPU_INSTALL)
    needs = plan.known and not plan.cpu
    if not torch.cuda.is_available():
        if needs:
            return Check("torch", "fail", f"torch {torch.__version__}, no CUDA device visible; this launch needs GPUs",
                         "run on a GPU node with the CUDA build of torch (" + _GPU_INSTALL + ")")  # fmt: skip
        return Check("torch", "ok", f"torch {torch.__version__}, CPU only (no CUDA: the CPU backend runs)")
    count = torch.cuda.device_count()
    wanted = int(plan.values.get("trainer.n_gpus_per_node", "0") or 0) if needs else 0
    detail = f"torch {torch.__version__}, CUDA {torch.version.cuda}, {count} x {torch.cuda.get_device_name(0)}"
    if wanted > count:
        return Check("torch", "fail", f"{detail}; the launch asks for {wanted} GPUs per node",
                     "set GPUS_PER_NODE (trainer.n_gpus_per_node) to the GPUs this node has")  # fmt: skip
    return Check("torch", "ok", detail)


def _verl(pin_file: Path) -> Check:
    try:
        pin = pin_file.read_text(encoding="utf-8").strip()
    except OSError:
        return Check("verl", "warn", f"no pin file {pin_file}", "run doctor from a checkout of this repository")
    wanted = pin.split("==", 1)[-1]
    try:
        found = importlib.metadata.version("verl")
    except importlib.metadata.PackageNotFoundError:
        return Check("verl", "fail", f"not installed; the recipe needs {pin}", f"pip install '{pin}' (make install)")
    if found != wanted:
        return Check("verl", "fail", f"verl {found} is installed; the recipe is written against {pin} ({pin_file})",
                     f"pip install '{pin}' (the recipe patches and subclasses that exact version)")  # fmt: skip
    return Check("verl", "ok", f"{found} (pinned {pin})")


def _package(name: str, module: str, needed: bool, why: str, fix: str) -> Check:
    try:
        version = importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        version = None
    if version and importlib.util.find_spec(module) is not None:
        return Check(name, "ok", f"{version}")
    if needed:
        return Check(name, "fail", f"not installed; {why}", fix)
    return Check(name, "ok", "not installed (not needed here; GPU launchers need it: --launcher checks one)")


@contextlib.contextmanager
def _quiet_logger(name: str) -> Iterator[None]:
    """The sandbox logs every unavailable level as a warning; here they become the check's own line."""
    logger = logging.getLogger(name)
    level = logger.level
    logger.setLevel(logging.ERROR)
    try:
        yield
    finally:
        logger.setLevel(level)


def _reason(message: str, level: str) -> str:
    """The probe's reason for one level, without the advice every level's message repeats."""
    reason = message.split(f"{level}: ", 1)[-1].split("). Install", 1)[0].split("; ", 1)[0].split(" (check", 1)[0]
    return reason.removeprefix("start: ")[:110]


def _sandbox(sandbox: Mapping[str, Any]) -> list[Check]:
    from spade_envs.sandbox.uids import user_label

    status = "ok" if os.geteuid() == 0 else "warn"
    fix = "" if status == "ok" else "start the trainer as root in its container to give each worker a uid of its own"
    return [*_sandbox_level(sandbox), Check("sandbox-uid", status, user_label(), fix)]


def _sandbox_level(sandbox: Mapping[str, Any]) -> list[Check]:
    from spade_envs.sandbox import ISOLATION_LEVELS, SandboxConfig, SandboxUnavailable, probe_isolation

    memory_mb = int(sandbox.get("memory_mb") or 1024)
    wanted = str(sandbox.get("isolation") or "auto")
    works, why = [], {}
    with _quiet_logger("spade_envs.sandbox.pool"):
        for level in ISOLATION_LEVELS[:-1]:
            try:
                probe_isolation(SandboxConfig(isolation=level, memory_mb=memory_mb))
                works.append(level)
            except (SandboxUnavailable, ValueError) as exc:
                why[level] = _reason(str(exc), level)
    fixes = {"bwrap": "apt-get install bubblewrap (and allow unprivileged user namespaces)",
             "landlock": "a kernel with Landlock (>= 5.13) enabled in the LSM list",
             "rlimits": "an interpreter readable by every uid (or use bwrap / landlock)"}  # fmt: skip
    levels = ", ".join(works) if works else "none"
    missing = "; ".join(f"{lvl} unavailable ({reason})" for lvl, reason in why.items())
    detail = f"levels that work here: {levels}" + (f"; {missing}" if missing else "")
    if wanted == "none":
        return [Check("sandbox", "warn", f"isolation none (no protection: trusted built-ins only); {detail}",
                      "set spade.sandbox.isolation=auto for generated code")]  # fmt: skip
    if wanted == "auto":
        if not works:
            return [Check("sandbox", "fail", detail, f"install one: {fixes['bwrap']}; or {fixes['landlock']}")]
        status = "ok" if works[0] == "bwrap" else "warn"
        return [Check("sandbox", status, f"auto picks {works[0]}; {detail}", fixes["bwrap"])]
    if wanted not in works:
        return [Check("sandbox", "fail", f"spade.sandbox.isolation={wanted} does not work here; {detail}",
                      fixes.get(wanted, "") + (f", or set spade.sandbox.isolation=auto (picks {works[0]})"
                                               if works else ""))]  # fmt: skip
    return [Check("sandbox", "ok", f"isolation {wanted} works; {detail}")]


def _seccomp() -> Check:
    for module in ("seccomp", "pyseccomp"):
        with contextlib.suppress(ImportError, OSError):
            __import__(module)
            return Check("seccomp", "ok", f"{module} importable (the sandbox loads a deny-list filter)")
    return Check("seccomp", "fail", "neither python3-seccomp nor pyseccomp is importable",
                 "apt-get install python3-seccomp, or pip install pyseccomp")  # fmt: skip


def _memory(sandbox: Mapping[str, Any]) -> Check:
    from spade_envs.sandbox.config import SandboxConfig

    defaults = SandboxConfig()
    pool, limit = int(sandbox.get("pool_size") or 0), int(sandbox.get("memory_mb") or 1024)
    max_ready, max_workers = (
        int(sandbox.get(key, getattr(defaults, key)) or 0) for key in ("pool_max_ready", "max_workers")
    )
    grown = max(pool, min(max_ready, max_workers))  # the ready queue grows to the demand it has seen, up to this
    try:
        meminfo = dict(line.split(":", 1) for line in Path("/proc/meminfo").read_text().splitlines())
        available = int(meminfo["MemAvailable"].split()[0]) // 1024
    except (OSError, KeyError, ValueError):
        return Check("memory", "warn", "cannot read MemAvailable from /proc/meminfo", "check free memory by hand")
    need = pool * limit
    detail = f"{available / 1024:.1f} GiB available; the sandbox pool holds {pool} ready workers of up to {limit} MB"
    if available < max(pool, 1) * 64:
        return Check("memory", "fail", detail, "free memory, or lower spade.sandbox.pool_size")
    if available < grown * 64:  # an idle pre-started worker holds tens of MB (numpy loaded)
        return Check("memory", "warn", detail + f", and up to {grown} (pool_max_ready) as the demand grows, "
                     f"~{grown * 64 / 1024:.1f} GiB idle per sandbox pool (one per agent-loop worker process)",
                     "lower spade.sandbox.pool_max_ready (0 keeps pool_size only)")  # fmt: skip
    if available < need:
        return Check("memory", "warn", detail + f" ({need / 1024:.1f} GiB if all grow)",
                     "lower spade.sandbox.pool_size or spade.sandbox.memory_mb")  # fmt: skip
    return Check(
        "memory", "ok", detail + (f", up to {grown} as the demand grows (pool_max_ready)" if grown > pool else "")
    )


def _model(plan: Plan) -> Check:
    path = plan.values.get("actor_rollout_ref.model.path")
    if path is None:
        if plan.cpu:
            return Check("model", "ok", "tiny random Qwen3 (built on first use)")
        return Check("model", "ok" if not plan.known else "warn", "no actor_rollout_ref.model.path given",
                     "set MODEL_PATH (actor_rollout_ref.model.path)")  # fmt: skip
    if path == "tiny":
        return Check("model", "ok", "tiny random Qwen3 (built on first use)")
    local = Path(path).expanduser()
    if local.is_dir():
        if (local / "config.json").is_file():
            return Check("model", "ok", f"{local} (config.json present)")
        return Check("model", "fail", f"{local} has no config.json", "point MODEL_PATH at a Hugging Face model folder")
    if path.startswith(("/", ".", "~")) or path.count("/") != 1:
        return Check("model", "fail", f"{path} does not exist", "set MODEL_PATH to a model folder or a Hub id")
    hub = Path(os.environ.get("HF_HOME", Path.home() / ".cache" / "huggingface")) / "hub"
    if (hub / f"models--{path.replace('/', '--')}").is_dir():
        return Check("model", "ok", f"{path} (in the Hugging Face cache)")
    return Check("model", "warn", f"{path} is a Hub id not in the local cache: every node downloads it at start",
                 f"huggingface-cli download {path} (or set MODEL_PATH to a local copy)")  # fmt: skip


def _ray(address: str) -> Check:
    if address == "auto":
        current = Path("/tmp/ray/ray_current_cluster")
        if not current.is_file():
            return Check("ray", "fail", "RAY_ADDRESS=auto but no local Ray cluster", "ray start --head on this node")
        address = current.read_text().strip()
    parsed = urlparse(address if "://" in address else f"ray://{address}")
    host, port = parsed.hostname, parsed.port or 6379
    try:
        with socket.create_connection((host or "127.0.0.1", port), timeout=3):
            pass
    except OSError as exc:
        return Check("ray", "fail", f"{address}: cannot connect ({exc.strerror or exc})",
                     "start the head (ray start --head) or fix RAY_ADDRESS")  # fmt: skip
    return Check("ray", "ok", f"{address} reachable")


def run_doctor(plan: Plan, verl_pin: Path = DEFAULT_VERL_PIN, ray_address: str | None = None) -> list[Check]:
    """Every check for ``plan`` (an empty plan: this machine only), in a stable order."""
    spade = plan.spade()
    checks = [_python(), _torch(plan), _verl(verl_pin)]
    checks.append(_package("vllm", "vllm", plan.known and plan.rollout == "vllm", "this launch's rollout is vLLM",
                           _GPU_INSTALL))  # fmt: skip
    checks.append(_package("megatron-core", "megatron.core", plan.megatron, "this launch uses the Megatron engine",
                           "pip install -e '.[gpu,megatron]' (docs/gpu.md)"))  # fmt: skip
    checks += _sandbox(spade["sandbox"])
    checks += [_seccomp(), _memory(spade["sandbox"])]
    if plan.known:
        variant = plan.values.get("reward.reward_kwargs.designer.variant")
        checks += check_spade_block(spade, variant)
    checks.append(_model(plan))
    if plan.known:  # what fails late: the logger after the model load, the disk at the first checkpoints
        values = {key: _value(value) for key, value in plan.values.items()}
        checks += [logger_check(values), disk_check(values, plan.megatron)]
    if ray_address:
        checks.append(_ray(ray_address))
    return checks


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Add doctor's options to ``parser`` (``spade-envs doctor`` and ``python -m spade_envs.cli.doctor``)."""
    parser.add_argument("--launcher", help="check what this launcher needs (read from it with DRY_RUN=1)")
    parser.add_argument("--config-name", help="the launch's Hydra config (with overrides given after --)")
    parser.add_argument("--ray-address", default=os.environ.get("RAY_ADDRESS"),
                        help="check that this Ray cluster answers (default $RAY_ADDRESS)")  # fmt: skip
    parser.add_argument("--verl-pin", type=Path, default=DEFAULT_VERL_PIN, help="the verl pin file to check against")
    parser.add_argument("--quiet", action="store_true", help="print only warnings, failures and the summary")
    parser.add_argument("overrides", nargs="*", help="the launch's Hydra overrides (key=value), after --")


def run_args(args: argparse.Namespace) -> int:
    """Run the checks ``args`` ask for and print them; 0 when none failed, else 1."""
    if args.launcher and not (args.config_name or args.overrides):
        try:
            plan = plan_of(args.launcher)
        except (RuntimeError, OSError, subprocess.TimeoutExpired) as exc:
            print(Check("launcher", "fail", str(exc), "set the variables the launcher names").line())
            return 1
    else:
        plan = Plan(args.config_name, args.overrides, args.launcher)
    checks = run_doctor(plan, args.verl_pin, args.ray_address)
    for check in checks:
        if not args.quiet or check.status != "ok":
            print(check.line(), flush=True)
    counts = {s: sum(c.status == s for c in checks) for s in ("ok", "warn", "fail")}
    target = f" for {Path(args.launcher).name}" if args.launcher else ""
    print(f"doctor{target}: {counts['ok']} ok, {counts['warn']} warn, {counts['fail']} fail"
          + (" (SKIP_DOCTOR=1 skips this check)" if counts["fail"] and args.launcher else ""))  # fmt: skip
    return 1 if counts["fail"] else 0


def main(argv: Sequence[str] | None = None) -> int:
    """Parse ``argv`` (default ``sys.argv[1:]``) and run; returns the exit status."""
    parser = argparse.ArgumentParser(prog="spade-envs doctor", description=__doc__.splitlines()[0])
    add_arguments(parser)
    return run_args(parser.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
