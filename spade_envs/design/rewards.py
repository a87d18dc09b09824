"""Designer rewards: how good was an environment for the agent that played it?

The designer is paid for environments at the agent's learning frontier. Every function here is pure (only
:class:`SkillEMA` keeps state) so the reward manager, tests and offline analysis compute identical numbers. Valid
environments score in [0, 1]; failures (invalid code, hangs, unusable hints) get a strictly negative penalty, so
the designer always learns that breaking validation is worse than any working environment (the reference gave no
signal at all for invalid code).

Everything counts *wins*, the env's own verdict (an outcome of 1, :func:`~spade_envs.envs.contract.is_win`), never raw
outcomes: partial credit below 1 trains the agent but is a loss here. Otherwise an env that pays 0.5 for any wrong
answer on instances only the hint solves sits at ``w = 0.5`` with regret 0.5 (the maximum reward) while every
training play scores 0.5 and GRPO learns nothing from it.

Variants (``RewardConfig.variant``), with ``w`` the no-hint win rate over the window:

- ``blend`` (paper default): ``blend_plateau_weight * plateau(w) + blend_regret_weight * regret_term(regret)``.
- ``regret``: the paired regret itself, ``max(0, hint win rate - max(no-hint win rate, placebo win rate))``
  (placebo: the content-free arm of :mod:`spade_envs.design.placebo`, when played).
- ``solve_rate``: ``plateau(w)`` only.
- ``learning_potential``: ``|w - slow EMA of the skill's past window means|``.
- ``p1mp``: ``4 w (1 - w)``, the win/loss variance p(1-p) scaled to peak at 1.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from spade_envs.design.reward_config import DEFAULT_PENALTIES, VARIANTS, RewardConfig
from spade_envs.design.reward_config import unit_interval as _unit
from spade_envs.envs.contract import is_win
from spade_envs.envs.failures import FAILURE_CODES, HINT_FAILURE_CODES

__all__ = [
    "DEFAULT_PENALTIES",
    "VARIANTS",
    "RewardConfig",
    "SkillEMA",
    "WindowStats",
    "blend",
    "credited_regret",
    "designer_advantages",
    "designer_reward",
    "designer_scale",
    "failure_penalty",
    "learning_potential",
    "p1mp",
    "paired_regret",
    "plateau",
    "regret_term",
    "solve_rate_reward",
    "win_rate",
]


def _outcomes(name: str, values: Iterable[float]) -> list[float]:
    out = list(values)
    for i, v in enumerate(out):
        _unit(f"{name}[{i}]", v)
    return out


def _wins(name: str, values: Iterable[float]) -> list[float]:
    """1.0 for each won episode, 0.0 for each other (partial credit included), after checking every outcome."""
    return [1.0 if is_win(v) else 0.0 for v in _outcomes(name, values)]


def win_rate(outcomes: Iterable[float]) -> float:
    """The share of ``outcomes`` that are wins (outcome 1): what the designer reward and the memory call ``w``.

    Raises:
        ValueError: no outcomes, or an outcome outside [0, 1].
    """
    wins = _wins("outcomes", outcomes)
    if not wins:
        raise ValueError("no outcomes: the win rate is undefined")
    return sum(wins) / len(wins)


_DEFAULT = RewardConfig()


@dataclass(frozen=True)
class WindowStats:
    """What one environment produced over its reward window (design step K up to K + regen_every).

    Outcomes are episode outcomes in [0, 1] as played; the reward reads only which of them are wins.

    Attributes:
        skill: the env's skill; ``learning_potential`` keeps one EMA per skill.
        outcomes: every no-hint outcome in the window, the design-step plays included; ``w`` is their win rate.
        paired_no_hint: no-hint outcomes at design time, one per seed in ``seeds_no_hint``.
        paired_hint: hinted outcomes at design time, one per seed in ``seeds_hint`` (same seeds as above).
        seeds_no_hint: seeds of ``paired_no_hint``.
        seeds_hint: seeds of ``paired_hint``.
        paired_placebo: outcomes of the placebo arm on ``seeds_hint`` (:mod:`spade_envs.design.placebo`); empty: no
            placebo arm was played (the paper's two arms), so regret is measured against no-hint alone.
        hint_failure: a :data:`~spade_envs.envs.failures.HINT_FAILURE_CODES` code when no usable hint existed (the
            hinted arm is then empty and regret is 0).
        play_failure: a :data:`~spade_envs.envs.failures.FAILURE_CODES` code when the env broke during play (e.g.
            ``timeout``); the reward is then that penalty, whatever the outcomes.
    """

    skill: str
    outcomes: tuple[float, ...]
    paired_no_hint: tuple[float, ...] = ()
    paired_hint: tuple[float, ...] = ()
    seeds_no_hint: tuple[int, ...] = ()
    seeds_hint: tuple[int, ...] = ()
    hint_failure: str | None = None
    play_failure: str | None = None
    paired_placebo: tuple[float, ...] = ()

    def __post_init__(self) -> None:
        for name in ("outcomes", "paired_no_hint", "paired_hint", "seeds_no_hint", "seeds_hint", "paired_placebo"):
            object.__setattr__(self, name, tuple(getattr(self, name)))
        _outcomes("outcomes", self.outcomes)
        if self.hint_failure is not None and self.hint_failure not in HINT_FAILURE_CODES:
            raise ValueError(f"hint_failure must be one of {sorted(HINT_FAILURE_CODES)}, got {self.hint_failure!r}")
        if self.play_failure is not None and self.play_failure not in FAILURE_CODES:
            raise ValueError(f"play_failure must be one of {sorted(FAILURE_CODES)}, got {self.play_failure!r}")

    @property
    def win_rate(self) -> float:
        """``w``: the share of the window's no-hint outcomes that are wins (the memory's win rate)."""
        if not self.outcomes:
            raise ValueError(f"window of skill {self.skill!r} has no no-hint outcomes; w is undefined")
        return win_rate(self.outcomes)


def paired_regret(
    no_hint: Sequence[float],
    hint: Sequence[float],
    seeds_no_hint: Sequence[int],
    seeds_hint: Sequence[int],
    placebo: Sequence[float] | None = None,
) -> float:
    """``max(0, mean(hint) - max(mean(no_hint), mean(placebo)))`` over arms that played the same seeds.

    Pairing is checked, not assumed: the reference compared 8 no-hint plays of one instance distribution with
    16 hinted plays of another, so its regret mixed the hint's effect with instance difficulty. ``placebo`` (the
    outcomes of a content-free hint of the same shape, :mod:`spade_envs.design.placebo`, on ``seeds_hint``) raises the
    baseline: an env that rewards *having* a hint, not its content, earns no regret. ``None``: the paper's two arms.
    The reward passes wins (1 or 0 per play, :func:`credited_regret`), so this is a difference of win rates there.

    Raises:
        ValueError: an arm is empty, an outcome lies outside [0, 1], an arm's outcome and seed counts differ, the
            arms differ in size, or their seeds are not the same multiset.
    """
    no_hint, hint = _outcomes("no_hint", no_hint), _outcomes("hint", hint)
    baseline = None
    if placebo is not None:
        placebo = _outcomes("placebo", placebo)
        if len(placebo) != len(hint):
            raise ValueError(f"the placebo arm must match the hinted arm: {len(placebo)} vs {len(hint)} outcomes")
        baseline = sum(placebo) / len(placebo) if placebo else None
    if len(no_hint) != len(seeds_no_hint) or len(hint) != len(seeds_hint):
        raise ValueError(
            f"each outcome needs its seed: no_hint has {len(no_hint)} outcomes for {len(seeds_no_hint)} seeds, "
            f"hint has {len(hint)} outcomes for {len(seeds_hint)} seeds"
        )
    if not no_hint or len(no_hint) != len(hint):
        raise ValueError(f"arms must be non-empty and equal in size, got {len(no_hint)} no-hint, {len(hint)} hinted")
    if Counter(seeds_no_hint) != Counter(seeds_hint):
        only_no_hint = sorted((Counter(seeds_no_hint) - Counter(seeds_hint)).elements())
        only_hint = sorted((Counter(seeds_hint) - Counter(seeds_no_hint)).elements())
        raise ValueError(f"arms are not paired: seeds only in no-hint {only_no_hint[:5]}, only in hint {only_hint[:5]}")
    reference = sum(no_hint) / len(no_hint)
    if baseline is not None:
        reference = max(reference, baseline)
    return max(0.0, sum(hint) / len(hint) - reference)


def plateau(w: float, low: float = 0.4, high: float = 0.6, ramp: float = 0.25) -> float:
    """1 for ``w`` in [low, high], falling linearly to 0 over ``ramp`` on each side: reward the frontier."""
    w = _unit("w", w)
    if not (low <= high and ramp > 0):
        raise ValueError(f"need low <= high and ramp > 0, got low={low!r}, high={high!r}, ramp={ramp!r}")
    distance = max(low - w, w - high, 0.0)
    return max(0.0, 1.0 - distance / ramp)


def regret_term(regret: float, scale: float = 0.15) -> float:
    """``clip(regret / scale, 0, 1)``: saturates so one very helpful hint cannot dominate the blend."""
    if not math.isfinite(regret):
        raise ValueError(f"regret must be finite, got {regret!r}")
    return min(1.0, max(0.0, regret / scale))


def blend(w: float, regret: float, config: RewardConfig | None = None) -> float:
    """Paper reward: weighted plateau (difficulty) plus saturated regret (the env teaches something)."""
    config = config or _DEFAULT
    p = plateau(w, config.plateau_low, config.plateau_high, config.plateau_ramp)
    return config.blend_plateau_weight * p + config.blend_regret_weight * regret_term(regret, config.regret_scale)


def solve_rate_reward(w: float, config: RewardConfig | None = None) -> float:
    """Ablation: difficulty only (the plateau term of :func:`blend`)."""
    config = config or _DEFAULT
    return plateau(w, config.plateau_low, config.plateau_high, config.plateau_ramp)


def learning_potential(w: float, slow_ema: float | None) -> float:
    """Ablation: ``|w - slow|``, how far this env is from what the skill usually gives; 0 without history.

    Known weak: it pays for any deviation, so in the curriculum simulator the designer chases its own average and
    about a third of environments end up unsolvable (docs/simulator.md). Kept as the paper's ablation, not as a
    default.
    """
    w = _unit("w", w)
    return 0.0 if slow_ema is None else abs(w - _unit("slow_ema", slow_ema))


def p1mp(w: float) -> float:
    """Ablation: outcome variance ``w (1 - w)`` times 4, so it spans [0, 1] like the other variants."""
    w = _unit("w", w)
    return 4.0 * w * (1.0 - w)


class SkillEMA:
    """Slow per-skill EMA of window win rates, the baseline of ``learning_potential``.

    Build it as ``SkillEMA(config.lp_slow_ema)``; checkpoint it with :meth:`state_dict`.
    Convention: ``mu <- (1 - alpha) * mu + alpha * x`` (``alpha`` weights the new value); the first value of a skill
    initialises it. Update once per window, after all of that window's rewards were computed, with the mean of the
    skill's envs, so every env of a window is compared with the same baseline.
    """

    def __init__(self, alpha: float, values: Mapping[str, float] | None = None) -> None:
        if not 0.0 < alpha <= 1.0:
            raise ValueError(f"alpha must be in (0, 1], got {alpha!r}")
        self.alpha = alpha
        self._values = {skill: _unit(f"values[{skill!r}]", v) for skill, v in (values or {}).items()}

    def get(self, skill: str) -> float | None:
        """The skill's slow EMA, or ``None`` before its first window."""
        return self._values.get(skill)

    def update(self, window_means: Mapping[str, Sequence[float]]) -> None:
        """Fold one window in: for each skill, the mean of its envs' ``w`` values."""
        for skill, ws in window_means.items():
            ws = _outcomes(f"window_means[{skill!r}]", ws)
            if not ws:
                continue
            x = sum(ws) / len(ws)
            old = self._values.get(skill)
            self._values[skill] = x if old is None else (1.0 - self.alpha) * old + self.alpha * x

    def state_dict(self) -> dict[str, Any]:
        """Checkpointable state; ``SkillEMA(**state)`` restores it."""
        return {"alpha": self.alpha, "values": dict(self._values)}


