import math
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from spade_envs.design.rewards import (
    DEFAULT_PENALTIES,
    VARIANTS,
    RewardConfig,
    SkillEMA,
    WindowStats,
    blend,
    designer_advantages,
    designer_reward,
    designer_scale,
    failure_penalty,
    learning_potential,
    p1mp,
    paired_regret,
    plateau,
    regret_term,
    solve_rate_reward,
)
from spade_envs.envs.failures import FAILURE_CODES, HINT_FAILURE_CODES

PROPS = settings(max_examples=200, deadline=None, database=None)
unit = st.floats(min_value=0.0, max_value=1.0, allow_nan=False)
outcome_lists = st.lists(unit, min_size=1, max_size=16)


def window(outcomes=(0.0, 1.0), no_hint=(0.0, 1.0), hint=(1.0, 1.0), seeds=(3, 4), **kw):
    return WindowStats(
        skill="logical_deduction",
        outcomes=outcomes,
        paired_no_hint=no_hint,
        paired_hint=hint,
        seeds_no_hint=seeds,
        seeds_hint=seeds,
        **kw,
    )


# ----- config -----------------------------------------------------------------------------------------------


def test_default_penalties_cover_every_code_and_are_negative():
    cfg = RewardConfig()
    assert set(cfg.penalties) == set(FAILURE_CODES) | set(HINT_FAILURE_CODES)
    assert all(v < 0 for v in cfg.penalties.values())
    assert cfg.penalties["syntax_error"] == -1.0
    assert cfg.penalties["solution_does_not_win"] == -0.75
    assert cfg.penalties["random_wins"] == -0.5
    assert cfg.penalties["hint_leak"] == -0.25
    # near misses cost less than code that does not run
    assert cfg.penalties["do_nothing_wins"] > cfg.penalties["solution_does_not_win"] > cfg.penalties["no_code_block"]


def test_penalty_overrides_merge_onto_defaults():
    cfg = RewardConfig(penalties={"hint_leak": -0.1})
    assert cfg.penalties["hint_leak"] == -0.1
    assert cfg.penalties["timeout"] == DEFAULT_PENALTIES["timeout"]
    assert failure_penalty(cfg, "hint_leak") == -0.1
    assert RewardConfig.from_dict(cfg.to_dict()) == cfg


@pytest.mark.parametrize("value", [0.0, 0.5, math.nan, math.inf, -math.inf])
def test_non_negative_or_non_finite_penalty_is_rejected(value):
    with pytest.raises(ValueError, match="penalty for 'timeout' must be a negative finite number"):
        RewardConfig(penalties={"timeout": value})


def test_unknown_penalty_code_is_rejected_naming_known_codes():
    with pytest.raises(ValueError, match=r"unknown failure code\(s\) \['typo'\] in penalties; known: .*'timeout'"):
        RewardConfig(penalties={"typo": -1.0})
    with pytest.raises(KeyError, match="unknown failure code 'typo'"):
        failure_penalty(RewardConfig(), "typo")


def test_from_dict_rejects_unknown_keys_naming_known_ones():
    with pytest.raises(ValueError, match=re.escape("unknown reward option(s) ['regret_scal']; known: [")):
        RewardConfig.from_dict({"regret_scal": 0.2})
    assert RewardConfig.from_dict(None) == RewardConfig()
    assert RewardConfig.from_dict({"variant": "p1mp"}).variant == "p1mp"


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"variant": "regret_based"}, "variant must be one of"),
        ({"plateau_low": 0.7}, "plateau_low <= plateau_high"),
        ({"plateau_ramp": 0.0}, "plateau_ramp must be a positive"),
        ({"regret_scale": -0.1}, "regret_scale must be a positive"),
        ({"blend_plateau_weight": 0.7}, "sum to at most 1"),
        ({"blend_regret_weight": -0.1, "blend_plateau_weight": 0.5}, "must be >= 0"),
        ({"lp_slow_ema": 0.0}, "lp_slow_ema must be in"),
        ({"feasibility_min": 1.5}, "feasibility_min must be a number in"),
    ],
)
def test_bad_config_values_are_rejected(kwargs, message):
    with pytest.raises(ValueError, match=message):
        RewardConfig(**kwargs)


