"""Run-level semantics of the recipe that a GPU run depends on, checked on the real config and classes.

Sync trainer mode on every backend, the env pool's groups and run directory, and ``prepare()``'s checks. Regression
tests for the issue "Survive a real run" (items 1, 4, 6, 7, 8, 9 and 11).
"""

import json
from pathlib import Path

import pytest
from hydra import compose, initialize_config_dir
from omegaconf import OmegaConf
from verl.trainer.ppo.v1.replay_buffer import ReplayBuffer

from recipe.spade.env_pool import BATCHES_FILE, POOL_STATE_FILES, RUN_FILES, SpadeEnvPool
from recipe.spade.main_spade import prepare
from recipe.spade.schedule import schedule_rows
from recipe.spade.trainer import SpadeTrainer
from spade_envs.browse.run_record import read_record
from spade_envs.builtin import builtin_source
from spade_envs.builtin.ladder import write_ladder_pool

CONFIG_DIR = Path(__file__).resolve().parents[2] / "recipe" / "spade" / "config"


def compose_spade(*overrides: str, name: str = "spade_trainer"):
    with initialize_config_dir(config_dir=str(CONFIG_DIR), version_base=None):
        return compose(config_name=name, overrides=list(overrides))


def buffer_of(cfg) -> tuple[SpadeTrainer, ReplayBuffer]:
    """``SpadeTrainer._build_replay_buffer`` as verl's ``PPOTrainer.__init__`` calls it (no workers needed)."""
    trainer = object.__new__(SpadeTrainer)
    trainer.config = cfg
    trainer.trainer_mode = cfg.trainer.v1.trainer_mode
    trainer._add_prompts_to_generate = lambda *a, **k: None
    return trainer, trainer._build_replay_buffer()


@pytest.mark.parametrize("backend", ["gpu", "cpu"])
@pytest.mark.parametrize("name", ["spade_trainer", "spade_megatron_trainer"])
def test_every_backend_gets_verls_own_sync_replay_buffer(backend, name):
    cfg = compose_spade(f"backend={backend}", "spade.corpus=x", name=name)
    assert cfg.trainer.v1.trainer_mode == "spade"  # the name verl's task runner looks up
    trainer, buffer = buffer_of(cfg)
    assert type(buffer) is ReplayBuffer  # not ReplayBufferAsync, not a CPU-only subclass
    assert trainer.trainer_mode == buffer.trainer_mode == "sync"  # what verl's `!= "sync"` checks see
    assert buffer.gen_batch_size == buffer.train_batch_size == cfg.data.train_batch_size
    assert not buffer.sync_refill_failed_groups
    assert buffer.poll_interval == (0.05 if backend == "cpu" else 2.0)  # the one knob that may differ


def test_a_custom_sampler_or_refilling_failed_groups_is_refused():
    cfg = compose_spade("spade.corpus=x", "+trainer.v1.sampler.custom_sampler.path=pkg://x",
                        "+trainer.v1.sampler.custom_sampler.name=Y")  # fmt: skip
    with pytest.raises(ValueError, match="needs verl's sync ReplayBuffer"):
        buffer_of(cfg)
    cfg = compose_spade("spade.corpus=x", "trainer.v1.sampler.sync_refill_failed_groups=true")
    with pytest.raises(ValueError, match="sync_refill_failed_groups"):
        buffer_of(cfg)


def test_dapo_group_filtering_is_refused():
    """Review 2, finding 4: verl's DAPO filtering refills from the next schedule steps, like the refused refill."""
    cfg = compose_spade("spade.corpus=x", "algorithm.filter_groups.enable=true")
    with pytest.raises(ValueError, match="algorithm.filter_groups.enable=true"):
        buffer_of(cfg)