def failure_penalty(config: RewardConfig, code: str) -> float:
    """The (negative) designer reward for a failure code; a ``KeyError`` names the known codes otherwise."""
    if code not in config.penalties:
        raise KeyError(f"unknown failure code {code!r}; known: {', '.join(config.penalties)}")
    return config.penalties[code]


def _feasible(hint_wins: Sequence[float], minimum: float) -> bool:
    return any(hint_wins) and sum(hint_wins) / len(hint_wins) > minimum


def credited_regret(config: RewardConfig, window: WindowStats) -> float:
    """The regret the reward counts (memory stores this value, not an ungated difference).

    :func:`paired_regret` of the arms' *wins* (beyond the placebo arm when there is one): a hint that only raises
    partial credit earns nothing. 0 after a hint failure or when the hinted arm does not prove the env feasible
    (``require_feasible``).
    """
    if window.hint_failure is not None:
        return 0.0
    hint = _wins("paired_hint", window.paired_hint)
    no_hint, placebo = _wins("paired_no_hint", window.paired_no_hint), _wins("paired_placebo", window.paired_placebo)
    regret = paired_regret(no_hint, hint, window.seeds_no_hint, window.seeds_hint, placebo=placebo or None)
    if config.require_feasible and not _feasible(hint, config.feasibility_min):  # paired_regret checked the arms
        return 0.0
    return regret


