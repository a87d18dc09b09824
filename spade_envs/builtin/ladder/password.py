"""Exact Password: the ladder's strict format rung; the command must be exactly the named password, nothing more."""

from __future__ import annotations

import random
from typing import Any

WORDS = ("apple", "river", "candle", "garden", "pillow", "rocket", "violin", "marble", "window", "tiger", "cloud",
         "basket", "lemon", "anchor", "meadow", "silver")  # fmt: skip


class PasswordEnv:
    r"""One turn: the agent wins if its command (the content of its last ``\boxed{}``) is exactly the password."""

    max_turns = 1

    def reset(self, seed: int | None = None) -> tuple[str, dict[str, Any]]:
        self.rng = random.Random(seed)
        self.password = self.rng.choice(WORDS)
        self.done = False
        return (
            f"PASSWORD\nThe password is {self.password}. Send exactly the password and nothing else, in \\boxed{{}}.",
            {},
        )

    def step(self, action: str) -> tuple[str, float, bool, bool, dict[str, Any]]:
        if self.done:
            return "The episode is over.", 0.0, True, False, {}
        self.done = True
        if action.strip().strip(".\"'").lower() == self.password:
            return "Access granted.", 1.0, True, False, {}
        return f"Access denied: the command must be exactly {self.password}.", 0.0, True, False, {}

    def solution(self) -> list[str]:
        return [self.password]
