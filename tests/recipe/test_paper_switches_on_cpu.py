"""The paper's runs and ablations as switches of the env pool (issue "Reproduce the paper", items 1, 4 and 6).

Per-design tasks, the active-skill rotation, the no-corpus prompt, memory off, and the learning-potential EMAs across
a checkpoint, on the real ``SpadeEnvPool`` with the real Hydra config. The trainer-level switches (frozen designer,
per-design tasks through verl's trainer) run in ``test_spade_on_cpu.py``.
"""

from pathlib import Path

import pytest
from hydra import compose, initialize_config_dir
from omegaconf import OmegaConf

from recipe.spade.budget import budget_of
from recipe.spade.env_pool import SpadeEnvPool
from recipe.spade.reward_manager import designer_reward_config, score_sample
from spade_envs.envs.skills import SKILLS

ROOT = Path(__file__).resolve().parents[2]
CORPUS = ROOT / "examples" / "data" / "sample_corpus.jsonl"


def spade_block(tmp_path: Path, *overrides: str) -> dict:
    with initialize_config_dir(config_dir=str(ROOT / "recipe" / "spade" / "config"), version_base=None):
        cfg = compose(config_name="spade_trainer", overrides=[f"spade.corpus={CORPUS}", *overrides])
    spade = OmegaConf.to_container(cfg.spade, resolve=True)
    spade["run_dir"] = str(tmp_path)
    return spade


def user_prompt(task: dict) -> str:
    return task["messages"][1]["content"]


def test_every_design_of_a_row_has_its_own_document_and_the_tasks_do_not_depend_on_call_order(tmp_path):
    pool = SpadeEnvPool(spade_block(tmp_path / "a"))
    tasks = [pool.designer_task(0, d) for d in range(8)]
    assert len({t["doc_id"] for t in tasks}) > 1 and len({user_prompt(t) for t in tasks}) == 8
    reverse = SpadeEnvPool(spade_block(tmp_path / "b"))
    assert [reverse.designer_task(0, d) for d in reversed(range(8))][::-1] == tasks


def test_games_activate_three_of_six_skills_per_regeneration_in_turn(tmp_path):
    pool = SpadeEnvPool(spade_block(tmp_path, "spade.skills.active_per_regen=3", "spade.regen_every=4"))
    skills = list(SKILLS["games"])
    for regen, expected in enumerate([skills[:3], skills[3:], skills[:3]]):
        step = regen * 4
        assert sorted({pool.designer_task(step, d)["skill"] for d in range(24)}) == sorted(expected)
    two = SpadeEnvPool(spade_block(tmp_path / "two", "spade.skills.names=[mathematical_reasoning,pattern_recognition]"))
    assert {two.designer_task(0, d)["skill"] for d in range(24)} == {"mathematical_reasoning", "pattern_recognition"}
    with pytest.raises(ValueError, match="unknown games skills"):
        SpadeEnvPool(spade_block(tmp_path / "bad", "spade.skills.names=[juggling]"))


def test_the_no_corpus_ablation_needs_no_corpus_and_prompts_with_concepts_and_an_example(tmp_path):
    spade = spade_block(tmp_path, "spade.designer.grounding=concepts", "spade.designer.show_example=false")
    spade["corpus"] = None
    prompt = user_prompt(SpadeEnvPool(spade).designer_task(0, 0))
    assert "<concepts>" in prompt and "<reference>" not in prompt and "must differ from it" in prompt
    spade["designer"]["grounding"] = "corpus"
    with pytest.raises(ValueError, match="spade.corpus is required"):
        SpadeEnvPool(spade)


def admitted(pool: SpadeEnvPool, step: int, skill: str, win_rate: float, tag: str) -> None:
    from spade_envs.builtin import builtin_source

    source = builtin_source("VaultCodeEnv") + f"\n\nVaultCodeEnv.tag = {tag!r}\n"
    pool.register_design(step, {"valid": True, "skill": skill, "source": source, "doc_id": None, "code": None,
                                "win_rate": win_rate, "raw_regret": 0.3, "seeds": [1, 2], "regret": 0.3,
                                "hint_failure": None})  # fmt: skip


def test_memory_off_shows_no_exemplars_and_refuses_replay(tmp_path):
    on = SpadeEnvPool(spade_block(tmp_path / "on"))
    off = SpadeEnvPool(spade_block(tmp_path / "off", "spade.memory.enable=false"))
    for pool in (on, off):
        pool.designer_task(0, 0)
        for i, w in enumerate([0.5, 0.45, 0.55]):
            admitted(pool, 0, "logical_deduction", w, f"t{i}")
    skill_design = list(SKILLS["games"]).index("logical_deduction")
    section = "## Environments from earlier training"
    assert section in user_prompt(on.designer_task(4, skill_design))  # a positive exemplar is shown
    assert section not in user_prompt(off.designer_task(4, skill_design))
    with pytest.raises(ValueError, match="memory.enable"):
        SpadeEnvPool(spade_block(tmp_path / "r", "spade.memory.enable=false", "spade.memory_replay_fraction=0.5"))


