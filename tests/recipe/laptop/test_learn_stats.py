"""make learn's arithmetic and plumbing without a trainer: the gap's bootstrap interval, steps read from the metrics
file, the rung selection and the two arms' commands (the trainer run itself:
tests/recipe/laptop/test_learn_on_cpu.py)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from recipe.spade.laptop.learn import (
    _line,
    arm_command,
    load_config,
    pick_arms,
    pick_rungs,
    read_steps,
    summarise,
)
from recipe.spade.laptop.learn_stats import StepRate, gap_over_last_third, last_third, thread_env, write_figure


def arm(rates: list[float], plays: int = 32) -> list[StepRate]:
    return [StepRate(step, round(r * plays), plays, 10.0) for step, r in enumerate(rates, start=1)]


def test_last_third_and_a_clear_gap_excludes_zero_while_equal_arms_do_not():
    assert last_third(range(1, 10)) == [7, 8, 9] and last_third([1, 2]) == [2] and last_third([4]) == [4]
    trained, control = arm([0.2, 0.4, 0.5, 0.6, 0.8, 0.9]), arm([0.3, 0.3, 0.4, 0.3, 0.3, 0.4])
    gap = gap_over_last_third(trained, control)
    assert gap.steps == (5, 6) and gap.trained == pytest.approx(0.85, abs=0.01)
    assert gap.control == pytest.approx(0.35, abs=0.01) and gap.excludes_zero and gap.low > 0.3
    same = gap_over_last_third(control, control)
    assert same.gap == 0 and same.low < 0 < same.high and not same.excludes_zero


def test_the_interval_narrows_with_more_plays_and_bad_input_is_refused():
    wide = gap_over_last_third(arm([0.6] * 3, plays=8), arm([0.4] * 3, plays=8))
    narrow = gap_over_last_third(arm([0.6] * 3, plays=128), arm([0.4] * 3, plays=128))
    assert narrow.high - narrow.low < (wide.high - wide.low) / 2
    with pytest.raises(ValueError, match="share no step"):
        gap_over_last_third(arm([0.5]), [])
    with pytest.raises(ValueError, match="level must be in"):
        gap_over_last_third(arm([0.5]), arm([0.5]), level=1.5)


def test_read_steps_takes_this_runs_rows_with_their_seconds(tmp_path):
    rows = [{"time": 50.0, "spade/step": 0, "spade/solve/win_rate": 1.0, "spade/solve/plays": 4},  # an older run
            {"time": 170.0, "spade/step": 1, "spade/solve/win_rate": 0.25, "spade/solve/plays": 32},
            {"time": 230.5, "spade/step": 2, "spade/solve/win_rate": 0.5, "spade/solve/plays": 30}]  # fmt: skip
    path = tmp_path / "spade_metrics.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert read_steps(path, since=100.0) == [StepRate(1, 8, 32, 70.0), StepRate(2, 15, 30, 60.5)]
    assert read_steps(tmp_path / "absent.jsonl", since=0.0) == []
    figure = write_figure(tmp_path / "learn.png", {"trained": read_steps(path, 100.0)}, "t")
    assert figure is not None and figure.stat().st_size > 1000


def test_rungs_come_from_the_band_and_only_the_control_arm_is_frozen(tmp_path):
    cfg = load_config(False, ["baselines.AddEnv=0.3", "baselines.SayWordEnv=0.9", "baselines.CountEnv=0.05"])
    picked = pick_rungs(cfg)
    assert "AddEnv" in picked and "SayWordEnv" not in picked and "CountEnv" not in picked
    assert pick_rungs(load_config(True, ["rungs=[TwoDoorsEnv]"])) == ["TwoDoorsEnv"]
    with pytest.raises(ValueError, match="no ladder rung has a measured baseline in"):
        pick_rungs(load_config(False, ["band=[0.99,1.0]"]))
    fast = load_config(True)
    assert fast.arm.steps == fast.fast.steps and fast.arm.lr == load_config(False).arm.lr
    commands = {a: arm_command(fast, a, "/m", tmp_path / "pool", tmp_path / a) for a in ("control", "trained")}
    (control, env), (trained, _) = commands["control"], commands["trained"]
    assert f"trainer.critic_warmup={fast.arm.steps + 1000}" in control and "trainer.critic_warmup=0" in trained
    assert {a for a in control if "critic_warmup" not in a} == {a for a in trained if "critic_warmup" not in a}
    assert f"spade.seed_secret={fast.seed_secret}" in control  # both arms: the same seeds (learn.yaml)
    assert env["STEPS"] == str(fast.arm.steps) and env["ENVS_PER_REGEN"] == "0"
    # both arms: the rollout's log-probs stand in for a second forward pass, and the rollout's gather window is set
    assert "algorithm.rollout_correction.bypass_mode=true" in control
    assert f"++actor_rollout_ref.rollout.custom.hf_gather_s={fast.arm.gather_s}" in control
    assert (
        f"spade.fixed_env.pool_dir={tmp_path / 'pool'}" in control and "+ray_kwargs.ray_init.address=local" in control
    )


def test_threads_default_to_every_core_and_reach_both_processes():
    cores = str(os.cpu_count() or 1)
    assert thread_env(0) == {"OMP_NUM_THREADS": cores, "HF_ROLLOUT_THREADS": cores}
    assert thread_env(3) == {"OMP_NUM_THREADS": "3", "HF_ROLLOUT_THREADS": "3"}
    with pytest.raises(ValueError, match="threads must be 0"):
        thread_env(-1)
    _, env = arm_command(load_config(False, ["threads=1"]), "trained", "/m", Path("/p"), Path("/r"))
    assert env["OMP_NUM_THREADS"] == "1" and env["HF_ROLLOUT_THREADS"] == "1"


def test_the_summary_gives_the_gap_with_both_arms_and_none_with_one(tmp_path, capsys):
    cfg = load_config(True)
    control, trained = arm([0.25, 0.25, 0.3]), arm([0.4, 0.8, 0.9])
    gap = summarise(cfg, tmp_path, {"control": control, "trained": trained}, ["SayWordEnv"], 12.0)
    out = capsys.readouterr().out.splitlines()
    assert gap is not None and gap.excludes_zero and gap.steps == (3,)
    assert out[0].startswith("trained - control over the last third (step 3): +0.59") and "excludes 0" in out[0]
    summary = json.loads((tmp_path / "learn_summary.json").read_text())
    assert summary["gap"]["gap"] == pytest.approx(gap.gap) and [s["wins"] for s in summary["steps"]["trained"]] == [
        13,
        26,
        29,
    ]
    assert summarise(cfg, tmp_path, {"control": control}, ["SayWordEnv"], 5.0) is None
    assert capsys.readouterr().out == "only the control arm ran: no gap; total 5 s\n"
    assert json.loads((tmp_path / "learn_summary.json").read_text())["gap"] is None
    line = _line("trained", trained[1], control[1], first=False)
    assert line == "  trained  step  2  win 0.81 (26/32)  control 0.25  10 s"
    assert pick_arms(cfg) == ["control", "trained"]
    for bad in ("arms=[]", "arms=[trained,trained]", "arms=[frozen]"):
        with pytest.raises(ValueError, match="arms must be a non-empty list of distinct names"):
            pick_arms(load_config(True, [bad]))