def designer_reward(config: RewardConfig, window: WindowStats, ema: SkillEMA | None = None) -> float:
    """The designer reward of one valid environment after its window, by ``config.variant``.

    A ``play_failure`` returns its penalty. A ``hint_failure`` forces regret to 0 and, for the variants that use
    regret, adds the hint penalty; the other variants never look at hints. Otherwise the result is in [0, 1].

    Raises:
        ValueError: a regret variant without paired arms (and no hint failure), or ``learning_potential`` without
            ``ema``.
    """
    if window.play_failure is not None:
        return failure_penalty(config, window.play_failure)
    w = window.win_rate
    if config.variant == "solve_rate":
        return solve_rate_reward(w, config)
    if config.variant == "p1mp":
        return p1mp(w)
    if config.variant == "learning_potential":
        if ema is None or ema.alpha != config.lp_slow_ema:
            raise ValueError(
                f"variant 'learning_potential' needs ema=SkillEMA(config.lp_slow_ema) (alpha {config.lp_slow_ema}), "
                f"got {None if ema is None else f'alpha {ema.alpha}'}"
            )
        return learning_potential(w, ema.get(window.skill))
    regret = credited_regret(config, window)
    extra = failure_penalty(config, window.hint_failure) if window.hint_failure is not None else 0.0
    base = regret if config.variant == "regret" else blend(w, regret, config)
    return base + extra


