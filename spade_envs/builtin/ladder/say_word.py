"""Say the Word: the ladder's format-only rung; the observation names a word and the reply only has to contain it."""

from __future__ import annotations

import random
import re
from typing import Any

WORDS = ("apple", "river", "candle", "garden", "pillow", "rocket", "violin", "marble", "window", "tiger", "cloud",
         "basket", "lemon", "anchor", "meadow", "silver")  # fmt: skip


class SayWordEnv:
    """One turn: the agent wins if its command contains the named word (any case, as a whole word)."""

    max_turns = 1

    def reset(self, seed: int | None = None) -> tuple[str, dict[str, Any]]:
        self.rng = random.Random(seed)
        self.word = self.rng.choice(WORDS)
        self.done = False
        return f"SAY THE WORD\nReply with the word {self.word}. Put it in \\boxed{{}}.", {}

    def step(self, action: str) -> tuple[str, float, bool, bool, dict[str, Any]]:
        if self.done:
            return "The episode is over.", 0.0, True, False, {}
        self.done = True
        if re.search(rf"\b{self.word}\b", action, flags=re.IGNORECASE):
            return f"Correct: you said {self.word}.", 1.0, True, False, {}
        return f"Wrong: the word was {self.word}.", 0.0, True, False, {}

    def solution(self) -> list[str]:
        return [self.word]
