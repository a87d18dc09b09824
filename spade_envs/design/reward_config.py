"""How designer samples are scored (:class:`RewardConfig`): the variant, its terms' shape, failure penalties.

The recipe's ``spade.reward`` YAML block maps onto it; :mod:`spade_envs.design.rewards` computes the rewards.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, fields
from typing import Any

from spade_envs.envs.failures import FAILURE_CODES, HINT_FAILURE_CODES

__all__ = ["DEFAULT_PENALTIES", "VARIANTS", "RewardConfig", "unit_interval"]

VARIANTS = ("blend", "regret", "solve_rate", "learning_potential", "p1mp")

#: Penalty per failure code. Anything below 0 (the worst valid reward) would do; near misses (the env runs but is
#: trivial or unwinnable) are less negative than code that does not run, so the designer is pulled towards valid.
DEFAULT_PENALTIES: dict[str, float] = {
    **dict.fromkeys(FAILURE_CODES, -1.0),
    "solution_does_not_win": -0.75,
    "solution_too_long": -0.75,
    "do_nothing_wins": -0.5,
    "random_wins": -0.5,
    "audit_rejected": -0.5,
    **dict.fromkeys(HINT_FAILURE_CODES, -0.25),
}


def unit_interval(name: str, value: float) -> float:
    if not isinstance(value, (int, float)) or isinstance(value, bool) or not 0.0 <= value <= 1.0:
        raise ValueError(f"{name} must be a number in [0, 1], got {value!r}")
    return float(value)


@dataclass(frozen=True)
class RewardConfig:
    """How designer samples are scored; the recipe's ``spade.reward`` YAML block maps onto it.

    Attributes:
        variant: one of :data:`VARIANTS`.
        plateau_low: lower edge of the band of mean no-hint outcomes that earns the full plateau term.
        plateau_high: upper edge of that band.
        plateau_ramp: width over which the plateau term falls linearly from 1 to 0 outside the band.
        regret_scale: regret at which the regret term saturates at 1 (``clip(regret / scale, 0, 1)``).
        blend_plateau_weight: weight of the plateau term in ``blend``.
        blend_regret_weight: weight of the regret term in ``blend``; the two weights sum to at most 1.
        lp_slow_ema: weight of the NEW value in the slow per-skill EMA of ``learning_potential``, in the usual
            convention ``mu <- (1 - a) * mu + a * x`` (the reference's γ is the same quantity).
        require_feasible: count regret only when the hinted arm proves the env winnable: at least one hinted
            play is a win and the hinted win rate exceeds ``feasibility_min``. Regret counts wins, so any regret
            already means a hinted win; the gate adds the minimum.
        feasibility_min: see ``require_feasible``.
        designer_scale_cap: upper bound of :func:`designer_scale`.
        penalties: failure code -> negative reward. Entries given here override :data:`DEFAULT_PENALTIES`; after
            construction the mapping holds every code.
    """

    variant: str = "blend"
    plateau_low: float = 0.4
    plateau_high: float = 0.6
    plateau_ramp: float = 0.25
    regret_scale: float = 0.15
    blend_plateau_weight: float = 0.6
    blend_regret_weight: float = 0.4
    lp_slow_ema: float = 0.1
    require_feasible: bool = True
    feasibility_min: float = 0.0
    designer_scale_cap: float = 50.0
    penalties: Mapping[str, float] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.variant not in VARIANTS:
            raise ValueError(f"variant must be one of {VARIANTS}, got {self.variant!r}")
        if not 0.0 <= self.plateau_low <= self.plateau_high <= 1.0:
            raise ValueError(
                f"need 0 <= plateau_low <= plateau_high <= 1, got plateau_low={self.plateau_low!r}, "
                f"plateau_high={self.plateau_high!r}"
            )
        for name in ("plateau_ramp", "regret_scale", "designer_scale_cap"):
            value = getattr(self, name)
            if not (isinstance(value, (int, float)) and math.isfinite(value) and value > 0):
                raise ValueError(f"{name} must be a positive finite number, got {value!r}")
        if not 0.0 < self.lp_slow_ema <= 1.0:
            raise ValueError(f"lp_slow_ema must be in (0, 1], got {self.lp_slow_ema!r}")
        unit_interval("feasibility_min", self.feasibility_min)
        weights = (self.blend_plateau_weight, self.blend_regret_weight)
        if min(weights) < 0 or sum(weights) > 1.0 + 1e-12:
            raise ValueError(
                f"blend weights must be >= 0 and sum to at most 1 (so blend stays in [0, 1]), got "
                f"blend_plateau_weight={weights[0]!r}, blend_regret_weight={weights[1]!r}"
            )
        known = DEFAULT_PENALTIES.keys()
        unknown = sorted(set(self.penalties) - set(known))
        if unknown:
            raise ValueError(f"unknown failure code(s) {unknown} in penalties; known: {sorted(known)}")
        merged = {**DEFAULT_PENALTIES, **self.penalties}
        for code, value in merged.items():
            if not (isinstance(value, (int, float)) and math.isfinite(value) and value < 0):
                raise ValueError(f"penalty for {code!r} must be a negative finite number, got {value!r}")
        object.__setattr__(self, "penalties", {code: float(v) for code, v in merged.items()})

    @classmethod
    def from_dict(cls, data: Mapping[str, Any] | None) -> RewardConfig:
        """Build from a config mapping; unknown keys are an error that names the known ones."""
        data = dict(data or {})
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise ValueError(f"unknown reward option(s) {unknown}; known: {sorted(known)}")
        return cls(**data)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self) | {"penalties": dict(self.penalties)}
