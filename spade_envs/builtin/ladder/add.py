"""Add: a one-step reasoning rung; the sum of two one-digit numbers."""

from __future__ import annotations

import random
import re
from typing import Any

NUMBER = re.compile(r"\d+")


class AddEnv:
    """One turn: the agent wins if the last number in its command is the sum of the two shown."""

    max_turns = 1

    def reset(self, seed: int | None = None) -> tuple[str, dict[str, Any]]:
        self.rng = random.Random(seed)
        self.a, self.b = self.rng.randint(1, 9), self.rng.randint(1, 9)
        self.done = False
        return f"ADD\nWhat is {self.a} + {self.b}? Answer with the number in \\boxed{{}}.", {}

    def step(self, action: str) -> tuple[str, float, bool, bool, dict[str, Any]]:
        if self.done:
            return "The episode is over.", 0.0, True, False, {}
        self.done = True
        numbers = NUMBER.findall(action)
        total = self.a + self.b
        if numbers and int(numbers[-1]) == total:
            return f"Correct: {self.a} + {self.b} = {total}.", 1.0, True, False, {}
        return f"Wrong: {self.a} + {self.b} = {total}.", 0.0, True, False, {}

    def solution(self) -> list[str]:
        return [str(self.a + self.b)]
