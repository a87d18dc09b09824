"""Every launcher's overrides compose against verl 0.9.1's real config and pass verl's own validation.

Each script runs with DRY_RUN=1 (it prints its plan and overrides, starts nothing); the overrides are composed with
Hydra on recipe/spade/config and checked by ``verl.utils.config.validate_config`` and verl's config dataclasses, so
a stale key or an invalid parallel layout fails here, not on a GPU node.
"""

import os
import re
import subprocess
import sys
from functools import cache
from pathlib import Path

import pytest
from hydra import compose, initialize_config_dir
from verl.trainer.ppo.utils import need_critic, need_reference_policy
from verl.utils.config import omega_conf_to_dataclass, validate_config

from recipe.spade.budget import budget_of, designer_rows

ROOT = Path(__file__).resolve().parents[2]
CONFIG_DIR = str(ROOT / "recipe" / "spade" / "config")
EXAMPLES = ROOT / "examples"
# Every launcher under examples/ (examples/lib holds the shared shell and Python helpers, not launchers).
SCRIPTS = sorted(
    str(p.relative_to(EXAMPLES)) for p in EXAMPLES.rglob("*.sh") if p.relative_to(EXAMPLES).parts[0] != "lib"
)
# The multinode launcher requires absolute paths on shared storage; every launcher accepts them.
SHARED = {"RUN_DIR": "/shared/spade-run", "CORPUS": "/shared/corpus.jsonl"}


@cache
def _dry_run(script: str, extra: tuple[str, ...], env: tuple[tuple[str, str], ...]) -> tuple[str, str, tuple[str, ...]]:
    """One DRY_RUN per launcher and environment per test session (each prints its budget with a Hydra compose)."""
    out = subprocess.run(
        ["bash", str(EXAMPLES / script), *extra],
        capture_output=True, text=True, timeout=300,
        env={**os.environ, "PYTHON": sys.executable, "DRY_RUN": "1", **dict(env)},
    )  # fmt: skip
    assert out.returncode == 0, out.stderr[-2000:]
    config_name = re.search(r"== SPADE plan: config (\S+),", out.stdout).group(1)
    budget = re.findall(r"^budget: .*$", out.stdout, re.MULTILINE)
    assert len(budget) == 1, f"{script} printed {len(budget)} budget lines"
    return config_name, budget[0], tuple(out.stdout.split("== overrides (DRY_RUN) ==\n", 1)[1].splitlines())


def dry_run(script: str, *extra: str, **env: str) -> tuple[str, list[str]]:
    """The launcher's config name and Hydra overrides, as its ``DRY_RUN=1`` prints them."""
    config_name, _, overrides = _dry_run(script, extra, tuple(sorted(env.items())))
    return config_name, list(overrides)


def budget_line(script: str, *extra: str, **env: str) -> str:
    """The ``budget:`` line the launcher's ``DRY_RUN=1`` prints."""
    return _dry_run(script, extra, tuple(sorted(env.items())))[1]


def composed(config_name: str, overrides: list[str]):
    with initialize_config_dir(config_dir=CONFIG_DIR, version_base=None):
        cfg = compose(config_name=config_name, overrides=overrides)
    validate_config(config=cfg, use_reference_policy=need_reference_policy(cfg), use_critic=need_critic(cfg))
    omega_conf_to_dataclass(cfg.actor_rollout_ref.rollout)
    return cfg


def test_there_is_a_launcher_for_each_use():
    assert {"run_spade_30b.sh", "run_spade_8b.sh", "run_spade_4b.sh", "run_spade_fixed_env.sh",
            "run_spade_multinode.sh", "run_spade_tiny_cpu.sh", "gpu_smoke.sh"} <= set(SCRIPTS)  # fmt: skip
    paper = {f"run_spade_{setting}_{size}.sh" for setting in ("games", "tool_use") for size in ("4b", "8b", "30b")}
    ablations = {f"ablations/{name}.sh" for name in ("no_corpus", "no_memory", "no_designer_training", "two_skills",
                                                     "solve_rate", "learning_potential", "regret_based")}  # fmt: skip
    assert paper | ablations <= set(SCRIPTS)


