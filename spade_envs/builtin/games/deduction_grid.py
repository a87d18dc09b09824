"""Deduction Grid: a small zebra puzzle whose clues are revealed one at a time.

N houses stand in a row; every house has one value of each of three categories (colour, pet, drink, ...), each
category a permutation. Clues are true statements about the hidden assignment, generated at random until exactly
one assignment fits them all, so the puzzle is solvable by pure deduction. The agent reveals clues with ``clue``
and ends with one ``solve`` listing every value's house. Values are drawn per seed from larger pools.
"""

from __future__ import annotations

import itertools
import random
import re
from typing import Any

#: Category name -> (value pool, third-person predicate, base-form predicate). Values are unique across pools.
CATEGORIES: dict[str, tuple[list[str], str, str]] = {
    "colour": (
        ["red", "green", "blue", "yellow", "white", "purple", "orange", "pink", "grey", "black"],
        "lives in the {} house",
        "live in the {} house",
    ),
    "pet": (
        ["cat", "dog", "fish", "parrot", "hamster", "rabbit", "turtle", "snake", "ferret", "goat"],
        "owns the {}",
        "own the {}",
    ),
    "drink": (
        ["tea", "coffee", "milk", "juice", "water", "cocoa", "soda", "lemonade", "cider", "kefir"],
        "drinks {}",
        "drink {}",
    ),
    "hobby": (
        ["chess", "painting", "hiking", "knitting", "fishing", "baking", "poetry", "dancing", "pottery", "origami"],
        "enjoys {}",
        "enjoy {}",
    ),
    "instrument": (
        ["piano", "violin", "guitar", "flute", "drums", "cello", "harp", "trumpet", "banjo", "oboe"],
        "plays the {}",
        "play the {}",
    ),
}
#: Clue kinds with sampling weights per difficulty; "at" pins a value to a house, so harder puzzles get fewer.
KIND_WEIGHTS = {
    1: {"at": 3, "not_at": 2, "same": 3, "not_same": 2, "left_of": 2, "next_to": 1, "before": 1},
    2: {"at": 2, "not_at": 2, "same": 3, "not_same": 2, "left_of": 2, "next_to": 2, "before": 2},
    3: {"at": 1, "not_at": 2, "same": 3, "not_same": 3, "left_of": 2, "next_to": 2, "before": 2},
}

#: After this many clues only "at" clues are added; at most 3 * 4 more are ever needed, so the total stays <= 28.
MAX_RANDOM_CLUES = 16


