"""``spade-envs doctor`` and the shared ``spade:`` block checks: real checks on this machine, and each broken input
(missing corpus, wrong verl pin, absent sandbox level, bad pool or names) a ``fail`` line that says what to do."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from omegaconf import OmegaConf

from spade_envs.cli.doctor import SPADE_DEFAULTS, Plan
from spade_envs.cli.doctor import main as doctor_main
from spade_envs.cli.main import main as cli_main
from spade_envs.cli.preflight import (
    Check,
    SpadeConfigError,
    check_spade_block,
    exit_on_bad_spade_block,
    require_spade_block,
)

ROOT = Path(__file__).resolve().parents[3]
TINY = ROOT / "examples" / "run_spade_tiny_cpu.sh"
CORPUS = ROOT / "examples" / "data" / "sample_corpus.jsonl"
CPU = ["--config-name", "spade_trainer", "--", "backend=cpu"]


def lines_of(text: str) -> list[str]:
    return [line for line in text.splitlines() if line.strip()]


def doctor(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "spade_envs.cli.doctor", *args], capture_output=True, text=True,
                          timeout=300, cwd=ROOT, env=env)  # fmt: skip


def test_doctor_passes_on_this_machine_for_the_tiny_cpu_launcher():
    run = doctor("--launcher", str(TINY))  # the launcher's overrides are read from it (DRY_RUN=1)
    out = lines_of(run.stdout)
    assert run.returncode == 0, run.stdout + run.stderr
    checks, summary = out[:-1], out[-1]
    assert all(line.split()[0] in ("ok", "warn") for line in checks), out
    names = [line.split()[1].rstrip(":") for line in checks]
    assert {"python", "torch", "verl", "vllm", "sandbox", "seccomp", "memory", "corpus", "model", "logger",
            "disk"} <= set(names)  # fmt: skip
    sandbox = next(line for line in checks if line.split()[1] == "sandbox:")
    assert "auto picks " in sandbox and "levels that work here: " in sandbox
    uid = next(line for line in checks if line.split()[1] == "sandbox-uid:")  # issue 24: who the workers run as
    assert ("a host uid of its own" if os.geteuid() == 0 else "cannot get a uid of their own") in uid, uid
    assert summary.startswith("doctor for run_spade_tiny_cpu.sh: ") and summary.endswith(" 0 fail")
    assert "first 5 lines: 5 documents" in next(line for line in checks if " corpus:" in line)


def test_a_missing_corpus_fails_with_its_fix(capsys, tmp_path):
    status = doctor_main([*CPU, f"spade.corpus={tmp_path / 'nope.jsonl'}"])
    out = capsys.readouterr().out
    assert status == 1
    (line,) = [ln for ln in out.splitlines() if ln.startswith("fail")]
    assert line.startswith(f"fail corpus: {tmp_path / 'nope.jsonl'} does not exist") and "-> set spade.corpus" in line
    assert out.splitlines()[-1].endswith("1 fail")


def test_a_wrong_verl_pin_fails_with_the_install_command(capsys, tmp_path):
    pin = tmp_path / "REQUIRED_VERL.txt"
    pin.write_text("verl==0.0.1\n")
    status = doctor_main(["--verl-pin", str(pin), *CPU, f"spade.corpus={CORPUS}"])
    (line,) = [ln for ln in capsys.readouterr().out.splitlines() if ln.startswith("fail")]
    assert status == 1
    assert line.startswith("fail verl: verl 0.9.1 is installed; the recipe is written against verl==0.0.1")
    assert "-> pip install 'verl==0.0.1'" in line


def test_an_absent_sandbox_level_fails_with_its_fix(tmp_path):
    # A PATH without bubblewrap: the bwrap level cannot start here, as on a node without the package.
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for tool in ("bash", "env"):
        if shutil.which(tool):
            (bin_dir / tool).symlink_to(shutil.which(tool))
    env = {**os.environ, "PATH": str(bin_dir)}
    run = doctor(*CPU, f"spade.corpus={CORPUS}", "spade.sandbox.isolation=bwrap", env=env)
    assert run.returncode == 1, run.stdout + run.stderr
    (line,) = [ln for ln in run.stdout.splitlines() if ln.startswith("fail")]
    assert line.startswith("fail sandbox: spade.sandbox.isolation=bwrap does not work here")
    assert "bwrap unavailable (bubblewrap (bwrap) is not installed)" in line
    assert "-> apt-get install bubblewrap" in line and "or set spade.sandbox.isolation=auto (picks " in line


def test_a_launcher_that_cannot_plan_is_one_fail_line(tmp_path):
    script = tmp_path / "run_broken.sh"
    script.write_text("echo 'error: MODEL_PATH must be set' >&2\nexit 1\n")
    run = doctor("--launcher", str(script))
    assert run.returncode == 1
    assert lines_of(run.stdout)[0].startswith("fail launcher: ") and "MODEL_PATH must be set" in run.stdout


def test_the_cli_hosts_doctor_and_quiet_prints_only_the_verdict(capsys):
    assert cli_main(["doctor", "--quiet", *CPU, f"spade.corpus={CORPUS}"]) == 0
    out = lines_of(capsys.readouterr().out)
    assert all(not line.startswith("ok ") for line in out) and out[-1].startswith("doctor: ")


def test_overrides_become_the_spade_block_the_recipe_would_see():
    plan = Plan("spade_megatron_trainer", ["spade.skills.names=[optimization,causal_inference]",
                                           "++spade.fixed_env.enable=true", "spade.sandbox.pool_size=8",
                                           "actor_rollout_ref.rollout.name=vllm", "spade.corpus=null"])  # fmt: skip
    block = plan.spade()
    assert block["skills"]["names"] == ["optimization", "causal_inference"]
    assert block["fixed_env"] == {"enable": True, "pool_dir": None} and block["sandbox"]["pool_size"] == 8
    assert block["corpus"] is None and plan.megatron and plan.rollout == "vllm" and not plan.cpu
    assert Plan(None, ["backend=cpu"]).rollout == "hf"


def test_doctors_defaults_are_the_recipes_defaults():
    recipe = OmegaConf.to_container(OmegaConf.load(ROOT / "recipe/spade/config/spade/default.yaml"))["spade"]

    def same(ours: dict, theirs: dict) -> None:
        for key, value in ours.items():
            if isinstance(value, dict):
                same(value, theirs[key])
            else:
                assert theirs[key] == value, key

    same(SPADE_DEFAULTS, recipe)


# -- the spade: block checks shared with main_spade -----------------------------------------------------------------
def block(**changes) -> dict:
    spade = json.loads(json.dumps(SPADE_DEFAULTS)) | {"corpus": str(CORPUS)}
    return spade | changes


def fails(spade: dict, variant: str | None = None) -> list[Check]:
    return [c for c in check_spade_block(spade, variant) if c.status == "fail"]


def test_the_sample_setup_passes():
    assert fails(block(), "blend") == []


def test_unknown_names_fail_and_name_the_known_ones():
    (bad,) = fails(block(skills={"names": ["juggling"]}))
    assert "unknown games skills ['juggling']" in bad.detail and "mathematical_reasoning" in bad.fix
    (bad,) = fails(block(), "regrets")
    assert "variant is 'regrets'" in bad.detail and "blend" in bad.fix
    (bad,) = fails(block(setting="board_games"))
    assert bad.name == "setting" and "games, tool_use" in bad.fix


def test_no_measurement_plays_fail_before_the_run():
    """spade.plays_per_arm=0 used to pass every check and then raise ZeroDivisionError in the designer loop."""
    for plays in (0, -1, 1.5, True):
        (bad,) = fails(block(plays_per_arm=plays))
        assert bad.name == "plays" and "spade.plays_per_arm is" in bad.detail and "1 or more" in bad.fix
    assert not fails(block(plays_per_arm=1))


def test_a_corpus_whose_first_lines_are_not_documents_fails(tmp_path):
    corpus = tmp_path / "c.jsonl"
    corpus.write_text('{"title": "no text"}\nnot json\n[1, 2]\n')
    (bad,) = fails(block(corpus=str(corpus)))
    assert "none of its first 3 lines is a JSON object with a non-empty 'orig_doc' or 'text'" in bad.detail
    assert fails(block(corpus=None)) and not fails(block(corpus=None, designer={"grounding": "concepts"}))


def test_a_fixed_pool_needs_its_folder_manifest_and_env_files(tmp_path):
    def pool_fail(pool_dir) -> str:
        (bad,) = fails(block(fixed_env={"enable": True, "pool_dir": str(pool_dir)}))
        return bad.detail

    assert "is not a folder" in pool_fail(tmp_path / "absent")
    assert "has no manifest.jsonl" in pool_fail(tmp_path)
    (tmp_path / "manifest.jsonl").write_text(json.dumps({"env_id": "e1", "valid": True, "skill": "optimization"}))
    assert "1 of 1 valid envs have no envs/<env_id>.py" in pool_fail(tmp_path)
    (tmp_path / "envs").mkdir()
    (tmp_path / "envs" / "e1.py").write_text("class E1Env: ...\n")
    assert not fails(block(fixed_env={"enable": True, "pool_dir": str(tmp_path)}))


def test_exit_on_a_bad_block_is_one_line_and_status_1(capsys):
    with pytest.raises(SystemExit) as stop:
        exit_on_bad_spade_block(block(corpus="/nonexistent.jsonl"))
    assert stop.value.code == 1
    (line,) = capsys.readouterr().err.splitlines()
    assert line.startswith("spade: bad config: /nonexistent.jsonl does not exist")
    with pytest.raises(SpadeConfigError, match="unknown games skills"):  # a ValueError too, for library callers
        require_spade_block(block(skills={"names": ["juggling"]}))


def test_the_model_check_tells_a_missing_folder_from_a_hub_id(tmp_path, monkeypatch):
    from spade_envs.cli.doctor import _model

    def model(path: str) -> Check:
        return _model(Plan("spade_trainer", [f"actor_rollout_ref.model.path={path}"]))

    assert model(str(tmp_path / "absent")).status == "fail"
    assert model(str(tmp_path)).detail.endswith("has no config.json")
    (tmp_path / "config.json").write_text("{}")
    assert model(str(tmp_path)).status == "ok"
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    hub = model("Qwen/Qwen3-8B")
    assert hub.status == "warn" and "huggingface-cli download Qwen/Qwen3-8B" in hub.fix
    (tmp_path / "hf" / "hub" / "models--Qwen--Qwen3-8B").mkdir(parents=True)
    assert model("Qwen/Qwen3-8B").status == "ok"


def test_the_ray_check_connects_to_the_address():
    import socket

    from spade_envs.cli.doctor import _ray

    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        port = server.getsockname()[1]
        assert _ray(f"http://127.0.0.1:{port}").status == "ok"
    closed = _ray(f"127.0.0.1:{port}")
    assert closed.status == "fail" and "cannot connect" in closed.detail and "ray start --head" in closed.fix


def test_importing_doctor_loads_no_framework():
    frameworks = "('verl', 'torch', 'ray', 'hydra')"
    code = f"import sys, spade_envs.cli.doctor; print([m for m in {frameworks} if m in sys.modules])"
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert run.stdout.strip() == "[]", run.stdout + run.stderr


def test_the_memory_check_counts_the_ready_queue_grown_to_the_demand():
    """The pool keeps up to ``pool_max_ready`` idle workers (issue 31), not ``pool_size``: their memory counts."""
    from spade_envs.cli.doctor import _memory

    available_mb = int(Path("/proc/meminfo").read_text().split("MemAvailable:")[1].split()[0]) // 1024
    grown = available_mb // 64 + 1  # idle workers of 64 MB that would not fit
    sandbox = {"pool_size": 1, "memory_mb": 1, "max_workers": grown}
    check = _memory({**sandbox, "pool_max_ready": grown})
    assert check.status == "warn" and f"up to {grown} (pool_max_ready)" in check.detail, check
    assert "spade.sandbox.pool_max_ready" in check.fix
    assert _memory({**sandbox, "pool_max_ready": 0}).status == "ok"  # 0 keeps pool_size only
