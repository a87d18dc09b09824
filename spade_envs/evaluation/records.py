"""What the evaluation passes around: sampling settings, benchmark items and scored samples.

Every scored sample is one JSON line in ``<out>/<suite>.jsonl``; these classes are the schema of those lines, so a
killed run can be resumed by reading them back.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields
from typing import Any

__all__ = ["Item", "SampleRecord", "Sampling"]


@dataclass(frozen=True)
class Sampling:
    """How a suite samples the model (its benchmark's protocol unless overridden on the command line).

    Attributes:
        n_samples: independent samples per item (AIME 64, GPQA 8, LiveCodeBench 1, ...).
        temperature: sampling temperature.
        top_p: nucleus sampling cut-off.
        max_tokens: largest completion per model call.
    """

    n_samples: int = 1
    temperature: float = 0.6
    top_p: float = 0.95
    max_tokens: int = 32768

    def __post_init__(self) -> None:
        if self.n_samples < 1:
            raise ValueError(f"n_samples must be >= 1, got {self.n_samples}")
        if self.temperature < 0:
            raise ValueError(f"temperature must be >= 0, got {self.temperature}")
        if not 0 < self.top_p <= 1:
            raise ValueError(f"top_p must be in (0, 1], got {self.top_p}")
        if self.max_tokens < 1:
            raise ValueError(f"max_tokens must be >= 1, got {self.max_tokens}")

    @classmethod
    def from_dict(cls, data: dict[str, Any] | None) -> Sampling:
        """Build from a mapping; unknown keys are an error that names the known ones."""
        data = dict(data or {})
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise ValueError(f"unknown sampling option(s) {unknown}; known: {sorted(known)}")
        return cls(**data)

    def to_dict(self) -> dict[str, Any]:
        """Plain mapping, for ``results.json``."""
        return asdict(self)


@dataclass(frozen=True)
class Item:
    """One benchmark question. ``answer`` is whatever the suite's scorer needs; ``meta`` is free-form."""

    id: str
    prompt: str
    answer: Any = None
    meta: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class SampleRecord:
    """One scored sample: ``score`` in [0, 1], ``pred`` the extracted answer, ``response`` the (capped) text.

    ``protocol`` is the fingerprint of the protocol it was made under (:mod:`~spade_envs.evaluation.protocol`);
    empty in lines written before samples were stamped, which no protocol reuses.
    """

    suite: str
    item_id: str
    sample: int
    score: float
    pred: str = ""
    response: str = ""
    detail: dict[str, Any] = field(default_factory=dict)
    protocol: str = ""

    @property
    def key(self) -> tuple[str, int]:
        """What makes a sample unique within its suite (used to skip finished work on resume)."""
        return self.item_id, self.sample

    def to_json(self) -> dict[str, Any]:
        """Plain mapping for one JSONL line."""
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> SampleRecord:
        """Inverse of :meth:`to_json`; raises ``KeyError``/``TypeError`` on a malformed line."""
        return cls(**{f.name: data[f.name] for f in fields(cls) if f.name in data})
