"""The curriculum simulator: determinism, the stand-ins' equations, each reward's known behaviour in the model, and
that the env pool it runs is the recipe's own :class:`~spade_envs.curriculum.Curriculum`.

Behaviour tests run 2-3 seeds without memory replay and exemplars, at the launchers' memory capacity (faster), and
assert on the mean over the last quarter of the steps.
"""

import argparse
import csv
import math
import re
import shlex
from pathlib import Path

import numpy as np
import pytest

from spade_envs.curriculum import Curriculum
from spade_envs.design.memory import EnvMemory
from spade_envs.design.memory_record import MemoryConfig
from spade_envs.design.rewards import DEFAULT_PENALTIES, RewardConfig
from spade_envs.envs.spec import EnvSpec
from spade_envs.simulate import (
    INVALID_CODES,
    Agent,
    GaussianDesigner,
    Simulation,
    SimulationConfig,
    expected_outcome,
    progress,
    simulate,
    win_probability,
)
from spade_envs.simulate.cli import add_arguments, build_config, main
from spade_envs.simulate.plots import have_matplotlib
from spade_envs.simulate.report import COLUMNS, csv_rows, format_summary, summarize


def final(runs, name, share=0.25):
    """Mean over seeds of each run's mean over the last ``share`` of its steps (NaN-free metrics only)."""
    return float(np.mean([np.mean([getattr(r, name) for r in run.rows[-int(len(run.rows) * share) :]])
                          for run in runs]))  # fmt: skip


#: The launchers' memory capacity; the curriculum's per-step bookkeeping grows with memory, so this halves a run's time.
LAUNCHER_MEMORY = MemoryConfig(capacity=200)


def runs_of(config, seeds=3):
    return [simulate(config, seed) for seed in range(seeds)]


# ----- config ----------------------------------------------------------------------------------------------------
def test_from_dict_builds_nested_configs_and_rejects_unknown_keys_naming_the_known_ones():
    config = SimulationConfig.from_dict(
        {"steps": 10, "reward": {"variant": "regret"}, "memory_config": {"capacity": 60}}
    )
    assert (config.steps, config.reward.variant, config.memory_config.capacity, config.label) == (
        10,
        "regret",
        60,
        "regret",
    )
    with pytest.raises(ValueError, match=r"unknown simulation option\(s\) \['stepz'\]; known: .*'steps'"):
        SimulationConfig.from_dict({"stepz": 3})
    with pytest.raises(ValueError, match=r"unknown reward option\(s\) \['variantt'\]"):
        SimulationConfig.from_dict({"reward": {"variantt": "blend"}})


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"steps": 0}, "steps must be an int >= 1, got 0"),
        ({"hint_strength": -0.5}, "hint_strength must be >= 0, got -0.5"),
        ({"partial_credit": 1.5}, r"partial_credit must be in \[0, 1\], got 1.5"),
        ({"invalid_rate": 1.0}, "invalid_rate must be below 1"),
        ({"temperature": float("nan")}, "temperature must be a finite number"),
        ({"memory": "yes"}, "memory must be a bool"),
        ({"skills": ("a", "a")}, "skills must be distinct"),
        ({"designer_init_std": 5.0}, "designer_min_std <= designer_init_std <= designer_max_std"),
        ({"memory_replay_fraction": 1.5}, r"memory_replay_fraction must be in \[0, 1\]"),
        ({"active_per_regen": 0}, "active_per_regen must be an int >= 1 or None"),
        # the live envs (24) and the designs about to go live (24) are never evicted, plus one
        ({"memory_config": MemoryConfig(capacity=48)}, r"memory_config.capacity \(48\) must be at least 49"),
    ],
)
def test_bad_values_are_rejected_by_name(changes, message):
    with pytest.raises(ValueError, match=message):
        SimulationConfig(**changes)


def test_to_dict_round_trips():
    config = SimulationConfig(hint_strength=0.2, reward=RewardConfig(variant="p1mp"))
    assert SimulationConfig.from_dict(config.to_dict()) == config


def test_with_updates_merges_nested_mappings():
    config = SimulationConfig().with_updates(reward={"require_feasible": False}, fixed_pool=True)
    assert config.reward == RewardConfig(require_feasible=False) and config.label == "fixed"


