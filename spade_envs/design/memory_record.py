"""The records and knobs of the environment memory (:mod:`spade_envs.design.memory` holds the buffer itself)."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import asdict, dataclass, fields
from typing import Any

from spade_envs.design.ast_hash import normalized_ast_hash
from spade_envs.envs.failures import FAILURE_CODES, HINT_FAILURE_CODES
from spade_envs.envs.spec import EnvSpec

__all__ = ["Exemplar", "Exemplars", "MemoryConfig", "MemoryRecord", "check_stats"]

STATUSES = frozenset({"ok", *FAILURE_CODES, *HINT_FAILURE_CODES})


@dataclass(frozen=True)
class MemoryConfig:
    """Size, sampling and exemplar bands of the environment memory (the recipe's ``spade.memory`` block).

    Attributes:
        capacity: most records kept (at most 2**24); at capacity the lowest-scored (then least recently played)
            one is evicted.
        temperature: rank temperature of ``h(rank) = rank ** (-1 / temperature)``; lower is greedier.
        staleness_weight: ``rho``, the share of replay probability given by staleness instead of score.
        regret_weight: score = ``regret_weight * clip(regret, 0, 1) + (1 - regret_weight) * 4 p (1 - p)``.
        positive_low: lowest win rate of a positive exemplar.
        positive_high: highest win rate of a positive exemplar.
        too_easy: win rates above this are "too easy" negatives.
        too_hard: win rates below this are "too hard" negatives.
        positive_pool_factor: positives are sampled from the top ``max(factor * n, positive_pool_min)`` by regret.
        positive_pool_min: see ``positive_pool_factor``.
    """

    capacity: int = 1000
    temperature: float = 0.1
    staleness_weight: float = 0.3
    regret_weight: float = 0.5
    positive_low: float = 0.15
    positive_high: float = 0.85
    too_easy: float = 0.9
    too_hard: float = 0.1
    positive_pool_factor: int = 3
    positive_pool_min: int = 10

    def __post_init__(self) -> None:
        for name in ("capacity", "positive_pool_factor", "positive_pool_min"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ValueError(f"{name} must be an int >= 1, got {value!r}")
        if self.capacity > 1 << 24:
            raise ValueError(f"capacity must be at most 2**24 = {1 << 24}, got {self.capacity}")
        if not (math.isfinite(self.temperature) and self.temperature > 0):
            raise ValueError(f"temperature must be a positive finite number, got {self.temperature!r}")
        for name in ("staleness_weight", "regret_weight"):
            if not 0.0 <= getattr(self, name) <= 1.0:
                raise ValueError(f"{name} must be in [0, 1], got {getattr(self, name)!r}")
        bands = (self.too_hard, self.positive_low, self.positive_high, self.too_easy)
        if not 0.0 <= bands[0] <= bands[1] <= bands[2] <= bands[3] <= 1.0:
            raise ValueError(
                "need 0 <= too_hard <= positive_low <= positive_high <= too_easy <= 1 so positives and negatives "
                f"never overlap; got {dict(zip(('too_hard', 'positive_low', 'positive_high', 'too_easy'), bands))}"
            )

    @classmethod
    def from_dict(cls, data: Mapping[str, Any] | None) -> MemoryConfig:
        """Build from a config mapping; unknown keys are an error that names the known ones."""
        data = dict(data or {})
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise ValueError(f"unknown memory option(s) {unknown}; known: {sorted(known)}")
        return cls(**data)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class MemoryRecord:
    """One remembered environment and what the agent did with it. Frozen: :class:`EnvMemory` owns all changes.

    Attributes:
        spec: the environment (code, skill, setting, provenance).
        win_rate: no-hint win rate (share of plays won; partial credit is no win) of the latest measurement or of
            the training plays since, in [0, 1].
        regret: latest credited regret (hinted minus no-hint or placebo win rate), in [-1, 1].
        plays: no-hint plays measured so far, over all measurements.
        last_played_step: training step of the latest measurement (drives staleness).
        status: ``"ok"`` or the failure code of a validation, hint or replay failure. Records with a
            :data:`~spade_envs.envs.failures.FAILURE_CODES` status are kept for statistics and deduplication but never
            sampled; a hint failure leaves the env playable.
        ast_hash: :func:`normalized_ast_hash` of the source, computed when left empty.
        created_step: step the env was designed; defaults to ``spec.created_step``, else ``last_played_step``.
    """

    spec: EnvSpec
    win_rate: float
    regret: float = 0.0
    plays: int = 0
    last_played_step: int = 0
    status: str = "ok"
    ast_hash: str = ""
    created_step: int | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.spec, EnvSpec):
            raise TypeError(f"spec must be an EnvSpec, got {type(self.spec).__name__}")
        check_stats(self.spec.env_id, self.win_rate, self.regret, self.plays, self.last_played_step)
        if self.status not in STATUSES:
            raise ValueError(f"status must be 'ok' or a failure code, got {self.status!r}")
        if not self.ast_hash:
            object.__setattr__(self, "ast_hash", normalized_ast_hash(self.spec.source))
        if self.created_step is None:
            created = self.spec.created_step
            object.__setattr__(self, "created_step", self.last_played_step if created is None else created)
        if not isinstance(self.created_step, int) or self.created_step < 0:
            raise ValueError(f"{self.spec.env_id}: created_step must be an int >= 0, got {self.created_step!r}")

    @property
    def env_id(self) -> str:
        return self.spec.env_id

    @property
    def skill(self) -> str:
        return self.spec.skill

    @property
    def setting(self) -> str:
        return self.spec.setting

    @property
    def playable(self) -> bool:
        """Whether the env may be sampled (its status is not an env failure)."""
        return self.status not in FAILURE_CODES

    @property
    def learnability(self) -> float:
        """``p (1 - p)`` of the win rate: highest (0.25) for envs the agent wins half the time."""
        return self.win_rate * (1.0 - self.win_rate)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-serialisable dict (shallow: no deep copy, so saving 100k records stays fast)."""
        out = {name: getattr(self, name) for name in _RECORD_FIELDS}
        out["spec"] = {name: getattr(self.spec, name) for name in _SPEC_FIELDS}
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> MemoryRecord:
        return cls(**{**data, "spec": EnvSpec.from_dict(data["spec"])})


_RECORD_FIELDS = tuple(f.name for f in fields(MemoryRecord))
_SPEC_FIELDS = tuple(f.name for f in fields(EnvSpec))


def check_stats(env_id: str, win_rate: float, regret: float, plays: int, step: int) -> None:
    if not (isinstance(win_rate, (int, float)) and 0.0 <= win_rate <= 1.0):
        raise ValueError(f"{env_id}: win_rate must be in [0, 1], got {win_rate!r}")
    if not (isinstance(regret, (int, float)) and -1.0 <= regret <= 1.0):
        raise ValueError(f"{env_id}: regret must be in [-1, 1], got {regret!r}")
    for name, value in (("plays", plays), ("step", step)):
        if not isinstance(value, int) or isinstance(value, bool) or value < 0:
            raise ValueError(f"{env_id}: {name} must be an int >= 0, got {value!r}")


@dataclass(frozen=True)
class Exemplar:
    """A record chosen for the designer prompt, with the reason it is shown (e.g. ``too easy: win rate 0.95``)."""

    record: MemoryRecord
    reason: str


@dataclass(frozen=True)
class Exemplars:
    """Positives to imitate and negatives to avoid, for one skill."""

    positives: list[Exemplar]
    negatives: list[Exemplar]