def test_the_env_pool_actor_ends_with_its_job_even_when_training_fails(tmp_path, monkeypatch):
    """Review 2, finding 4: the detached pool actor outlived its job on a persistent cluster (one per run)."""
    import recipe.spade
    import recipe.spade.env_pool
    from recipe.spade.main_spade import main

    def crash(config, require_v1=False):
        raise RuntimeError("training failed")

    ended = []
    monkeypatch.setattr(recipe.spade, "run_verl_trainer", crash)
    monkeypatch.setattr(recipe.spade.env_pool, "end_env_pool", lambda: ended.append(True))
    corpus = Path(__file__).resolve().parents[2] / "examples" / "data" / "sample_corpus.jsonl"
    cfg = compose_spade(f"spade.corpus={corpus}", f"spade.run_dir={tmp_path}", "trainer.total_training_steps=2",
                        "trainer.device=cuda")  # fmt: skip
    with pytest.raises(RuntimeError, match="training failed"):
        main.__wrapped__(cfg)
    assert ended == [True]


def pool_config(run_dir: Path, *overrides: str) -> dict:
    cfg = compose_spade("spade.fixed_env.enable=true", *overrides)
    spade = OmegaConf.to_container(cfg.spade, resolve=True)
    spade["run_dir"] = str(run_dir)
    return spade


def test_every_session_of_an_agent_row_plays_the_same_env_and_seed_with_memory_replay(tmp_path):
    pool = SpadeEnvPool(pool_config(tmp_path, "spade.memory_replay_fraction=0.5"))
    for slot in range(6):
        tasks = [pool.agent_task(1, slot) for _ in range(4)]  # the rollout.n sessions of one row: one GRPO group
        assert len({(t["env_id"], t["seed"]) for t in tasks}) == 1


def good_outcome(source: str) -> dict:
    return {"valid": True, "skill": "mathematical_reasoning", "source": source, "doc_id": None, "code": None,
            "win_rate": 0.5, "raw_regret": 0.2, "seeds": [1, 2], "regret": 0.2, "hint_failure": None}  # fmt: skip


def test_the_same_design_admitted_twice_is_re_scored_not_an_error(tmp_path):
    pool = SpadeEnvPool(pool_config(tmp_path))
    source = builtin_source("VaultCodeEnv") + "\n\nVaultCodeEnv.variant = 12345\n"
    first = pool.register_design(0, good_outcome(source))
    second = pool.register_design(0, {**good_outcome(source), "win_rate": 0.75})
    assert first == second and pool.generation == [first]
    assert pool.memory.get(first).win_rate == 0.75 and pool.memory.get(first).plays == 4


def test_a_full_memory_never_evicts_a_live_env_or_a_design_about_to_go_live(tmp_path):
    """Review 2, finding 1: at capacity a design of its own regeneration was evicted, went live, and its rows failed."""
    spade = pool_config(tmp_path, "spade.memory.capacity=11")  # 6 built-ins, 4 designs per regen, +1
    pool = SpadeEnvPool(spade)
    base = builtin_source("VaultCodeEnv")
    for regen in range(4):
        step = regen * 4
        pool.agent_task(step, 0)
        for i, win in enumerate((0.0, 0.5, 0.6, 0.4)):  # the first one scores 0: the lowest in memory
            design = f"{base}\n\nVaultCodeEnv.design = ({regen}, {i})\n"
            pool.register_design(step, {**good_outcome(design), "win_rate": win, "raw_regret": 0.0})
        designed = list(pool.generation)
        assert len(designed) == 4 and all(e in pool.memory for e in designed)
        assert len(pool.memory) == min(11, 10 + 4 * regen)
        for slot in range(21):  # every agent row of the next step gets a task, from this regeneration's designs
            assert pool.agent_task(step + 1, slot)["env_id"] in designed
        assert pool.live == designed
        ckpt = tmp_path / f"ckpt{regen}"
        ckpt.mkdir()
        pool.save_state(str(ckpt))
        SpadeEnvPool({**spade, "run_dir": str(tmp_path / "resumed")}, restore_from=str(ckpt))


def test_a_memory_too_small_for_the_live_envs_and_a_regeneration_is_refused(tmp_path):
    with pytest.raises(ValueError, match=r"spade.memory.capacity \(10\) must be at least 11"):
        SpadeEnvPool(pool_config(tmp_path, "spade.memory.capacity=10"))
    with pytest.raises(ValueError, match=r"spade.memory.capacity \(48\) must be at least 49"):  # before Ray starts
        prepared(tmp_path, "trainer.total_training_steps=2", "spade.memory.capacity=48", "spade.envs_per_regen=24",
                 "spade.agent_rows_per_step=21", "actor_rollout_ref.rollout.n=8",
                 "data.train_batch_size=24")  # fmt: skip