# ----- building blocks --------------------------------------------------------------------------------------


def test_plateau_reference_shape():
    assert plateau(0.4) == plateau(0.5) == plateau(0.6) == 1.0
    assert plateau(0.15) == plateau(0.85) == 0.0
    assert plateau(0.0) == plateau(1.0) == 0.0
    assert plateau(0.275) == pytest.approx(0.5)
    assert plateau(0.3, low=0.2, high=0.4, ramp=0.2) == 1.0  # late 4B phase band
    with pytest.raises(ValueError, match=r"w must be a number in \[0, 1\], got 1.2"):
        plateau(1.2)
    with pytest.raises(ValueError, match="ramp > 0"):
        plateau(0.5, ramp=0.0)


def test_regret_term_saturates():
    assert regret_term(0.075) == pytest.approx(0.5)
    assert regret_term(0.5) == 1.0
    assert regret_term(-0.2) == 0.0
    with pytest.raises(ValueError, match="regret must be finite"):
        regret_term(math.nan)


def test_blend_matches_paper_weights():
    assert blend(0.5, 0.075) == pytest.approx(0.6 + 0.4 * 0.5)
    assert blend(0.95, 0.3) == pytest.approx(0.4)
    assert solve_rate_reward(0.5) == 1.0


def test_paired_regret_basic():
    assert paired_regret([0, 0, 1, 1], [1, 1, 1, 0], [1, 2, 3, 4], [4, 3, 2, 1]) == pytest.approx(0.25)
    assert paired_regret([1, 1], [0, 0], [5, 6], [6, 5]) == 0.0


def test_paired_regret_rejects_the_reference_unbalanced_arms():
    # reference: 8 no-hint plays vs 16 hinted plays of differently seeded instances
    with pytest.raises(ValueError, match="equal in size, got 8 no-hint, 16 hinted"):
        paired_regret([0.0] * 8, [1.0] * 16, list(range(8)), list(range(16)))


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (([0.0], [1.0], [1], [2]), r"not paired: seeds only in no-hint \[1\], only in hint \[2\]"),
        (([0.0, 1.0], [1.0, 1.0], [1, 1], [1, 2]), r"only in no-hint \[1\], only in hint \[2\]"),
        (([0.0], [1.0], [1, 2], [1]), "each outcome needs its seed"),
        (([], [], [], []), "non-empty"),
        (([0.0], [1.5], [1], [1]), r"hint\[0\] must be a number in \[0, 1\]"),
        (([math.nan], [1.0], [1], [1]), r"no_hint\[0\] must be a number"),
    ],
)
def test_paired_regret_rejects_bad_arms(args, message):
    with pytest.raises(ValueError, match=message):
        paired_regret(*args)


def test_learning_potential_and_p1mp():
    assert learning_potential(0.7, 0.5) == pytest.approx(0.2)
    assert learning_potential(0.7, None) == 0.0
    assert p1mp(0.5) == 1.0 and p1mp(0.0) == p1mp(1.0) == 0.0
    assert p1mp(0.25) == pytest.approx(0.75)


def test_skill_ema_uses_the_usual_convention():
    ema = SkillEMA(alpha=0.1)
    assert ema.get("s") is None
    ema.update({"s": [0.4, 0.6]})  # first window initialises with its mean
    assert ema.get("s") == pytest.approx(0.5)
    ema.update({"s": [1.0], "t": []})  # alpha weights the NEW value
    assert ema.get("s") == pytest.approx(0.9 * 0.5 + 0.1 * 1.0)
    assert ema.get("t") is None
    restored = SkillEMA(**ema.state_dict())
    assert restored.get("s") == ema.get("s") and restored.alpha == 0.1
    with pytest.raises(ValueError, match="alpha must be in"):
        SkillEMA(alpha=1.5)


# ----- designer_reward --------------------------------------------------------------------------------------


def test_blend_reward_of_a_valid_window():
    # w = 0.5 (plateau 1), regret = 1.0 - 0.5 = 0.5 (term saturates) -> 0.6 + 0.4
    assert designer_reward(RewardConfig(), window()) == pytest.approx(1.0)


