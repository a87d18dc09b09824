"""``make learn MODE=spade``'s pieces without the trainer: the ladder stand-in's answers pass the recipe's admission
path, the launcher overrides compose against the real config, the hf_ladder rollout is registered, and the per-level
report reads a run record written by the recipe's own record writer. (The run itself: learn_spade.py, minutes.)"""

from __future__ import annotations

from pathlib import Path

import pytest
from hydra import compose, initialize_config_dir
from omegaconf import OmegaConf

from recipe.spade.cpu.ladder_designer import LadderDesignerReplica, ladder_answers
from recipe.spade.laptop import learn_spade
from recipe.spade.recording import design_entry
from spade_envs.browse.run_record import RecordCaps, RunRecord
from spade_envs.builtin.ladder import ladder_source
from spade_envs.design.designer import admit
from spade_envs.design.validate import ValidationConfig
from spade_envs.sandbox import SandboxConfig, WorkerPool

ROOT = Path(__file__).resolve().parents[3]


def test_the_stand_in_answers_each_level_in_turn_and_the_recipe_admits_them():
    answers = ladder_answers(["SayWordEnv", "CompareEnv"])
    first, second, third = next(answers), next(answers), next(answers)
    assert first == third != second
    pool = WorkerPool(SandboxConfig.from_dict({"pool_size": 1}))
    try:
        for name, answer in (("SayWordEnv", first), ("CompareEnv", second)):
            config = ValidationConfig(random_episodes=learn_spade.load_config(fast=False).random_episodes)
            source, report = admit(answer, pool, "games", config, key="step 0 design 0")
            assert report.ok and source == ladder_source(name), report
    finally:
        pool.shutdown()
    with pytest.raises(ValueError, match="must name ladder rungs"):
        ladder_answers(["SayWordEnv", "NoSuchEnv"])
    with pytest.raises(ValueError, match="must name ladder rungs"):
        ladder_answers([])


def test_hf_ladder_is_a_registered_rollout():
    from verl.workers.rollout.replica import RolloutReplicaRegistry

    import recipe.spade.cpu.plugin  # noqa: F401  (registers the CPU rollouts)

    assert RolloutReplicaRegistry.get("hf_ladder") is LadderDesignerReplica


def test_the_launcher_overrides_are_self_play_with_the_stand_in_and_an_untrained_designer(tmp_path):
    cfg = learn_spade.load_config(fast=True, overrides=["run.rows=2"])
    assert cfg.run.steps == 3 and cfg.run.plays_per_arm == 4  # `fast` folded in
    command, env = learn_spade.spade_command(cfg, "tiny", tmp_path / "pool", tmp_path)
    assert env["REGEN_EVERY"] == "1" and env["ENVS_PER_REGEN"] == str(len(cfg.levels)) and env["AGENT_ROWS"] == "2"
    overrides = [o for o in command[2:] if not o.startswith("+ray_kwargs")]
    with initialize_config_dir(config_dir=str(ROOT / "recipe" / "spade" / "config"), version_base=None):
        composed = compose(config_name="spade_trainer", overrides=["backend=cpu", *overrides])
    rollout, spade = composed.actor_rollout_ref.rollout, composed.spade
    assert rollout.name == "hf_ladder" and list(rollout.custom.ladder_levels) == list(cfg.levels)
    assert spade.fixed_env.enable is False and spade.fixed_env.pool_dir == str(tmp_path / "pool")
    assert spade.designer.train is False and spade.plays_per_arm == 4 and spade.hint.placebo is True
    assert spade.validation.random_episodes == cfg.random_episodes and spade.validation.n_seeds == 3
    with pytest.raises(ValueError, match="multiple of run.n"):
        learn_spade.load_config(fast=False, overrides=["levels=[SayWordEnv,CompareEnv,AddEnv]"])
    with pytest.raises(ValueError, match="must divide the step's 6 samples"):
        learn_spade.load_config(fast=False, overrides=["levels=[SayWordEnv,CompareEnv]", "run.n=2", "run.rows=2"])


def _design(record: RunRecord, step: int, design: int, level: str | None, reward: float | None) -> None:
    task = {"skill": "pattern_recognition", "doc_id": "d", "document": "doc"}
    if level is None:
        outcome = {"valid": False, "code": "no_code_block"}
        record.write(design_entry(step, design, task, "no code", outcome, {}, None, 0))
    else:
        measure = {"no_hint": [1.0, 0.0], "hint": [1.0, 1.0], "placebo": [0.0, 1.0], "seeds": [5, 6]}
        outcome = {"valid": True, "code": None, "source": ladder_source(level), "win_rate": 0.5, "regret": 0.25,
                   "raw_regret": 0.5, "measure": measure}  # fmt: skip
        record.write(design_entry(step, design, task, "text", outcome, {"reason": ""}, None, 0))
    if reward is not None:
        record.write({"kind": "scores", "step": step, "designer": [{"design": design, "reward": reward,
                      "advantage": 0.0, "excluded": True}], "agent": []})  # fmt: skip


def test_the_report_reads_each_level_from_the_run_record(tmp_path):
    record = RunRecord(tmp_path, RecordCaps.from_dict(None))
    _design(record, 0, 0, "SayWordEnv", 0.7)
    _design(record, 0, 1, None, -0.5)
    _design(record, 1, 0, "CompareEnv", None)  # its scores entry not written yet
    rows = learn_spade.level_steps(tmp_path / "run_record.jsonl")
    assert [(r.step, r.level, r.verdict, r.reward) for r in rows] == [
        (0, "SayWordEnv", "admitted", 0.7), (0, "?", "rejected", -0.5), (1, "CompareEnv", "admitted", None)
    ]  # fmt: skip
    lines = learn_spade.step_lines(0, ["SayWordEnv", "CompareEnv"], rows, 0.25, 12.0)
    assert lines == [
        "  step  0  agent training win 0.25  12 s",
        "    SayWordEnv    no-hint   1/2 (0.50)  hint   2/2  placebo   1/2  regret +0.25  designer reward +0.70",
        "    CompareEnv    no design this step",
    ]
    summary = learn_spade.summarise(["SayWordEnv", "CompareEnv"], rows, tmp_path, 5.0)
    assert summary["levels"]["CompareEnv"][0]["reward"] is None and "stand-in" in summary["designer"]
    assert OmegaConf.load(learn_spade.CONFIG).levels  # the config names its levels
