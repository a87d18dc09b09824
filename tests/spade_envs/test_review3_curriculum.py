"""Review 3 (recipe), findings 16 and 17, on the curriculum state machine the env-pool actor wraps.

16: an unfinished last line of ``spade_metrics.jsonl`` (a crash during the append) made every resume fail with a
``JSONDecodeError``. 17: an env's play window never reset, so a memory replay never re-scored the env: its win rate
stayed the mean over its whole life, against ``memory.py`` ("Replays re-score the env") and
``EnvMemory.update_stats`` ("the new measurement replaces the old win rate").
"""

import json
import zlib
from pathlib import Path

import numpy as np
import pytest

from spade_envs.browse.step_log import StepLogError
from spade_envs.builtin import BUILTINS, builtin_spec
from spade_envs.curriculum import Curriculum, CurriculumConfig, seed_memory
from spade_envs.design.memory import EnvMemory, MemoryConfig
from spade_envs.envs.skills import SKILLS

CONFIG = CurriculumConfig(setting="games", seed=0, regen_every=4, envs_per_regen=4, skills=tuple(SKILLS["games"]),
                          active_per_regen=None, memory_replay_fraction=0.0, use_memory=True, lp_fast_ema=0.98,
                          lp_slow_ema=0.85)  # fmt: skip
ROWS, N = 3, 8


def fresh(run_dir: Path | None) -> Curriculum:
    memory = seed_memory(EnvMemory(MemoryConfig(capacity=50)), [builtin_spec(e.name) for e in BUILTINS
                                                                 if e.setting == "games"])  # fmt: skip
    return Curriculum(CONFIG, memory, run_dir, clock=lambda: 0.0)


def design(cur: Curriculum, step: int) -> str:
    """One admitted design of regeneration ``step`` (measured at win rate 0.5 at design time)."""
    source = f"class Env:\n    pass\n\n\nEnv.design = {step}\n"
    return cur.register_design(step, {"valid": True, "skill": cur.design_skill(step, 0), "source": source,
                                      "doc_id": None, "code": None, "win_rate": 0.5, "raw_regret": 0.1,
                                      "seeds": list(range(N)), "regret": 0.1, "hint_failure": None})  # fmt: skip


def play(cur: Curriculum, step: int, outcome) -> None:
    """Every agent row of ``step``: ``N`` plays of its task, each outcome ``outcome(env_id)``."""
    for slot in range(ROWS):
        env = cur.agent_task(step, slot)["env_id"]
        cur.record_plays(env, step, [outcome(env)] * N, [None] * N, slot)


def seeded(step: int):
    """Outcomes that differ between plays, rows and steps (a stand-in agent, the same in every run)."""
    draws = iter(zlib.crc32(f"{step}:{i}".encode()) % 4 / 3 for i in range(ROWS * N))
    return lambda env: next(draws)


def resumed(run_dir: Path, checkpoint: Path) -> Curriculum:
    """What the env pool does on resume: the checkpoint's memory, then its pool state."""
    cur = Curriculum(CONFIG, EnvMemory.load(checkpoint / "memory.jsonl"), run_dir, clock=lambda: 0.0)
    cur.load_state(json.loads((checkpoint / "pool_state.json").read_text()))
    return cur


# -- 17: a replay re-scores the env -------------------------------------------------------------------------------
def test_a_replay_in_a_later_period_replaces_the_win_rate_the_env_earned_while_live():
    cur = fresh(None)
    cur.agent_task(0, 0)
    env = design(cur, 0)
    for step in range(1, 5):  # live at steps 1-4 (its regeneration period), the agent of then loses every play
        play(cur, step, lambda e: 0.0)
    assert cur.live == [env] and cur.memory.get(env).win_rate == 0.0
    exemplars = cur.memory.exemplars(cur.design_skill(0, 0), "games", np.random.default_rng(0), n_neg=9)
    assert [x.reason for x in exemplars.negatives if x.record.env_id == env] == ["too hard: win rate 0.00"]

    cur.advance(300)
    cur.record_plays(env, 300, [1.0] * N, [None] * N, 0)  # a memory replay row at step 300: the agent now wins
    record = cur.memory.get(env)
    assert record.win_rate == 1.0 and record.plays == N + 4 * ROWS * N + N  # plays still accumulate (design too)
    exemplars = cur.memory.exemplars(cur.design_skill(0, 0), "games", np.random.default_rng(0), n_neg=9)
    assert env not in [x.record.env_id for x in exemplars.negatives if x.reason.startswith("too hard")]