def test_feasibility_gate_requires_a_hinted_win():
    partial = window(no_hint=(0.0, 0.0), hint=(0.5, 0.5))  # hint raises partial credit but never wins
    assert designer_reward(RewardConfig(), partial) == pytest.approx(0.6)
    # regret counts wins, so partial credit earns no regret even without the gate (it paid 1.0 before issue 37)
    assert designer_reward(RewardConfig(require_feasible=False), partial) == pytest.approx(0.6)
    gated = RewardConfig(variant="regret", feasibility_min=0.9)
    assert designer_reward(gated, window(no_hint=(0.0, 0.0), hint=(1.0, 0.0))) == 0.0
    assert designer_reward(RewardConfig(variant="regret"), window(no_hint=(0.0, 0.0), hint=(1.0, 0.0))) == 0.5


def test_hint_failure_zeroes_regret_and_costs_the_penalty_for_regret_variants():
    w = window(no_hint=(), hint=(), seeds=(), hint_failure="hint_leak")
    assert designer_reward(RewardConfig(), w) == pytest.approx(0.6 - 0.25)
    assert designer_reward(RewardConfig(variant="regret"), w) == pytest.approx(-0.25)
    assert designer_reward(RewardConfig(variant="solve_rate"), w) == 1.0  # never looks at hints


def test_play_failure_returns_its_penalty_for_every_variant():
    for variant in VARIANTS:
        cfg = RewardConfig(variant=variant)
        assert designer_reward(cfg, window(play_failure="timeout"), SkillEMA(0.1)) == -1.0


def test_variant_dispatch():
    w = window(outcomes=(0.0, 1.0, 1.0, 1.0))  # w = 0.75
    assert designer_reward(RewardConfig(variant="solve_rate"), w) == pytest.approx(0.4)
    assert designer_reward(RewardConfig(variant="p1mp"), w) == pytest.approx(0.75)
    assert designer_reward(RewardConfig(variant="regret"), w) == pytest.approx(0.5)
    ema = SkillEMA(0.1, {"logical_deduction": 0.5})
    assert designer_reward(RewardConfig(variant="learning_potential"), w, ema) == pytest.approx(0.25)
    with pytest.raises(ValueError, match=r"needs ema=SkillEMA\(config.lp_slow_ema\) \(alpha 0.1\), got None"):
        designer_reward(RewardConfig(variant="learning_potential"), w)
    with pytest.raises(ValueError, match="got alpha 0.5"):
        designer_reward(RewardConfig(variant="learning_potential"), w, SkillEMA(0.5))


def test_regret_variants_need_paired_arms_unless_the_hint_failed():
    with pytest.raises(ValueError, match="non-empty"):
        designer_reward(RewardConfig(), window(no_hint=(), hint=(), seeds=()))
    with pytest.raises(ValueError, match="no no-hint outcomes"):
        designer_reward(RewardConfig(), window(outcomes=()))


def test_window_rejects_unknown_failure_codes():
    with pytest.raises(ValueError, match="hint_failure must be one of"):
        window(hint_failure="timeout")
    with pytest.raises(ValueError, match="play_failure must be one of"):
        window(play_failure="hint_leak")


# ----- advantages and scale ---------------------------------------------------------------------------------


def test_designer_advantages_centre_per_skill_without_std():
    adv = designer_advantages([1.0, 0.0, 0.5, 0.5, 0.9], ["a", "a", "b", "b", "c"], scale=32.0)
    # "c" has one design: centred on the batch's designer mean (0.58), not on itself (which would give 0)
    assert adv == pytest.approx([16.0, -16.0, 0.0, 0.0, (0.9 - 0.58) * 32.0])
    with pytest.raises(ValueError, match="got 2 rewards for 1 skills"):
        designer_advantages([1.0, 0.0], ["a"], 1.0)
    with pytest.raises(ValueError, match="scale must be a positive"):
        designer_advantages([1.0], ["a"], 0.0)


def test_designer_scale_matches_reference_schedules():
    assert designer_scale(192, 24, 4) == 32.0  # games
    assert designer_scale(192, 24, 8) == 50.0  # tool use: capped
    assert designer_scale(192, 3, 4, cap=1000.0) == 256.0
    with pytest.raises(ValueError, match="n_designer_samples must be a positive int, got 0"):
        designer_scale(192, 0, 4)