class DeductionGridEnv:
    """Reveal clues one by one, deduce the unique assignment of values to houses, then submit it with ``solve``."""

    max_turns = 30

    def reset(self, seed: int | None = None) -> tuple[str, dict[str, Any]]:
        self.rng = random.Random(seed)
        self.difficulty = self.rng.randint(1, 3)
        self.n = 3 if self.difficulty == 1 else 4
        self.categories = self.rng.sample(sorted(CATEGORIES), 3)
        # values[k * n + v] is value v of category k; a candidate maps the same flat index to a house 0..n-1.
        self.values = [name for cat in self.categories for name in self.rng.sample(CATEGORIES[cat][0], self.n)]
        self.answer = tuple(h for _ in self.categories for h in self.rng.sample(range(self.n), self.n))
        self.clues = self._generate_clues()
        self.revealed = 0
        self.turn = 0
        self.done = False
        lines = [
            f"  {cat}: {', '.join(self.values[k * self.n : (k + 1) * self.n])}" for k, cat in enumerate(self.categories)
        ]
        obs = (
            f"{self.n} houses stand in a row, numbered 1..{self.n} from left to right. Each house has exactly\n"
            "one value of every category below, and no two houses share a value:\n" + "\n".join(lines) + "\n"
            f"There are {len(self.clues)} clues; together they pin down exactly one arrangement.\n"
            "Commands:\n"
            "  clue                       reveal the next clue\n"
            "  solve <value>=<house> ...  submit the full arrangement, every value once, e.g.\n"
            f"                             solve {self.values[0]}=2 {self.values[self.n]}=1 ...\n"
            "Your one solve ends the game: only a fully correct arrangement wins."
        )
        return obs, {"difficulty": self.difficulty}

    def _generate_clues(self) -> list[tuple[str, int, int]]:
        """Add random true clues that rule out at least one remaining candidate until only the answer is left."""
        perms = list(itertools.permutations(range(self.n)))
        candidates = [a + b + c for a, b, c in itertools.product(perms, repeat=3)]
        weights = KIND_WEIGHTS[self.difficulty]
        clues: list[tuple[str, int, int]] = []
        while len(candidates) > 1:
            kind = self.rng.choices(list(weights), weights=list(weights.values()))[0]
            if len(clues) >= MAX_RANDOM_CLUES:  # rare: finish with direct placements so solution() fits max_turns
                kind = "at"
            clue = self._random_true_clue(kind)
            if clue is None:
                continue
            kept = [c for c in candidates if _holds(clue, c)]
            if len(kept) < len(candidates):
                clues.append(clue)
                candidates = kept
        return clues

    def _random_true_clue(self, kind: str) -> tuple[str, int, int] | None:
        """A clue of ``kind`` that holds for the answer, or None if the random pick does not fit that kind."""
        i = self.rng.randrange(3 * self.n)
        if kind == "at":
            return kind, i, self.answer[i]
        if kind == "not_at":
            return kind, i, self.rng.choice([h for h in range(self.n) if h != self.answer[i]])
        others = [j for j in range(3 * self.n) if j // self.n != i // self.n]
        fitting = [j for j in others if _holds((kind, i, j), self.answer)]
        return (kind, i, self.rng.choice(fitting)) if fitting else None

    def step(self, action: str) -> tuple[str, float, bool, bool, dict[str, Any]]:
        if self.done:
            return "The episode is over.", 0.0, True, False, {}
        self.turn += 1
        obs, reward, terminated = self._apply(" ".join(str(action).lower().split()))
        truncated = not terminated and self.turn >= self.max_turns
        self.done = terminated or truncated
        if truncated:
            obs += "\nOut of turns."
        return obs, reward, terminated, truncated, {"clues_revealed": self.revealed}

    def _apply(self, command: str) -> tuple[str, float, bool]:
        """Return (observation, reward, terminated) for one normalised command."""
        if command == "clue":
            if self.revealed == len(self.clues):
                return "No more clues: you have seen them all.\n" + self._recap(), 0.0, False
            self.revealed += 1
            return self._recap(), 0.0, False
        if command.startswith("solve"):
            return self._solve(command[len("solve") :])
        return "Unknown command. Use 'clue' or 'solve <value>=<house> ...'.", 0.0, False

    def _solve(self, text: str) -> tuple[str, float, bool]:
        pairs = re.findall(r"([a-z]+)\s*=\s*(\d{1,3})", text)
        placed = {name: int(house) - 1 for name, house in pairs if name in self.values}
        if not placed:
            example = f"{self.values[0]}=2 {self.values[self.n]}=1"
            return f"Nothing to check. Write e.g. 'solve {example} ...' with every value.", 0.0, False
        correct = sum(1 for i, name in enumerate(self.values) if placed.get(name) == self.answer[i])
        if correct == len(self.values):
            return "Every value is in the right house. You win!", 1.0, True
        truth = ", ".join(f"{name}={self.answer[i] + 1}" for i, name in enumerate(self.values))
        return (
            f"Wrong: {correct} of {len(self.values)} placements correct. Answer: {truth}.",
            correct / len(self.values),
            True,
        )

    def _recap(self) -> str:
        """Every clue revealed so far, numbered, so the agent never has to scroll back."""
        lines = [f"  {k + 1}. {self._text(c)}" for k, c in enumerate(self.clues[: self.revealed])]
        return f"Clues revealed ({self.revealed} of {len(self.clues)}):\n" + "\n".join(lines)

    def _text(self, clue: tuple[str, int, int]) -> str:
        """English sentence for a clue; houses are shown 1-based."""
        kind, i, j = clue
        subject = self._subject(i)
        if kind == "at":
            return f"{subject} lives in house {j + 1}."
        if kind == "not_at":
            return f"{subject} does not live in house {j + 1}."
        if kind == "same":
            return f"{subject} {self._predicate(j, 1)}."
        if kind == "not_same":
            return f"{subject} does not {self._predicate(j, 2)}."
        relation = {"left_of": "directly left of", "next_to": "next to", "before": "somewhere left of"}[kind]
        return f"{subject} lives {relation} {self._subject(j).lower()}."

    def _subject(self, i: int) -> str:
        cat = self.categories[i // self.n]
        if cat == "colour":
            return f"The resident of the {self.values[i]} house"
        return f"The person who {self._predicate(i, 1)}"

    def _predicate(self, i: int, form: int) -> str:
        return CATEGORIES[self.categories[i // self.n]][form].format(self.values[i])

    def solution(self) -> list[str]:
        placements = " ".join(f"{name}={self.answer[i] + 1}" for i, name in enumerate(self.values))
        return ["clue"] * len(self.clues) + [f"solve {placements}"]


def _holds(clue: tuple[str, int, int], houses: tuple[int, ...]) -> bool:
    """Whether ``clue`` is true when value index k lives in house ``houses[k]``."""
    kind, i, j = clue
    a = houses[i]
    if kind == "at":
        return a == j
    if kind == "not_at":
        return a != j
    b = houses[j]
    if kind == "same":
        return a == b
    if kind == "not_same":
        return a != b
    if kind == "left_of":
        return a == b - 1
    if kind == "next_to":
        return abs(a - b) == 1
    return a < b
