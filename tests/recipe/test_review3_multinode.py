"""The multinode Ray job gets the interpreter and the credentials, and no secret is on a command line.

Review 3 (issue 37, finding 23): ``run_spade_multinode.sh`` passed only the 30B knobs to the job. A Ray job does not
inherit the submitting shell: the job ran ``python3`` from the head's PATH, and with no ``WANDB_API_KEY`` the launcher
fell back to the console logger. The interpreter (``PYTHON``, read by ``examples/lib/launch.sh``) is a knob of the
driver and goes on the entrypoint with the others. The credentials go in the job's ``runtime_env`` ``env_vars``
(``--runtime-env`` read from a file descriptor): Ray gives those to every process of the job on every node, which an
entrypoint ``env`` prefix would not (verl's trainer, wandb included, runs in a Ray actor, not in the driver), and
their values are on no command line (``ps``, the job's entrypoint) nor in the ``set -x`` trace; Ray's dashboard masks
``runtime_env`` ``env_vars`` for browsers.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from ray.dashboard.modules.dashboard_sdk import parse_runtime_env_args
from ray.runtime_env.runtime_env import _merge_runtime_env
from test_gpu_readiness import ENV, EXAMPLES, config_of

SECRETS = {"WANDB_API_KEY": "wandb-secret-0451", "HF_TOKEN": "hf-secret-0451"}
# launch.sh's SPADE_JOB_ENV_VARS: what the job's runtime_env carries when set
JOB_ENV_VARS = subprocess.run(["bash", "-c", f"source {EXAMPLES}/lib/launch.sh; echo ${{SPADE_JOB_ENV_VARS[@]}}"],
                              capture_output=True, text=True, check=True).stdout.split()  # fmt: skip


def submit(**env: str) -> subprocess.CompletedProcess:
    """The multinode launcher's DRY_RUN, in an environment holding none of JOB_ENV_VARS but those given."""
    clean = {k: v for k, v in os.environ.items() if k not in JOB_ENV_VARS}
    return subprocess.run(["bash", str(EXAMPLES / "run_spade_multinode.sh")], capture_output=True, text=True,
                          timeout=300, env={**clean, **ENV, "DRY_RUN": "1", **env})  # fmt: skip


def test_the_job_gets_python_and_credentials_and_no_secret_is_printed():
    out = submit(PYTHON=sys.executable, HF_HOME="/shared/hf", **SECRETS)
    assert out.returncode == 0, out.stderr[-2000:]
    line = out.stdout.split("== submit (DRY_RUN) ==\n", 1)[1].splitlines()[0]
    entrypoint = line.split(" -- ", 1)[1]
    assert f" PYTHON={sys.executable} " in entrypoint and "--runtime-env /dev/fd/3" in line.split(" -- ", 1)[0]
    assert "# runtime_env env_vars: HF_HOME=<redacted> HF_TOKEN=<redacted> WANDB_API_KEY=<redacted>" in line
    for value in SECRETS.values():  # neither the plan, the submit line nor bash's trace (set -x) shows a value
        assert value not in out.stdout and value not in out.stderr


def test_without_credentials_the_job_gets_no_runtime_env_names():
    assert {"WANDB_API_KEY", "WANDB_MODE", "HF_TOKEN", "HF_HOME"} <= set(JOB_ENV_VARS)
    out = submit(PYTHON=sys.executable)
    assert out.returncode == 0, out.stderr[-2000:]
    line = out.stdout.split("== submit (DRY_RUN) ==\n", 1)[1].splitlines()[0]
    assert line.rstrip().endswith("# runtime_env env_vars: (none)")


def runtime_env_json(tmp_path, **env: str) -> str:
    """What the launcher hands ``ray job submit --runtime-env``: ``spade_job_runtime_env`` of launch.sh, to a file."""
    out = subprocess.run(["bash", "-c", f"source {EXAMPLES}/lib/launch.sh; spade_job_runtime_env"],
                         capture_output=True, text=True, timeout=60,
                         env={"PATH": os.environ["PATH"], "PYTHON": sys.executable, **env})  # fmt: skip
    assert out.returncode == 0, out.stderr
    path = tmp_path / "runtime_env.yaml"
    path.write_text(out.stdout)
    return str(path)


def test_rays_cli_reads_the_runtime_env_and_verls_ray_init_merges_it(tmp_path, monkeypatch):
    """Ray's CLI parses the launcher's runtime env (``parse_runtime_env_args``, as ``ray job submit`` does); in the
    job, verl's ``ray.init(runtime_env=get_ppo_ray_runtime_env(config))`` is merged with it by Ray's
    ``_merge_runtime_env`` (``ray.init`` fails on a conflict): the credentials reach every worker next to verl's own
    variables, and the job keeps its working directory."""
    from ray._private.runtime_env.constants import RAY_JOB_CONFIG_JSON_ENV_VAR
    from verl.trainer.constants_ppo import get_ppo_ray_runtime_env

    job = parse_runtime_env_args(runtime_env=runtime_env_json(tmp_path, **SECRETS, HF_HOME="/shared/hf"),
                                 working_dir=".")  # fmt: skip
    assert job["env_vars"] == {**SECRETS, "HF_HOME": "/shared/hf"} and job["working_dir"] == "."
    for name, value in job["env_vars"].items():  # the job's driver runs with its runtime_env's variables
        monkeypatch.setenv(name, value)
    monkeypatch.setenv(RAY_JOB_CONFIG_JSON_ENV_VAR, json.dumps({"runtime_env": job}))
    verl = get_ppo_ray_runtime_env(config_of("run_spade_multinode.sh"))
    merged = _merge_runtime_env(job, verl)
    assert merged is not None, "ray.init would fail: the job's and verl's runtime envs conflict"
    assert {k: merged["env_vars"][k] for k in SECRETS} == SECRETS and merged["working_dir"] == "."
    assert set(verl["env_vars"]) <= set(merged["env_vars"]) and "TOKENIZERS_PARALLELISM" in merged["env_vars"]


@pytest.mark.parametrize("value", ['with "quotes" and \\ backslash', "x" * 300])
def test_the_runtime_env_keeps_any_value_verbatim(tmp_path, value):
    job = parse_runtime_env_args(runtime_env=runtime_env_json(tmp_path, WANDB_API_KEY=value))
    assert job == {"env_vars": {"WANDB_API_KEY": value}}