# ----- the stand-ins ---------------------------------------------------------------------------------------------
def test_win_probability_is_exactly_zero_and_one_beyond_the_reach():
    config = SimulationConfig()
    r = config.reach
    assert r == pytest.approx(0.5 * math.log(0.98 / 0.02))
    p = win_probability(np.array([-r - 0.01, -r + 0.1, 0.0, r - 0.1, r + 0.01]), config.temperature, config.win_floor)
    assert p[0] == 0.0 and p[-1] == 1.0 and 0 < p[1] < p[2] < p[3] < 1 and p[2] == pytest.approx(0.5)


def test_a_hint_cannot_make_an_env_harder_than_ability_plus_help_winnable():
    config = SimulationConfig(hint_strength=0.7)
    agent = Agent(config, np.zeros(len(config.skills)))
    beyond = np.full((1, 64), config.hint_strength + config.reach + 0.05)
    hinted = agent.play(np.array([0]), beyond, hinted=True, rng=np.random.default_rng(0))
    assert hinted.max() < 1.0  # never a win, only partial credit
    within = np.full((1, 64), config.hint_strength + config.reach - 1.0)
    assert agent.play(np.array([0]), within, hinted=True, rng=np.random.default_rng(0)).max() == 1.0


def test_partial_credit_and_the_hints_share_of_the_missing_progress():
    config = SimulationConfig(partial_credit=0.3, hint_progress=0.5, progress_span=3.0, hint_strength=0.0)
    assert progress(np.array([0.0, -1.5, -3.0, -9.0]), 3.0).tolist() == [1.0, 0.5, 0.0, 0.0]
    assert progress(np.array([-3.0]), 3.0, 0.5).tolist() == [0.5]
    far = np.array([-10.0])  # unsolvable: only partial credit, which the hint raises by kappa * beta
    gain = expected_outcome(far, config, hinted=True) - expected_outcome(far, config)
    assert gain == pytest.approx([0.15])


def test_ability_grows_only_from_groups_with_differing_outcomes_on_their_own_skill():
    config = SimulationConfig(agent_lr=0.5)
    agent = Agent(config, np.zeros(len(config.skills)))
    gain = agent.learn(
        np.array([0, 1, 2]), np.array([[1.0, 1.0, 1.0, 1.0], [0.0, 0.0, 0.0, 0.0], [1.0, 0.0, 1.0, 0.0]])
    )
    assert gain.tolist() == pytest.approx([0.0, 0.0, 0.5 * 0.25 / 3, 0.0, 0.0, 0.0])
    assert agent.ability.tolist() == pytest.approx(gain.tolist())


def test_designer_moves_towards_rewarded_difficulty_and_drops_invalid_code():
    config = SimulationConfig(designer_init_mean=0.0, invalid_rate=0.5, designer_lr=1.0, validity_lr=1.0)
    designer = GaussianDesigner(config)
    skills = np.zeros(4, dtype=int)
    difficulty = np.array([1.0, -1.0, np.nan, np.nan])  # the harder valid design scored higher
    designer.update(skills, difficulty, np.zeros(4), np.array([False, False, True, True]),
                    np.array([0.5, 0.1, -0.3, -0.3]))  # fmt: skip
    assert designer.mean[0] == pytest.approx((0.5 * 1.0 + 0.1 * -1.0) / 2)
    assert designer.invalid_propensity[0] < 0.5 and designer.mean[1:].tolist() == [0.0] * 5
    d, _, invalid, codes = designer.propose(np.arange(6), np.full(6, np.nan), np.random.default_rng(1))
    assert all((c in INVALID_CODES) == bad for c, bad in zip(codes, invalid)) and np.isnan(d[invalid]).all()


# ----- the loop ----------------------------------------------------------------------------------------------------
def test_same_config_and_seed_give_identical_csv_rows_and_another_seed_does_not():
    config = SimulationConfig(steps=24)
    first, again, other = simulate(config, 3), simulate(config, 3), simulate(config, 4)
    assert csv_rows([first]) == csv_rows([again])
    assert csv_rows([first]) != csv_rows([other])
    assert len(csv_rows([first])) == 24 and len(COLUMNS) == len(csv_rows([first])[0])


def test_fixed_pool_saturates_while_blend_keeps_the_win_rate_in_the_band():
    base = SimulationConfig(memory=False, memory_config=LAUNCHER_MEMORY)
    fixed, blend = runs_of(base.with_updates(fixed_pool=True), 2), runs_of(base, 2)
    early_fixed = np.mean([[r.win_rate for r in run.rows[:20]] for run in fixed])
    assert final(fixed, "win_rate") > 0.88 and final(fixed, "win_rate") > early_fixed + 0.25
    assert 0.42 <= final(blend, "win_rate") <= 0.58
    # the band is one of win probability (what the plateau reads), 0.4 difficulty units wide around the agent
    assert final(blend, "frac_in_band") > final(fixed, "frac_in_band") + 0.15
    gain = lambda runs: np.mean([(r.final_ability - r.initial_ability).mean() for r in runs])  # noqa: E731
    assert gain(blend) > gain(fixed) + 0.5  # a frontier curriculum keeps the agent learning