def test_plays_of_one_env_may_finish_in_any_step_order(tmp_path):
    pool = SpadeEnvPool(pool_config(tmp_path))
    env = pool.agent_task(5, 0)["env_id"]
    pool.record_play(env, 5, 1.0, None)
    pool.record_play(env, 4, 0.0, None)
    assert pool.memory.get(env).win_rate == 0.5 and pool.memory.get(env).last_played_step == 5


def checkpoint_of(pool: SpadeEnvPool, folder: Path) -> str:
    """``SpadeTrainer._save_checkpoint``'s part: the pool state into the checkpoint's ``spade/`` folder."""
    folder.mkdir(parents=True)
    return pool.save_state(str(folder))


def test_a_resume_keeps_play_windows_learning_potential_folds_and_one_metrics_row_per_step(tmp_path):
    """Review 2, finding 3: after a resume one play overwrote an env's win rate (0.6 -> 0.0), a checkpoint at a
    regeneration step lost that step's EMA fold, and the steps after the checkpoint were logged twice."""
    spade = pool_config(tmp_path / "run")
    runs = {"uninterrupted": SpadeEnvPool(spade)}
    first = runs["uninterrupted"]
    env = first.agent_task(0, 0)["env_id"]
    for outcome in (1.0, 1.0, 1.0, 0.0):  # step 0: four plays of one env
        first.record_play(env, 0, outcome, None, 0)
    for i, win in enumerate((0.2, 0.4)):  # step 0 is a regeneration step: two admitted designs of one skill
        first.register_design(
            0, {**good_outcome(builtin_source("VaultCodeEnv") + f"\n\nVaultCodeEnv.variant = {i}\n"), "win_rate": win}
        )
    first.record([{"kind": "design", "step": 0, "design": 0}])  # the run record (spade.record), cut back likewise
    first.end_step({})
    ckpt = checkpoint_of(first, tmp_path / "ckpt" / "global_step_1" / "spade")
    for step in (1, 2):  # the uninterrupted run goes on; a crash after step 2 leaves its rows in the metrics file
        first.agent_task(step, 0)
        first.record([{"kind": "scores", "step": step, "designer": [], "agent": []}])
        first.end_step({})
    crashed = (tmp_path / "run" / "spade_metrics.jsonl").read_text()
    assert [json.loads(line)["spade/step"] for line in crashed.splitlines()] == [0, 1, 2]
    resumed = SpadeEnvPool(spade, restore_from=ckpt)  # the same run dir, as a resumed run has
    assert resumed.state.window == {env: [3.0, 4]}  # the play window of step 0 came with the checkpoint
    assert (tmp_path / "run" / "spade_metrics.jsonl").read_text() == crashed.splitlines(keepends=True)[0]
    for step in (1, 2):
        resumed.agent_task(step, 0)
        resumed.record([{"kind": "scores", "step": step, "designer": [], "agent": []}])
        resumed.end_step({})
    rows = [json.loads(line) for line in (tmp_path / "run" / "spade_metrics.jsonl").read_text().splitlines()]
    assert [row["spade/step"] for row in rows] == [0, 1, 2]
    record = read_record(tmp_path / "run")
    assert [(e["kind"], e.get("step")) for e in record] == [("header", None), ("design", 0), ("scores", 1),
                                                           ("scores", 2)]  # fmt: skip
    skill = "mathematical_reasoning"
    assert resumed.lp_slow.get(skill) == pytest.approx(0.3) and resumed.lp_fast.get(skill) == pytest.approx(0.3)
    assert resumed.lp_slow.get(skill) == first.lp_slow.get(skill)
    for pool in (first, resumed):  # step 3: one more play of the env, outcome 0, in a later regeneration period:
        pool.agent_task(3, 0)  # it re-scores the env anew (review 3, finding 17), in both runs alike
        pool.record_play(env, 3, 0.0, None, 0)
    assert resumed.memory.get(env).win_rate == first.memory.get(env).win_rate == 0.0