def designer_advantages(rewards: Sequence[float], skills: Sequence[str], scale: float) -> list[float]:
    """GRPO-style designer advantages: reward minus its skill's mean, times ``scale``; no std division.

    Centring per skill compares envs that answer the same prompt family; skipping the std keeps a skill whose
    envs all scored alike from having its tiny differences blown up to unit size. A skill with a single design in
    the batch has no group to compare with (its own mean would give it advantage 0, so a batch with one design per
    skill, e.g. 4 designs over 6 active skills, would never train the designer): it is centred on the mean of all
    designer rewards in the batch instead.
    """
    if len(rewards) != len(skills):
        raise ValueError(f"got {len(rewards)} rewards for {len(skills)} skills")
    if not (math.isfinite(scale) and scale > 0):
        raise ValueError(f"scale must be a positive finite number, got {scale!r}")
    groups: dict[str, list[float]] = {}
    for r, s in zip(rewards, skills):
        if not math.isfinite(r):
            raise ValueError(f"rewards must be finite, got {r!r} for skill {s!r}")
        groups.setdefault(s, []).append(r)
    batch_mean = sum(rewards) / len(rewards) if rewards else 0.0
    means = {s: sum(rs) / len(rs) if len(rs) > 1 else batch_mean for s, rs in groups.items()}
    return [(r - means[s]) * scale for r, s in zip(rewards, skills)]


def designer_scale(n_agent_samples: int, n_designer_samples: int, regen_every: int, cap: float = 50.0) -> float:
    """``min(cap, n_agent / n_designer * regen_every)``: the designer's advantage multiplier.

    A training batch holds many agent samples per designer sample, and designer samples arrive only every
    ``regen_every`` steps; without this up-weighting the few designer samples would be drowned in the loss
    average (reference games schedule: 192 / 24 * 4 = 32). The cap bounds the step size when few envs are valid.
    """
    for name, value in (("n_agent_samples", n_agent_samples), ("n_designer_samples", n_designer_samples),
                        ("regen_every", regen_every)):  # fmt: skip
        if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
            raise ValueError(f"{name} must be a positive int, got {value!r}")
    if not (math.isfinite(cap) and cap > 0):
        raise ValueError(f"cap must be a positive finite number, got {cap!r}")
    return min(float(cap), n_agent_samples / n_designer_samples * regen_every)