def test_regret_counts_wins_so_weak_hints_do_not_drift_it_to_unsolvable_envs_even_without_the_gate():
    # On the paper's two arms. While regret counted outcomes, a weak hint's extra partial credit on envs nobody wins
    # was the largest regret there was: without the feasibility gate 30-50% of live envs ended unsolvable.
    base = SimulationConfig(memory=False, memory_config=LAUNCHER_MEMORY, hint_strength=0.1, placebo=False)
    no_gate = runs_of(base.with_updates(reward={"variant": "regret", "require_feasible": False}), 2)
    gated = runs_of(base.with_updates(reward={"variant": "regret", "require_feasible": True}), 2)
    assert final(no_gate, "frac_unsolvable") < 0.1
    assert final(gated, "frac_unsolvable") < 0.1


def test_pairing_removes_instance_noise_from_regret():
    # The hint does nothing here, so regret is pure noise; pairing the instances removes their share of it. Nothing
    # learns, and the gate is off, so the regret column is paired_regret over the live envs' design-time arms.
    base = SimulationConfig(steps=40, memory=False, agent_lr=0.0, designer_lr=0.0, designer_std_lr=0.0,
                            invalid_rate=0.0, designer_init_mean=0.0, instance_noise=1.0, hint_strength=0.0,
                            hint_progress=0.0, reward=RewardConfig(require_feasible=False))  # fmt: skip
    paired, unpaired = runs_of(base, 2), runs_of(base.with_updates(paired=False), 2)
    assert final(unpaired, "regret", 0.9) > final(paired, "regret", 0.9) + 0.01


def test_invalid_designs_earn_their_penalty_and_validity_rises_as_the_designer_learns():
    broken = simulate(SimulationConfig(steps=12, invalid_rate=0.99, validity_lr=0.0, memory=False), 0)
    penalties = [DEFAULT_PENALTIES[c] for c in INVALID_CODES]
    closed = [r.designer_reward for r in broken.rows if not math.isnan(r.designer_reward)]
    assert closed and all(min(penalties) <= x <= max(penalties) for x in closed)
    learning = runs_of(SimulationConfig(steps=160, memory=False, memory_config=LAUNCHER_MEMORY))
    assert final(learning, "validity") > np.mean([run.rows[0].validity for run in learning]) + 0.15


def test_memory_holds_real_records_and_feeds_the_replay_stream():
    run = simulate(SimulationConfig(steps=40), 0)
    assert isinstance(run.memory, EnvMemory) and run.rows[-1].memory_size == len(run.memory) > 0
    record = next(r for r in run.memory if r.created_step == 36)  # admitted at its design step, as in a run
    assert isinstance(record.spec, EnvSpec) and record.plays > 0 and record.last_played_step == 39
    assert math.isnan(run.rows[0].replay_win_rate) and not all(math.isnan(r.replay_win_rate) for r in run.rows)
    pool = simulate(SimulationConfig(steps=20, fixed_pool=True, fixed_pool_size=12), 0)
    assert len(pool.memory) == 12 and all(r.live_envs == 12 for r in pool.rows)  # the pool is live all run
    assert all(math.isnan(r.validity) and math.isnan(r.designer_reward) for r in pool.rows)  # no designer
    off = simulate(SimulationConfig(steps=12, memory=False), 0)  # no replay, no exemplars; memory still keeps records
    assert all(math.isnan(r.replay_win_rate) for r in off.rows) and len(off.memory) > 6


