"""Compare: a one-step reasoning rung; name the larger of two two-digit numbers."""

from __future__ import annotations

import random
import re
from typing import Any

NUMBER = re.compile(r"\d+")


class CompareEnv:
    """One turn: the agent wins if the last number in its command is the larger of the two shown."""

    max_turns = 1

    def reset(self, seed: int | None = None) -> tuple[str, dict[str, Any]]:
        self.rng = random.Random(seed)
        self.a, self.b = self.rng.sample(range(10, 100), 2)
        self.done = False
        return f"COMPARE\nWhich number is larger: {self.a} or {self.b}? Answer with that number in \\boxed{{}}.", {}

    def step(self, action: str) -> tuple[str, float, bool, bool, dict[str, Any]]:
        if self.done:
            return "The episode is over.", 0.0, True, False, {}
        self.done = True
        numbers = NUMBER.findall(action)
        larger = max(self.a, self.b)
        if numbers and int(numbers[-1]) == larger:
            return f"Correct: {larger} is larger.", 1.0, True, False, {}
        return f"Wrong: {larger} is larger.", 0.0, True, False, {}

    def solution(self) -> list[str]:
        return [str(max(self.a, self.b))]