def test_resume_path_restores_the_pool_from_the_checkpoint_verl_loaded(tmp_path, monkeypatch):
    """Review 2, finding 3: with resume_mode=resume_path the pool came from default_local_dir's global_step_N."""
    import torch

    import recipe.spade.trainer as spade_trainer

    run_a, run_b = tmp_path / "runA" / "ckpt", tmp_path / "runB" / "ckpt"
    for run in (run_a, run_b):
        (run / "global_step_16" / "spade").mkdir(parents=True)
        for name in POOL_STATE_FILES:
            (run / "global_step_16" / "spade" / name).write_text(str(run))
        torch.save({}, run / "global_step_16" / "data.pt")
    cfg = compose_spade("spade.corpus=x", "trainer.resume_mode=resume_path", f"trainer.default_local_dir={run_b}",
                        f"trainer.resume_from_path={run_a}/global_step_16")  # fmt: skip

    class WorkerGroup:  # the actor workers (GPU): what verl asks them to load
        def load_checkpoint(self, local_path, **kwargs):
            self.path = local_path

        def load_state_dict(self, state):
            pass

    restored = {}
    monkeypatch.setattr(
        spade_trainer, "start_env_pool", lambda spade, restore=None: restored.setdefault("from", restore)
    )
    trainer = object.__new__(SpadeTrainer)
    trainer.config, trainer.trainer_mode, trainer.use_critic = cfg, "sync", False
    trainer.actor_rollout_wg, trainer.train_dataloader = WorkerGroup(), WorkerGroup()
    trainer._load_checkpoint()
    assert trainer.actor_rollout_wg.path == str(run_a / "global_step_16" / "actor")
    assert restored["from"] == str(run_a / "global_step_16" / "spade")


def test_a_fresh_start_never_reads_what_an_earlier_run_left_in_the_run_dir(tmp_path):
    spade = pool_config(tmp_path)
    first = SpadeEnvPool(spade)
    first.agent_task(0, 0)
    env = first.register_design(0, good_outcome(builtin_source("VaultCodeEnv") + "\n\nVaultCodeEnv.variant = 1\n"))
    first.agent_task(1, 0)  # step 1 starts: the designed env goes live and the state is saved to the run dir
    first.step_metrics(1)
    assert first.live == [env] and (tmp_path / "pool_state.json").exists()

    fresh = SpadeEnvPool(spade)  # crashed before any checkpoint: a fresh start in the same run dir
    assert env not in fresh.memory and env not in fresh.live
    stale = [p for p in tmp_path.iterdir() if p.name.startswith("stale-")]
    # the run record too; batches.jsonl only with spade.dump_batches (off here)
    assert len(stale) == 1 and {p.name for p in stale[0].iterdir()} == set(RUN_FILES) - {BATCHES_FILE}

    checkpoint = tmp_path / "ckpt"
    checkpoint.mkdir()
    first.save_state(str(checkpoint))
    resumed = SpadeEnvPool(spade, restore_from=str(checkpoint))  # a resume reads the checkpoint only
    assert resumed.live == [env] and env in resumed.memory


def prepared(tmp_path: Path, *overrides: str):
    cfg = compose_spade("spade.corpus=x", f"spade.run_dir={tmp_path}", "trainer.device=cuda", *overrides)
    prepare(cfg)
    return cfg


def test_prepare_requires_the_number_of_steps(tmp_path):
    with pytest.raises(ValueError, match="trainer.total_training_steps must be set"):
        prepared(tmp_path)
    cfg = prepared(tmp_path, "trainer.total_training_steps=5")
    assert cfg.data.train_files.endswith("schedule-5.parquet")


def test_prepare_leaves_a_users_validation_data_alone(tmp_path):
    cfg = prepared(tmp_path, "trainer.total_training_steps=2", "data.val_files=/data/aime.parquet",
                   "trainer.test_freq=10")  # fmt: skip
    assert cfg.data.val_files == "/data/aime.parquet"
    with pytest.raises(ValueError, match="asks for validation"):
        prepared(tmp_path, "trainer.total_training_steps=2", "trainer.test_freq=10")