def test_learning_potential_emas_per_skill_survive_a_checkpoint_and_feed_the_reward(tmp_path):
    spade = spade_block(tmp_path / "run", "reward.reward_kwargs.designer.variant=learning_potential")
    assert spade["learning_potential"] == {"fast_ema": 0.98, "slow_ema": 0.85}
    pool = SpadeEnvPool(spade)
    assert pool.designer_task(0, 0)["lp_slow"] is None
    admitted(pool, 0, "optimization", 0.2, "a")
    admitted(pool, 0, "optimization", 0.6, "b")
    pool.agent_task(1, 0)  # step 0 ends: its designs fold into the EMAs (first value initialises: mean 0.4)
    admitted(pool, 1, "optimization", 0.9, "c")  # not a regeneration step here, but any admitted design counts
    pool.agent_task(2, 0)
    assert pool.lp_slow.get("optimization") == pytest.approx(0.15 * 0.4 + 0.85 * 0.9)
    assert pool.lp_fast.get("optimization") == pytest.approx(0.02 * 0.4 + 0.98 * 0.9)
    gap = pool.step_metrics(2)["spade/lp/gap/optimization"]
    assert gap == pytest.approx(pool.lp_fast.get("optimization") - pool.lp_slow.get("optimization"))

    checkpoint = tmp_path / "ckpt"
    checkpoint.mkdir()
    pool.save_state(str(checkpoint))
    resumed = SpadeEnvPool(spade, restore_from=str(checkpoint))
    assert resumed.lp_slow.get("optimization") == pool.lp_slow.get("optimization")
    task = resumed.designer_task(4, list(SKILLS["games"]).index("optimization"))
    assert task["skill"] == "optimization" and task["lp_slow"] == pool.lp_slow.get("optimization")

    cfg = designer_reward_config(OmegaConf.create({"reward": {"reward_kwargs": {"designer": {
        "variant": "learning_potential", "lp_slow_ema": 0.85}}}}))  # fmt: skip
    fields = {"spade_role": "designer", "spade_skill": "optimization", "spade_failure": "",
              "spade_measure": {"no_hint": [1.0, 0.0], "hint": [], "seeds": [1, 2], "hint_failure": "",
                                "lp_slow": task["lp_slow"]}}  # fmt: skip
    assert score_sample(cfg, fields)[0] == pytest.approx(abs(0.5 - task["lp_slow"]))


def test_the_budget_counts_designs_samples_and_measurement_plays():
    with initialize_config_dir(config_dir=str(ROOT / "recipe" / "spade" / "config"), version_base=None):
        cfg = compose(config_name="spade_trainer", overrides=[
            "spade.corpus=x", "spade.envs_per_regen=24", "spade.agent_rows_per_step=21", "spade.plays_per_arm=8",
            "actor_rollout_ref.rollout.n=8", "data.train_batch_size=24"])  # fmt: skip
    line = budget_of(cfg).line()
    assert line == ("budget: designs_per_regen=24 samples_per_step=192 agent_samples_regen_step=168 "
                    "measurement_plays_per_regen=576 measurement_arms=3")  # fmt: skip
    paper = budget_of(OmegaConf.merge(cfg, {"spade": {"hint": {"placebo": False}}}))  # the paper's two arms
    assert paper.measurement_plays_per_regen == 384 and paper.measurement_arms == 2


def test_the_rlve_baseline_plays_one_instance_per_row_and_its_windows_survive_a_checkpoint(tmp_path):
    rlve = ("spade.fixed_env.enable=true", "spade.fixed_env.rlve.enable=true")
    with pytest.raises(ValueError, match="RLVE needs generate < soft < call"):  # issue 24, finding 9: shipped 10/5/10
        SpadeEnvPool(spade_block(tmp_path / "shipped", *rlve))
    spade = spade_block(tmp_path, *rlve, "spade.fixed_env.rlve.window.window_attempts=4",
                        "spade.sandbox.soft_timeout_s=12", "spade.sandbox.call_timeout_s=15")  # fmt: skip
    pool = SpadeEnvPool(spade)
    tasks = [pool.agent_task(0, slot) for slot in range(16)]
    assert len({t["rlve_env"] for t in tasks}) == 16  # official16: every env once per step
    assert all(
        t["difficulty"] == 0 and t["setting"] == "games" and "class RLVEProblemEnv" in t["source"] for t in tasks
    )
    assert pool.agent_task(0, 3) is tasks[3]  # the n sessions of a row: one instance, one GRPO group
    env = tasks[3]["rlve_env"]
    for _ in range(4):
        pool.record_play(tasks[3]["env_id"], 0, 1.0, None, 3)  # 4 wins of 4 at the top level: h rises
    assert pool.rlve.window.bounds(env) == (0, 1)
    assert pool.step_metrics(0)[f"spade/rlve/h/{env}"] == 1.0
    checkpoint = tmp_path / "ckpt"
    checkpoint.mkdir()
    pool.save_state(str(checkpoint))
    assert SpadeEnvPool(spade, restore_from=str(checkpoint)).rlve.window.bounds(env) == (0, 1)
    with pytest.raises(ValueError, match="fixed_env.enable=true"):
        SpadeEnvPool(spade_block(tmp_path / "x", "spade.fixed_env.rlve.enable=true"))
