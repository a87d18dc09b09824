"""Count: a one-step reasoning rung; how often one word occurs in a short list."""

from __future__ import annotations

import random
import re
from typing import Any

NUMBER = re.compile(r"\d+")
ITEMS = ("cat", "dog", "bird", "fish")


class CountEnv:
    """One turn: the agent wins if the last number in its command is how many times the target word occurs."""

    max_turns = 1

    def reset(self, seed: int | None = None) -> tuple[str, dict[str, Any]]:
        self.rng = random.Random(seed)
        self.target = self.rng.choice(ITEMS)
        self.items = [self.rng.choice(ITEMS) for _ in range(self.rng.randint(3, 6))]
        self.done = False
        return (
            f"COUNT\nList: {', '.join(self.items)}.\nHow many times does {self.target} appear in the list? "
            "Answer with the number in \\boxed{}.",
            {},
        )

    def step(self, action: str) -> tuple[str, float, bool, bool, dict[str, Any]]:
        if self.done:
            return "The episode is over.", 0.0, True, False, {}
        self.done = True
        numbers = NUMBER.findall(action)
        count = self.items.count(self.target)
        if numbers and int(numbers[-1]) == count:
            return f"Correct: {self.target} appears {count} times.", 1.0, True, False, {}
        return f"Wrong: {self.target} appears {count} times.", 0.0, True, False, {}

    def solution(self) -> list[str]:
        return [str(self.items.count(self.target))]