def test_the_designer_has_no_temperature_of_its_own():
    cfg = compose_spade("spade.corpus=x")
    assert "temperature" not in cfg.spade.designer
    with pytest.raises(Exception, match="temperature"):
        compose_spade("spade.corpus=x", "spade.designer.temperature=0.6")


def test_designer_rows_are_spread_over_the_step_not_bunched_first():
    # the paper's games 30B step: 24 designs = 3 designer rows of n = 8, plus 21 agent rows
    spade = {"agent_rows_per_step": 21, "envs_per_regen": 24, "regen_every": 4, "setting": "games",
             "fixed_env": {"enable": False}}  # fmt: skip
    rows = schedule_rows(spade, 2, 8)
    step0 = [r["extra_info"] for r in rows if r["extra_info"]["step"] == 0]
    roles = [e["role"] for e in step0]
    assert len(roles) == 24 and roles.count("designer") == 3
    for chunk in range(3):  # verl gives each of 3 agent-loop workers 8 contiguous rows: one designer row each
        assert roles[chunk * 8 : chunk * 8 + 8].count("designer") == 1
    for role, count in (("designer", 3), ("agent", 21)):
        assert sorted(e["slot"] for e in step0 if e["role"] == role) == list(range(count))
    assert [r["extra_info"]["role"] for r in rows if r["extra_info"]["step"] == 1] == ["agent"] * 24
    with pytest.raises(ValueError, match="multiple of actor_rollout_ref.rollout.n"):
        schedule_rows({**spade, "envs_per_regen": 20}, 1, 8)


def test_a_cosmetic_copy_of_a_stored_env_makes_the_stored_env_go_live(tmp_path):
    """Issue 26: a copy (an added comment) of a stored env was paid in full but never went live."""
    pool = SpadeEnvPool(pool_config(tmp_path))
    copy = pool.register_design(0, good_outcome("# my own game\n" + builtin_source("VaultCodeEnv")))
    assert copy == "builtin/VaultCodeEnv" and pool.generation == [copy]
    assert pool.memory.get(copy).regret == 0.2 and pool.memory.get(copy).plays == 2


def test_memory_stores_the_regret_the_reward_counted_and_the_hint_status(tmp_path):
    """Issue 26: memory stored the ungated regret (0.5 where the reward counted 0) and `ok` for a leaked hint."""
    pool = SpadeEnvPool(pool_config(tmp_path))
    source = builtin_source("VaultCodeEnv") + "\n\nVaultCodeEnv.variant = 7\n"
    env = pool.register_design(0, {**good_outcome(source), "regret": 0.0, "raw_regret": 0.5,
                                   "hint_failure": "hint_leak"})  # fmt: skip
    record = pool.memory.get(env)
    assert (record.regret, record.status, record.playable) == (0.0, "hint_leak", True)


def test_a_resume_warns_when_spade_memory_changed(tmp_path, caplog):
    first = SpadeEnvPool(pool_config(tmp_path))
    first.agent_task(0, 0)
    checkpoint = tmp_path / "ckpt"
    checkpoint.mkdir()
    first.save_state(str(checkpoint))
    with caplog.at_level("WARNING", logger="recipe.spade.env_pool"):
        SpadeEnvPool(pool_config(tmp_path, "spade.memory.capacity=50"), restore_from=str(checkpoint))
    assert "capacity 1000 (saved) vs 50 (config)" in caplog.text


def test_a_ladder_pool_plays_as_a_fixed_pool_and_its_win_rate_comes_with_its_plays(tmp_path):
    """make learn trains on ladder rungs written as a fixed pool; its gap interval needs each step's play count."""
    pool_dir = write_ladder_pool(tmp_path / "pool", ["AddEnv", "TwoDoorsEnv"])
    pool = SpadeEnvPool(pool_config(tmp_path / "run", f"spade.fixed_env.pool_dir={pool_dir}"))
    env = pool.agent_task(0, 0)["env_id"]
    assert env in {"ladder-AddEnv", "ladder-TwoDoorsEnv"}
    for outcome, fault in ((1.0, None), (0.0, None), (0.0, "step_exception")):
        pool.record_play(env, 0, outcome, fault, 0)
    row = pool.end_step({})
    assert row["spade/solve/win_rate"] == 0.5 and row["spade/solve/plays"] == 2