# ----- properties -------------------------------------------------------------------------------------------


@st.composite
def windows(draw):
    n = draw(st.integers(min_value=1, max_value=8))
    seeds = draw(st.lists(st.integers(0, 5), min_size=n, max_size=n))
    return WindowStats(
        skill=draw(st.sampled_from(["a", "b"])),
        outcomes=tuple(draw(outcome_lists)),
        paired_no_hint=tuple(draw(st.lists(unit, min_size=n, max_size=n))),
        paired_hint=tuple(draw(st.lists(unit, min_size=n, max_size=n))),
        seeds_no_hint=tuple(seeds),
        seeds_hint=tuple(draw(st.permutations(seeds))),
    )


@PROPS
@given(
    windows(),
    st.sampled_from(VARIANTS),
    st.booleans(),
    st.one_of(st.none(), unit),
    st.sampled_from([*FAILURE_CODES, *HINT_FAILURE_CODES]),
)
def test_valid_windows_score_in_unit_interval_and_failures_below_zero(w, variant, feasible, slow, code):
    cfg = RewardConfig(variant=variant, require_feasible=feasible)
    ema = SkillEMA(0.1, {} if slow is None else {w.skill: slow})
    assert 0.0 <= designer_reward(cfg, w, ema) <= 1.0
    assert failure_penalty(cfg, code) < 0


@PROPS
@given(unit, st.floats(0.0, 1.0), st.floats(0.0, 0.4), st.floats(0.01, 0.5))
def test_plateau_is_symmetric_about_the_band_and_one_on_it(d, centre, half, ramp):
    low, high = max(0.0, centre - half), min(1.0, centre + half)
    c = (low + high) / 2
    if 0.0 <= c - d and c + d <= 1.0:
        assert plateau(c - d, low, high, ramp) == pytest.approx(plateau(c + d, low, high, ramp), abs=1e-9)
    on_band = low + d * (high - low)
    assert plateau(min(on_band, high), low, high, ramp) == 1.0


@PROPS
@given(unit, st.floats(-1.0, 1.0), st.floats(-1.0, 1.0))
def test_blend_is_monotone_in_regret(w, r1, r2):
    lo, hi = sorted((r1, r2))
    assert blend(w, lo) <= blend(w, hi)


@PROPS
@given(st.lists(st.tuples(unit, unit), min_size=1, max_size=16), st.randoms(use_true_random=False))
def test_regret_is_zero_when_the_hint_never_helps(pairs, rnd):
    no_hint = [max(a, b) for a, b in pairs]
    hint = [min(a, b) for a, b in pairs]
    seeds = list(range(len(pairs)))
    shuffled = list(zip(seeds, hint))
    rnd.shuffle(shuffled)
    assert paired_regret(no_hint, [h for _, h in shuffled], seeds, [s for s, _ in shuffled]) == 0.0


@PROPS
@given(st.lists(st.integers(0, 9), min_size=1, max_size=8), st.integers(0, 9), st.integers(0, 7))
def test_paired_check_rejects_any_unpaired_seed(seeds, other, position):
    changed = list(seeds)
    position %= len(seeds)
    if changed[position] == other:
        other += 10
    changed[position] = other
    with pytest.raises(ValueError, match="not paired"):
        paired_regret([0.5] * len(seeds), [0.5] * len(seeds), seeds, changed)


@PROPS
@given(st.lists(st.tuples(st.floats(-2.0, 2.0), st.sampled_from("abc")), min_size=1, max_size=32), st.floats(0.1, 60))
def test_advantages_sum_to_zero_per_skill(pairs, scale):
    rewards, skills = [r for r, _ in pairs], [s for _, s in pairs]
    adv = designer_advantages(rewards, skills, scale)
    mean = sum(rewards) / len(rewards)
    for skill in set(skills):
        group = [(a, r) for a, r, s in zip(adv, rewards, skills) if s == skill]
        if len(group) > 1:
            assert sum(a for a, _ in group) == pytest.approx(0.0, abs=1e-9)
        else:  # a lone design is compared with the batch's designer mean
            assert group[0][0] == pytest.approx((group[0][1] - mean) * scale, abs=1e-9)
