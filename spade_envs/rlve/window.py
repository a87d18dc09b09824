"""RLVE's adaptive difficulty: a sliding window [l, h] of difficulty levels per environment.

Rule (notes/spade-reference.md §10): count attempts ``b`` and successes ``a`` at the top level ``h`` only. Once
``b >= window_attempts`` the window is checked: if ``a / b >= accuracy``, ``h += 1`` and
``l = max(l, h - width + 1)``; either way both counters restart (every check starts a fresh count). Problems are
drawn at a level uniform in [l, h]. Attempts below ``h`` (including those recorded after ``h`` moved on) are
ignored, as in RLVE.

Attempts are recorded in batches (a GRPO group of plays of one instance): the batch is added, then the check runs
once, so a group is never split across two checks.
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

__all__ = ["SlidingWindow", "SlidingWindowConfig"]

_STATE_VERSION = 1


@dataclass(frozen=True)
class SlidingWindowConfig:
    """Knobs of the window (defaults: the paper's RLVE baseline).

    Attributes:
        window_attempts: attempts at ``h`` before a check (RLVE: 128).
        accuracy: accuracy at ``h`` that raises it (RLVE: 0.9).
        width: most levels the window spans; ``l = max(l, h - width + 1)`` (RLVE: 4).
        initial_difficulty: ``l`` and ``h`` at the start (RLVE: 0).
    """

    window_attempts: int = 128
    accuracy: float = 0.9
    width: int = 4
    initial_difficulty: int = 0

    def __post_init__(self) -> None:
        for name, low in (("window_attempts", 1), ("width", 1), ("initial_difficulty", 0)):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < low:
                raise ValueError(f"sliding window {name} must be an int >= {low}, got {value!r}")
        if isinstance(self.accuracy, bool) or not isinstance(self.accuracy, (int, float)) or not 0 < self.accuracy <= 1:
            raise ValueError(f"sliding window accuracy must be in (0, 1], got {self.accuracy!r}")

    @classmethod
    def from_dict(cls, data: Mapping[str, Any] | None) -> SlidingWindowConfig:
        data = dict(data or {})
        known = set(cls.__dataclass_fields__)
        if set(data) - known:
            raise ValueError(f"unknown sliding window option(s) {sorted(set(data) - known)}; known: {sorted(known)}")
        return cls(**data)


@dataclass
class _Window:
    low: int
    high: int
    successes: int = 0
    attempts: int = 0


@dataclass
class SlidingWindow:
    """Per-environment difficulty windows; state goes into checkpoints via :meth:`state_dict`."""

    env_ids: Sequence[str]
    config: SlidingWindowConfig = field(default_factory=SlidingWindowConfig)

    def __post_init__(self) -> None:
        self.env_ids = tuple(self.env_ids)
        if not self.env_ids or len(set(self.env_ids)) != len(self.env_ids):
            raise ValueError(f"the sliding window needs distinct env ids, got {list(self.env_ids)}")
        start = self.config.initial_difficulty
        self._windows = {env_id: _Window(start, start) for env_id in self.env_ids}

    def _window(self, env_id: str) -> _Window:
        try:
            return self._windows[env_id]
        except KeyError:
            raise KeyError(f"{env_id!r} is not in this sliding window ({len(self._windows)} envs)") from None

    def bounds(self, env_id: str) -> tuple[int, int]:
        """``(l, h)`` of ``env_id``."""
        window = self._window(env_id)
        return window.low, window.high

    def sample(self, env_id: str, rng: random.Random) -> int:
        """A difficulty uniform in ``[l, h]`` of ``env_id``."""
        window = self._window(env_id)
        return rng.randint(window.low, window.high)

    def record(self, env_id: str, difficulty: int, successes: int, attempts: int = 1) -> bool:
        """Count ``attempts`` plays (``successes`` of them passed) at ``difficulty``; True when ``h`` rose."""
        window = self._window(env_id)
        for name, value in (("difficulty", difficulty), ("successes", successes), ("attempts", attempts)):
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise ValueError(f"{name} must be an int >= 0, got {value!r}")
        if successes > attempts:
            raise ValueError(f"successes ({successes}) exceed attempts ({attempts})")
        if difficulty > window.high:
            raise ValueError(f"{env_id}: difficulty {difficulty} is above the window's top {window.high}")
        if difficulty < window.high or attempts == 0:
            return False
        window.successes += successes
        window.attempts += attempts
        if window.attempts < self.config.window_attempts:
            return False
        raised = window.successes / window.attempts >= self.config.accuracy  # RLVE's a / b >= threshold
        if raised:
            window.high += 1
            window.low = max(window.low, window.high - self.config.width + 1)
        window.successes = window.attempts = 0
        return raised

    def metrics(self, prefix: str = "rlve") -> dict[str, float]:
        """Per-env top level ``{prefix}/h/<env>`` and low level ``{prefix}/l/<env>``, plus the mean top level."""
        out: dict[str, float] = {}
        for env_id, window in self._windows.items():
            out[f"{prefix}/h/{env_id}"] = float(window.high)
            out[f"{prefix}/l/{env_id}"] = float(window.low)
        out[f"{prefix}/h_mean"] = sum(w.high for w in self._windows.values()) / len(self._windows)
        return out

    def state_dict(self) -> dict[str, Any]:
        """JSON-serialisable state: config, and each env's window and counters."""
        return {
            "version": _STATE_VERSION,
            "config": asdict(self.config),
            "windows": {env_id: asdict(window) for env_id, window in self._windows.items()},
        }

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Restore :meth:`state_dict` output; the env set must match exactly (a changed set fails, naming ids)."""
        if state.get("version") != _STATE_VERSION:
            raise ValueError(f"sliding window state version {state.get('version')!r}, expected {_STATE_VERSION}")
        windows = state.get("windows")
        if not isinstance(windows, Mapping):
            raise ValueError("sliding window state has no 'windows' mapping")
        missing, extra = set(self._windows) - set(windows), set(windows) - set(self._windows)
        if missing or extra:
            raise ValueError(
                f"sliding window state does not match the env set: missing {sorted(missing)}, unknown {sorted(extra)}"
            )
        restored = {}
        for env_id, raw in windows.items():
            window = _Window(**{k: int(raw[k]) for k in ("low", "high", "successes", "attempts")})
            if not 0 <= window.low <= window.high or window.successes > window.attempts or window.successes < 0:
                raise ValueError(f"sliding window state of {env_id!r} is inconsistent: {dict(raw)}")
            restored[env_id] = window
        self.config = SlidingWindowConfig.from_dict(state.get("config"))
        self._windows = {env_id: restored[env_id] for env_id in self.env_ids}
