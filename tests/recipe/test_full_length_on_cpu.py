"""A run at full length: the env pool's state machine at the paper launchers' scale, resumed from every checkpoint.

The games 30B launcher's schedule and budget (400 steps, 24 designs every 4 steps, rollout.n = 8, 21 agent rows,
3 of 6 skills per regeneration, memory capacity 200) and the tool-use one (a regeneration every 8 steps, all six
skills), driven through the real :class:`SpadeEnvPool` (and so :class:`spade_envs.curriculum.Curriculum`) in the
order a run calls it: designs, then every session of every agent row, every 16 steps the trainer's checkpoint
(verl writes it before the step's metrics), then ``end_step``. The model, sandbox and Ray are replaced by seeded
stand-in outcomes: 40% of designs fail, 30% of the admitted ones are never won, 3% of plays fault, so memory fills
(first eviction at step 56 for games, 104 for tool use) and evicts for the rest of the run (1,227 / 527 evictions).

Checked: every agent row of every step gets a task whose env is in memory; a resume from each checkpoint (into a
run dir holding the crashed run's whole metrics file) reaches the next checkpoint with the same memory, pool state
and metrics file as the uninterrupted run, byte for byte (the files at a checkpoint are the whole state, so this
chains to the end), and the resumes from the last two checkpoints reach the same end state. Regression test for
review 2's findings 1 and 3 at scale.
"""

import copy
import functools
import json
import random
import shutil
import tempfile
import zlib
from pathlib import Path

import pytest
from hydra import compose, initialize_config_dir
from omegaconf import OmegaConf

from recipe.spade.env_pool import POOL_STATE_FILES, SpadeEnvPool

CONFIG_DIR = Path(__file__).resolve().parents[2] / "recipe" / "spade" / "config"
CORPUS = Path(__file__).resolve().parents[2] / "examples" / "data" / "sample_corpus.jsonl"
STEPS, SAVE_FREQ, N = 400, 16, 8
# the paper launchers' spade overrides (examples/lib/paper.sh) for the 30B games and tool-use runs
LAUNCHERS = {
    "games": ["spade.regen_every=4", "spade.envs_per_regen=24", "spade.agent_rows_per_step=21",
              "spade.skills.active_per_regen=3"],
    "tool_use": ["spade.regen_every=8", "spade.envs_per_regen=24", "spade.agent_rows_per_step=21"],
}  # fmt: skip
BASE = "class Env:\n    pass\n"


@functools.cache
def composed(setting: str) -> dict:
    overrides = [f"spade.setting={setting}", f"spade.corpus={CORPUS}", "spade.memory.capacity=200",
                 f"actor_rollout_ref.rollout.n={N}", *LAUNCHERS[setting]]  # fmt: skip
    with initialize_config_dir(config_dir=str(CONFIG_DIR), version_base=None):
        return OmegaConf.to_container(compose(config_name="spade_trainer", overrides=overrides).spade, resolve=True)


def spade_block(setting: str, run_dir: Path) -> dict:
    return {**copy.deepcopy(composed(setting)), "run_dir": str(run_dir)}


def design_outcome(setting: str, step: int, design: int, skill: str) -> dict:
    """A designer sample: invalid (40%), or an admitted env never won (30%) or won at some rate; a few repeat."""
    rng = random.Random(f"design:{setting}:{step}:{design}")
    if rng.random() < 0.4:
        return {"valid": False, "skill": skill, "source": "", "doc_id": None, "code": "runtime_error",
                "win_rate": 0.0, "raw_regret": 0.0, "seeds": [], "regret": 0.0, "hint_failure": None}  # fmt: skip
    name = f"{step}_{design}" if rng.random() > 0.05 else f"{max(0, step - 4)}_{design}"  # an old design, again
    win = 0.0 if rng.random() < 0.3 else round(rng.uniform(0.1, 0.9), 3)
    regret = 0.0 if win == 0.0 else round(rng.uniform(0.0, 0.3), 3)
    source = f"{BASE}\n\nEnv.design = {name!r}\n"
    return {"valid": True, "skill": skill, "source": source, "doc_id": None, "code": None, "win_rate": win,
            "raw_regret": regret, "seeds": [1, 2, 3, 4], "regret": regret, "hint_failure": None}  # fmt: skip


def plays(env_id: str, step: int, slot: int) -> list[tuple[float, str | None]]:
    """The ``N`` training plays of a row: a fault 3% of the time, else a win with a probability set by the env."""
    rng = random.Random(f"play:{env_id}:{step}:{slot}")
    p = zlib.crc32(env_id.encode()) / 2**32
    return [(0.0, "env_raised") if rng.random() < 0.03 else (float(rng.random() < p), None) for _ in range(N)]