def test_plays_of_one_period_accumulate_and_the_next_period_measures_anew():
    cur = fresh(None)
    cur.agent_task(0, 0)
    env = design(cur, 0)
    play(cur, 1, lambda e: 1.0)
    play(cur, 2, lambda e: 0.0)
    assert cur.memory.get(env).win_rate == 0.5  # steps 1 and 2: one live period, one window
    cur.advance(4)
    env2 = design(cur, 4)  # the next generation goes live at step 5; the old env can still be replayed
    play(cur, 5, lambda e: 1.0)
    cur.record_plays(env, 5, [0.0] * N, [None] * N, ROWS)  # a replay of the old env at step 5, a new period
    assert cur.memory.get(env2).win_rate == 1.0 and cur.memory.get(env).win_rate == 0.0


@pytest.mark.parametrize("checkpoint_after", [2, 4])  # inside a period, and the period's last step
def test_a_resume_keeps_the_play_windows_exactly(tmp_path, checkpoint_after):
    def steps(cur: Curriculum, first: int, last: int, ckpt: Path | None = None) -> dict[int, tuple]:
        after = {}  # step -> the play windows and memory win rates after it
        for step in range(first, last + 1):
            if step % CONFIG.regen_every == 0:
                cur.agent_task(step, 0)
                design(cur, step)
            play(cur, step, seeded(step))
            if ckpt is not None and step == checkpoint_after:
                ckpt.mkdir()
                cur.save_state(ckpt)
            cur.end_step()
            after[step] = dict(cur.window), {r.env_id: (r.win_rate, r.plays) for r in cur.memory}
        return after

    (tmp_path / "whole").mkdir()
    whole = steps(fresh(tmp_path / "whole"), 0, 9, tmp_path / "ckpt")
    (tmp_path / "again").mkdir()
    again = steps(resumed(tmp_path / "again", tmp_path / "ckpt"), checkpoint_after + 1, 9)
    assert again == {step: whole[step] for step in range(checkpoint_after + 1, 10)}


# -- 16: a torn last metrics line does not block the resume --------------------------------------------------------
def crashed_run(tmp_path: Path) -> tuple[Path, Path]:
    """Steps 0-2 logged, a checkpoint after step 1 (before its metrics row, as verl checkpoints)."""
    run_dir, ckpt = tmp_path / "run", tmp_path / "ckpt"
    run_dir.mkdir()
    cur = fresh(run_dir)
    for step in range(3):
        play(cur, step, lambda e: 1.0)
        if step == 1:
            ckpt.mkdir()
            cur.save_state(ckpt)
        cur.end_step()
    return run_dir, ckpt


def metric_steps(run_dir: Path) -> list[int]:
    return [json.loads(line)["spade/step"] for line in (run_dir / "spade_metrics.jsonl").read_text().splitlines()]


def test_a_torn_last_metrics_row_is_dropped_on_resume_with_a_warning(tmp_path, caplog):
    run_dir, ckpt = crashed_run(tmp_path)
    with (run_dir / "spade_metrics.jsonl").open("a") as f:
        f.write('{"time": 0.0, "spade/step": 3, "spade/live_e')  # step 3's row, cut by the crash
    cur = resumed(run_dir, ckpt)
    assert "dropped an unfinished last line" in caplog.text
    assert metric_steps(run_dir) == [0, 1] and cur.logged == {1}
    play(cur, 2, lambda e: 1.0)
    cur.end_step()
    assert metric_steps(run_dir) == [0, 1, 2]  # the next row is a line of its own


def test_a_whole_last_row_without_its_newline_is_kept(tmp_path):
    run_dir, ckpt = crashed_run(tmp_path)
    path = run_dir / "spade_metrics.jsonl"
    path.write_text("".join(path.read_text().splitlines(keepends=True)[:2]).rstrip("\n"))  # steps 0, 1; no "\n"
    cur = resumed(run_dir, ckpt)
    assert path.read_text().endswith("\n") and metric_steps(run_dir) == [0, 1] and cur.logged == {1}


def test_a_bad_metrics_row_before_the_last_is_an_error_naming_file_and_line(tmp_path):
    run_dir, ckpt = crashed_run(tmp_path)
    path = run_dir / "spade_metrics.jsonl"
    lines = path.read_text().splitlines(keepends=True)
    path.write_text(lines[0] + '{"time": 0.0, "spade/st\n' + "".join(lines[1:]))
    with pytest.raises(StepLogError, match=r"spade_metrics\.jsonl:2: not valid JSON .*repair or remove this line"):
        resumed(run_dir, ckpt)
    path.write_text(lines[0] + '{"time": 0.0}\n' + "".join(lines[1:]))
    with pytest.raises(StepLogError, match=r"spade_metrics\.jsonl:2: expected a JSON object with an integer "):
        resumed(run_dir, ckpt)
