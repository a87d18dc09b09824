"""Review 3 (recipe), findings 18 and 19: verl reads the schedule in order, and ``batches.jsonl`` never mixes runs.

18: ``data.shuffle=true`` (verl's default, one override away from SPADE's ``false``) passed ``prepare()`` and verl's
sampler then put rows of many schedule steps into one batch. 19: the trainer's ``batches.jsonl``
(``spade.dump_batches``) was neither cut back on resume nor set aside on a fresh start, so steps appeared twice and a
new run appended to an old one's rows. Driven through ``prepare()``, verl's own sampler and the real env pool.
"""

import contextlib
import io
import json
from pathlib import Path

import pandas as pd
import pytest
from hydra import compose, initialize_config_dir
from omegaconf import OmegaConf
from verl.trainer.ppo.utils import create_rl_sampler

from recipe.spade.env_pool import RUN_FILES, SpadeEnvPool
from recipe.spade.main_spade import prepare

ROOT = Path(__file__).resolve().parents[2]
CONFIG_DIR = ROOT / "recipe" / "spade" / "config"
CORPUS = ROOT / "examples" / "data" / "sample_corpus.jsonl"
BATCHES_FILE = "batches.jsonl"  # SpadeTrainer._dump_batch writes it into spade.run_dir


def composed(*overrides: str):
    with initialize_config_dir(config_dir=str(CONFIG_DIR), version_base=None):
        return compose(config_name="spade_trainer", overrides=[f"spade.corpus={CORPUS}", *overrides])


def prepared(tmp_path: Path, *overrides: str):
    # the games 30B step: 21 agent rows and 24 designs of n = 8 (3 designer rows), a design every 4 steps
    config = composed(f"spade.run_dir={tmp_path}", "actor_rollout_ref.rollout.n=8", "spade.envs_per_regen=24",
                      "spade.agent_rows_per_step=21", "spade.memory.capacity=200", "data.train_batch_size=24",
                      "trainer.total_training_steps=12", "trainer.device=cuda", *overrides)  # fmt: skip
    with contextlib.redirect_stdout(io.StringIO()):  # the budget line
        prepare(config)
    return config


def test_with_spades_config_verls_sampler_reads_one_schedule_step_per_batch(tmp_path):
    config = prepared(tmp_path)
    rows = pd.read_parquet(config.data.train_files)
    order = list(create_rl_sampler(config.data, rows))
    size = config.data.train_batch_size
    for batch in range(len(order) // size):
        steps = {int(rows.iloc[i]["extra_info"]["step"]) for i in order[batch * size : (batch + 1) * size]}
        assert steps == {batch}


@pytest.mark.parametrize("override", ["data.shuffle=true", "data.shuffle=True"])
def test_prepare_refuses_data_shuffle_naming_the_key_and_the_fix(tmp_path, override):
    with pytest.raises(ValueError, match=r"data\.shuffle=true would mix rows of different schedule steps") as err:
        prepared(tmp_path, override)
    assert "set data.shuffle=false" in str(err.value)


def test_prepare_refuses_data_train_max_samples_which_cuts_rows_from_the_schedule(tmp_path):
    with pytest.raises(ValueError, match=r"data\.train_max_samples=48 would cut rows out of SPADE's schedule"):
        prepared(tmp_path, "data.train_max_samples=48")
    prepared(tmp_path, "data.train_max_samples=-1")  # verl's default: the whole schedule


def pool_block(run_dir: Path) -> dict:
    spade = OmegaConf.to_container(composed("spade.dump_batches=true").spade, resolve=True)
    return {**spade, "run_dir": str(run_dir)}


def dump(run_dir: Path, global_step: int, rows: int = 2, torn: bool = False) -> None:
    """What ``SpadeTrainer._dump_batch`` appends for one global step (several rows), cut short by a crash if torn."""
    text = "".join(json.dumps({"global_step": global_step, "key": f"u{global_step}_{i}_0"}) + "\n" for i in range(rows))
    with (run_dir / BATCHES_FILE).open("a", encoding="utf-8") as f:
        f.write(text[: len(text) - 9] if torn else text)


def global_steps(run_dir: Path) -> list[int]:
    return [json.loads(line)["global_step"] for line in (run_dir / BATCHES_FILE).read_text().splitlines()]


def run(pool: SpadeEnvPool, run_dir: Path, first: int, last: int, ckpt: Path | None = None, at: int = 0) -> None:
    """Schedule steps ``first .. last`` as the trainer runs them: global step ``s + 1``, a checkpoint at ``at``."""
    for step in range(first, last + 1):
        for slot in range(pool.cfg["agent_rows_per_step"]):
            task = pool.agent_task(step, slot)
            pool.record_play(task["env_id"], step, 1.0, None, slot)
        dump(run_dir, step + 1)
        if ckpt is not None and step + 1 == at:
            ckpt.mkdir(parents=True)
            pool.save_state(str(ckpt))
        pool.end_step({})


def test_batches_jsonl_is_cut_back_on_resume_and_set_aside_on_a_fresh_start(tmp_path):
    run_dir, ckpt = tmp_path / "run", tmp_path / "ckpt" / "global_step_2" / "spade"
    run(SpadeEnvPool(pool_block(run_dir)), run_dir, 0, 3, ckpt, at=2)  # global steps 1-4; dies after 4
    assert global_steps(run_dir) == [1, 1, 2, 2, 3, 3, 4, 4]

    resumed = SpadeEnvPool(pool_block(run_dir), restore_from=str(ckpt))  # verl resumes at global step 2
    assert global_steps(run_dir) == [1, 1, 2, 2]
    run(resumed, run_dir, 2, 3)
    assert global_steps(run_dir) == [1, 1, 2, 2, 3, 3, 4, 4]  # each step once

    SpadeEnvPool(pool_block(run_dir))  # a fresh start in the same run dir
    assert not (run_dir / BATCHES_FILE).exists()
    (stale,) = run_dir.glob("stale-*")
    assert BATCHES_FILE in RUN_FILES and (stale / BATCHES_FILE).exists()


def test_a_torn_last_line_of_batches_jsonl_is_dropped_on_resume_and_the_next_rows_stay_whole(tmp_path, caplog):
    run_dir, ckpt = tmp_path / "run", tmp_path / "ckpt" / "global_step_2" / "spade"
    run(SpadeEnvPool(pool_block(run_dir)), run_dir, 0, 1, ckpt, at=2)
    dump(run_dir, 3, torn=True)  # the crash cut step 3's last row
    resumed = SpadeEnvPool(pool_block(run_dir), restore_from=str(ckpt))
    assert "dropped an unfinished last line" in caplog.text
    run(resumed, run_dir, 2, 2)
    assert global_steps(run_dir) == [1, 1, 2, 2, 3, 3]
