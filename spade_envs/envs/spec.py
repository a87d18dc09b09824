"""``EnvSpec``: the record of one environment that memory, the env pool and checkpoints persist."""

from __future__ import annotations

import hashlib
from dataclasses import asdict, dataclass, field
from typing import Any

__all__ = ["SETTINGS", "EnvSpec", "source_sha256"]

SETTINGS = ("games", "tool_use")


def source_sha256(source: str) -> str:
    """Hex sha256 of the UTF-8 source text: the identity of an environment's code."""
    return hashlib.sha256(source.encode("utf-8")).hexdigest()


@dataclass(frozen=True)
class EnvSpec:
    """One environment: its code and where it came from.

    ``doc_id`` is the corpus document it was designed from, ``parent_id`` the memory exemplar it was derived from
    and ``created_step`` the training step that produced it (all ``None`` for built-ins).
    """

    env_id: str
    setting: str
    skill: str
    source: str
    sha256: str = ""
    doc_id: str | None = None
    parent_id: str | None = None
    created_step: int | None = None
    metadata: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.setting not in SETTINGS:
            raise ValueError(f"setting must be one of {SETTINGS}, got {self.setting!r}")
        digest = source_sha256(self.source)
        if not self.sha256:
            object.__setattr__(self, "sha256", digest)
        elif self.sha256 != digest:
            raise ValueError(f"sha256 {self.sha256[:12]}... does not match the source ({digest[:12]}...)")

    def to_dict(self) -> dict[str, Any]:
        """A JSON-serialisable dict; :meth:`from_dict` inverts it and re-checks the hash."""
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> EnvSpec:
        return cls(**data)