def test_the_simulator_runs_the_recipes_curriculum_so_a_full_memory_never_evicts_a_live_env():
    # The smallest memory the simulator accepts (6 live envs at step 0, 12 designs per regeneration): it evicts from
    # the second regeneration on. The recipe's Curriculum keeps live and about-to-go-live envs (issue 25, finding 1);
    # a model of its own that admitted designs without that rule would play evicted envs.
    config = SimulationConfig(steps=24, envs_per_regen=12, agent_rows=12, memory_config=MemoryConfig(capacity=25))
    sim = Simulation(config, 0)
    assert type(sim.curriculum) is Curriculum
    for t in range(config.steps):
        row = sim.step(t)
        ids = {r.env_id for r in sim.curriculum.memory}
        assert set(sim.curriculum.live) | set(sim.curriculum.generation) <= ids
        tasks = [v for (step, _), v in sim.curriculum.agent_tasks.items() if step == t]
        assert len(tasks) == (12 if t % 4 == 0 else 13) and {task["env_id"] for task in tasks} <= ids
        assert row.memory_size == len(ids) <= 25 and row.live_envs == len(sim.curriculum.live)
    assert sum(m["spade/memory/evictions"] for m in sim.pool_metrics) > 20  # memory did fill and evict
    assert [m["spade/step"] for m in sim.pool_metrics] == list(range(config.steps))  # one curriculum row per step
    assert [m["spade/live_envs"] for m in sim.pool_metrics[:2]] == [6, sim.pool_metrics[1]["spade/live_envs"]]
    assert sim.pool_metrics[1]["spade/live_envs"] > 6  # step 0's designs went live at step 1


def test_summary_reports_one_row_per_variant():
    runs = runs_of(SimulationConfig(steps=20, memory=False), 2) + runs_of(
        SimulationConfig(steps=20, fixed_pool=True), 1
    )
    blend, fixed = summarize(runs)
    assert (blend.label, blend.seeds, fixed.label, fixed.seeds) == ("blend", 2, "fixed", 1)
    assert math.isnan(fixed.validity) and math.isnan(fixed.designer_reward)  # the baseline has no designer
    assert "ability gain" in format_summary([blend, fixed]).splitlines()[0]


# ----- CLI -----------------------------------------------------------------------------------------------------------
def test_cli_prints_the_summary_of_the_options_it_was_given(capsys):
    assert main(["--steps", "12", "--seeds", "2", "--plays", "4", "--hint-strength", "0.5", "--no-memory",
                 "--variant", "regret", "--set", "reward.plateau_low=0.3", "--set", "regen_every=3"]) == 0  # fmt: skip
    out = capsys.readouterr().out
    assert out.splitlines()[2].split()[:2] == ["regret", "2"] and "1 variant(s) x 2 seeds x 12 steps" in out


def test_cli_compare_writes_one_csv_a_plot_per_variant_and_a_comparison(tmp_path, capsys):
    argv = ["--steps", "8", "--seeds", "2", "--unpaired", "--no-feasibility-gate", "--out", str(tmp_path)]
    assert main([*argv, "--compare", "solve_rate", "fixed", "--variant-plots"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert [line.split()[0] for line in lines[2:4]] == ["solve_rate", "fixed"]
    with (tmp_path / "compare.csv").open() as f:
        rows = list(csv.reader(f))
    assert tuple(rows[0]) == COLUMNS and len(rows) == 1 + 2 * 2 * 8
    assert {row[2] for row in rows[1:]} == {"solve_rate", "fixed"}
    pngs = ("compare.png", "compare-solve_rate.png", "compare-fixed.png")
    assert [(tmp_path / name).exists() for name in pngs] == [have_matplotlib()] * 3


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--set", "nonsense=1"], r"unknown simulation option\(s\) \['nonsense'\]"),
        (["--set", "reward.plateau_low"], "--set expects KEY=VALUE"),
        (["--set", "reward.variant=regret"], "use --variant / --compare"),
        (["--plays", "0"], "plays_per_arm must be an int >= 1"),
    ],
)
def test_cli_reports_bad_options_with_exit_status_2(argv, message, capsys):
    assert main(["--steps", "4", "--seeds", "1", *argv]) == 2
    assert re.search(message, capsys.readouterr().err)


# ----- docs ----------------------------------------------------------------------------------------------------------
DOC = Path(__file__).resolve().parents[3] / "docs" / "simulator.md"


def test_every_command_in_the_docs_parses_into_a_valid_config():
    text = DOC.read_text()
    commands = [line.split("#")[0].split()[2:] for line in text.splitlines() if line.startswith("spade-envs simulate")]
    commands += [shlex.split(cell) for cell in re.findall(r"^\| `(--[^`]*)`", text, re.MULTILINE)]
    assert len(commands) >= 15
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    for argv in commands:
        args = parser.parse_args(argv)
        for variant in args.compare or [args.variant]:
            build_config(args, variant)
    for image in re.findall(r"\(img/([^)]+\.png)\)", text):
        assert (DOC.parent / "img" / image).stat().st_size < 200_000, image
