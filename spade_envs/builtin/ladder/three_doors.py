"""Three Doors: a multi-turn rung; each turn the observation names the word that opens the next door."""

from __future__ import annotations

import random
import re
from typing import Any

WORDS = ("apple", "river", "candle", "garden", "pillow", "rocket", "violin", "marble", "window", "tiger", "cloud",
         "basket", "lemon", "anchor", "meadow", "silver")  # fmt: skip
DOORS = 3


class ThreeDoorsEnv:
    """Three turns: say each door's word (any case, as a whole word); a wrong word ends the episode."""

    max_turns = DOORS

    def reset(self, seed: int | None = None) -> tuple[str, dict[str, Any]]:
        self.rng = random.Random(seed)
        self.words = self.rng.sample(WORDS, DOORS)
        self.opened = 0
        self.done = False
        return f"DOORS\nThere are {DOORS} locked doors. {self._ask()}", {}

    def _ask(self) -> str:
        return f"Door {self.opened + 1} opens when you say {self.words[self.opened]}. Put it in \\boxed{{}}."

    def step(self, action: str) -> tuple[str, float, bool, bool, dict[str, Any]]:
        if self.done:
            return "The episode is over.", 0.0, True, False, {}
        word = self.words[self.opened]
        if not re.search(rf"\b{word}\b", action, flags=re.IGNORECASE):
            self.done = True
            return f"Wrong: door {self.opened + 1} needed {word}.", 0.0, True, False, {}
        self.opened += 1
        if self.opened == DOORS:
            self.done = True
            return "Every door is open. You win.", 1.0, True, False, {}
        return f"Door {self.opened} opens. {self._ask()}", 0.0, False, False, {}

    def solution(self) -> list[str]:
        return list(self.words)