def run_steps(pool: SpadeEnvPool, setting: str, first: int, last: int, ckpt_dir: Path) -> None:
    """Steps ``first .. last`` as the trainer runs them, a checkpoint after every ``SAVE_FREQ``-th global step."""
    spade = pool.cfg
    pool.state.clock = lambda: float(pool.state.current_step)  # metrics rows stamped by step: files comparable
    for step in range(first, last + 1):
        regen = step % spade["regen_every"] == 0
        rows = spade["agent_rows_per_step"] + (0 if regen else spade["envs_per_regen"] // N)
        if regen:
            skills = pool.state.active_skills(step)
            for design in range(spade["envs_per_regen"]):
                pool.register_design(step, design_outcome(setting, step, design, skills[design % len(skills)]))
        excluded = 0
        for slot in range(rows):  # every agent row of every step gets a task, and all n sessions the same one
            tasks = [pool.agent_task(step, slot) for _ in range(N)]
            assert len({(t["env_id"], t["seed"]) for t in tasks}) == 1
            env = tasks[0]["env_id"]
            assert env in pool.memory and pool.memory.get(env).spec.source == tasks[0]["source"]
            for outcome, fault in plays(env, step, slot):
                excluded += fault is not None
                pool.record_play(env, step, outcome, fault, slot)
        if (step + 1) % SAVE_FREQ == 0:  # SpadeTrainer._save_checkpoint at global step step + 1, before the metrics
            folder = ckpt_dir / f"global_step_{step + 1}" / "spade"
            folder.mkdir(parents=True)
            pool.save_state(str(folder))
        pool.end_step({"spade/excluded_samples": excluded})  # SpadeTrainer._compute_metrics


def files(folder: Path) -> dict[str, bytes]:
    return {name: (folder / name).read_bytes() for name in POOL_STATE_FILES}


@pytest.fixture
def scratch(tmp_path):
    """Run dirs in memory where there is a tmpfs: the pool fsyncs its state every step, which here tests nothing."""
    shm = Path("/dev/shm")
    if not shm.is_dir():
        yield tmp_path
        return
    folder = Path(tempfile.mkdtemp(dir=shm, prefix="spade-full-length-"))
    try:
        yield folder
    finally:
        shutil.rmtree(folder)


@pytest.mark.parametrize("setting", ["games", "tool_use"])
def test_a_full_length_run_resumes_from_every_checkpoint_to_the_same_state(scratch, setting):
    run_dir, ckpt = scratch / "run", scratch / "ckpt"
    pool = SpadeEnvPool(spade_block(setting, run_dir))
    run_steps(pool, setting, 0, STEPS - 1, ckpt)
    pool.finish()
    metrics = (run_dir / "spade_metrics.jsonl").read_bytes()
    rows = metrics.decode().splitlines(keepends=True)
    assert [json.loads(row)["spade/step"] for row in rows] == list(range(STEPS))
    final = files(run_dir)
    evictions = sum(json.loads(row)["spade/memory/evictions"] for row in rows)
    assert len(pool.memory) == 200 and evictions > 400  # memory filled and evicted for most of the run

    # each resume runs to the next checkpoint (the last ones to the end), where its state must be the uninterrupted
    # run's: a state the checkpoint missed shows there (a play window within a step, an EMA fold at a regeneration)
    checkpoints = list(range(SAVE_FREQ, STEPS + 1, SAVE_FREQ))
    for global_step, last in zip(checkpoints, [*checkpoints[1:], STEPS]):
        resumed_dir, own = scratch / f"resumed{global_step}", scratch / f"ckpt_resumed{global_step}"
        resumed_dir.mkdir()
        (resumed_dir / "spade_metrics.jsonl").write_bytes(metrics)  # a crash after the end: every step was logged
        restore = ckpt / f"global_step_{global_step}" / "spade"
        resumed = SpadeEnvPool(spade_block(setting, resumed_dir), restore_from=str(restore))
        run_steps(resumed, setting, global_step, last - 1, own)
        logged = (resumed_dir / "spade_metrics.jsonl").read_bytes()
        if global_step < last:
            assert files(own / f"global_step_{last}" / "spade") == files(ckpt / f"global_step_{last}" / "spade")
            assert logged == "".join(rows[:last]).encode()
        if last == STEPS:
            resumed.finish()
            assert files(resumed_dir) == final and (resumed_dir / "spade_metrics.jsonl").read_bytes() == metrics
        shutil.rmtree(resumed_dir)
        shutil.rmtree(own, ignore_errors=True)