def test_the_games_30b_command_prints_the_papers_budget():
    # The issue's first check: 24 designs per regeneration, 192 samples per step (168 agent + 24 designer); the
    # measurement: 8 plays per arm in three arms (no hint, hint, placebo: spade.hint.placebo) per design.
    assert budget_line("run_spade_30b.sh") == (
        "budget: designs_per_regen=24 samples_per_step=192 agent_samples_regen_step=168 "
        "measurement_plays_per_regen=576 measurement_arms=3"
    )


def test_a_design_count_that_is_not_a_multiple_of_n_is_refused():
    out = subprocess.run(["bash", str(EXAMPLES / "run_spade_30b.sh")], capture_output=True, text=True, timeout=60,
                         env={**os.environ, "DRY_RUN": "1", "ENVS_PER_REGEN": "20"})  # fmt: skip
    assert out.returncode != 0 and "ENVS_PER_REGEN=20 designs is not a multiple of N=8" in out.stderr


@pytest.mark.parametrize("script", SCRIPTS)
def test_launcher_composes_and_validates(script):
    config_name, overrides = dry_run(script, **SHARED)
    cfg = composed(config_name, overrides)
    n = cfg.actor_rollout_ref.rollout.n
    assert cfg.data.train_batch_size == cfg.spade.agent_rows_per_step + designer_rows(cfg.spade, n)
    assert budget_line(script, **SHARED) == budget_of(cfg).line()
    assert not any(o.startswith(("reward_model.", "custom_reward_function")) for o in overrides), "legacy keys"


def test_30b_is_the_megatron_layout_the_issue_asks_for():
    config_name, overrides = dry_run("run_spade_30b.sh")
    cfg = composed(config_name, overrides)
    actor, rollout = cfg.actor_rollout_ref.actor, cfg.actor_rollout_ref.rollout
    assert actor.strategy == "megatron" and actor.megatron.tensor_model_parallel_size == 4
    assert actor.megatron.expert_model_parallel_size == 8 and actor.megatron.sequence_parallel
    assert actor.megatron.optimizer_offload and rollout.name == "vllm"
    assert rollout.expert_parallel_size == rollout.tensor_model_parallel_size * rollout.data_parallel_size


@pytest.mark.parametrize(
    "bad",
    [
        "actor_rollout_ref.actor.megatron.grad_offload=true",  # removed in verl 0.9.1
        "spade.no_such_knob=1",
    ],
)
def test_a_stale_key_fails(bad):
    config_name, overrides = dry_run("run_spade_30b.sh")
    with pytest.raises(Exception, match="grad_offload|no_such_knob"):
        composed(config_name, [*overrides, bad])


def test_an_invalid_parallel_layout_fails():
    config_name, overrides = dry_run("run_spade_30b.sh")
    with pytest.raises(Exception, match="expert"):
        composed(config_name, [*overrides, "actor_rollout_ref.rollout.expert_parallel_size=3"])


@pytest.mark.parametrize("script", [None, "run_spade_tiny_cpu.sh", "gpu_smoke.sh"])
def test_the_default_config_the_quick_start_and_the_gpu_smoke_train_the_designer(script, tmp_path):
    """With one design per skill in a batch (default: 4 designs, 6 skills) every designer advantage used to be 0."""
    import torch
    from omegaconf import OmegaConf

    from recipe.spade.advantages import role_advantages, step_designer_scale
    from recipe.spade.env_pool import SpadeEnvPool

    if script is None:  # the recipe's own defaults, as main_spade composes them (no launcher settings)
        with initialize_config_dir(config_dir=CONFIG_DIR, version_base=None):
            cfg = compose(config_name="spade_trainer")
    else:
        cfg = composed(*dry_run(script, **SHARED))
    spade = OmegaConf.to_container(cfg.spade, resolve=True)
    spade.update(corpus=str(EXAMPLES / "data" / "sample_corpus.jsonl"), run_dir=str(tmp_path))
    designs = budget_of(cfg).designs_per_regen
    pool = SpadeEnvPool(spade)
    skills = [pool.designer_task(0, d)["skill"] for d in range(designs)]
    rewards = [[1.0, 0.0, -1.0, 0.6][d % 4] for d in range(designs)]  # an env each: good, dull, broken, fair
    adv = role_advantages(torch.zeros(designs, 3), torch.ones(designs, 3), rewards, ["designer"] * designs, skills,
                          step_designer_scale(cfg, designs))  # fmt: skip
    assert designs >= 2 and all(a != 0 for a in adv[:, 0].tolist()), (skills, adv[:, 0].tolist())
