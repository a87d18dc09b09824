"""Sequence Oracle: infer the hidden rule behind an integer sequence and predict its next three terms."""

from __future__ import annotations

import random
import re
from typing import Any

TOTAL_TERMS = 12  # enough for 6 shown terms, 2 reveals and 3 predictions
MAX_REVEALS = 2
TO_WIN = 3
MAX_ABS = 1_000_000  # keep the numbers readable
NUMBER = re.compile(r"[+-]?\d{1,30}")

# Rule families per difficulty: the harder levels add rules that need more terms to pin down.
FAMILIES: dict[int, tuple[str, ...]] = {
    1: ("alternating", "quadratic", "affine"),
    2: ("quadratic", "affine", "recurrence", "interleaved"),
    3: ("recurrence", "interleaved", "sum_of_three", "affine"),
}


def _nonzero(rng: random.Random, low: int, high: int) -> int:
    return rng.choice([x for x in range(low, high + 1) if x != 0])


def _generate(family: str, rng: random.Random, difficulty: int) -> list[int]:
    """Return TOTAL_TERMS terms of a fresh random sequence from ``family``."""
    if family == "alternating":  # differences d1, d2, d1, d2, ...
        d1 = _nonzero(rng, -5, 9)
        d2 = rng.choice([x for x in range(-9, 10) if x not in (0, d1)])
        terms = [rng.randint(1, 20)]
        for i in range(TOTAL_TERMS - 1):
            terms.append(terms[-1] + (d1 if i % 2 == 0 else d2))
        return terms
    if family == "quadratic":  # constant second difference
        first, diff, second = rng.randint(-5, 15), rng.randint(-6, 8), _nonzero(rng, -3, 4)
        terms = [first]
        for _ in range(TOTAL_TERMS - 1):
            terms.append(terms[-1] + diff)
            diff += second
        return terms
    if family == "affine":  # a(n) = m * a(n-1) + c
        m = rng.choice((2, 3) if difficulty < 3 else (-2, 2, 3))
        c = _nonzero(rng, -5, 6)
        terms = [rng.randint(1, 9)]
        for _ in range(TOTAL_TERMS - 1):
            terms.append(m * terms[-1] + c)
        return terms
    if family == "recurrence":  # a(n) = p * a(n-1) + q * a(n-2)
        p, q = rng.choice([(1, 1), (1, 2), (2, 1), (2, 2), (2, 3), (3, -1), (3, -2)])
        terms = [rng.randint(1, 9), rng.randint(1, 9)]
        while len(terms) < TOTAL_TERMS:
            terms.append(p * terms[-1] + q * terms[-2])
        return terms
    if family == "interleaved":  # even positions and odd positions follow two separate rules
        a, da = rng.randint(1, 30), _nonzero(rng, -6, 9)
        b, db = rng.randint(1, 30), _nonzero(rng, -6, 9)
        doubling = difficulty == 3 and rng.random() < 0.5  # second strand doubles instead of adding
        terms = []
        for i in range(TOTAL_TERMS // 2):
            terms += [a + i * da, b * 2**i if doubling else b + i * db]
        return terms
    # sum_of_three: every term is the sum of the three before it
    terms = [rng.randint(0, 6) for _ in range(3)]
    while len(terms) < TOTAL_TERMS:
        terms.append(sum(terms[-3:]))
    return terms


def _acceptable(terms: list[int]) -> bool:
    """Reject sequences with huge numbers or that an arithmetic progression would also explain."""
    diffs = {b - a for a, b in zip(terms, terms[1:])}
    return max(abs(t) for t in terms) <= MAX_ABS and len(diffs) > 1 and len(set(terms[:6])) >= 4


class SequenceOracleEnv:
    """The agent sees the first terms of a hidden integer sequence and must predict the next three in a row."""

    max_turns = 10

    def reset(self, seed: int | None = None) -> tuple[str, dict[str, Any]]:
        self.rng = random.Random(seed)
        self.difficulty = self.rng.randint(1, 3)
        self.family = self.rng.choice(FAMILIES[self.difficulty])
        self.terms = _generate(self.family, self.rng, self.difficulty)
        while not _acceptable(self.terms):
            self.terms = _generate(self.family, self.rng, self.difficulty)
        # Rules with two free parameters and two seed terms need a sixth term to be determined.
        self.shown = 5 if self.family in ("alternating", "quadratic", "affine") else 6
        self.reveals = 0
        self.correct = 0
        self.turn = 0
        self.done = False
        intro = (
            f"SEQUENCE ORACLE (difficulty {self.difficulty})\n"
            "A hidden rule generates an integer sequence. Rules are built from: alternating differences,\n"
            "a constant second difference, a(n) = m*a(n-1) + c, a(n) = p*a(n-1) + q*a(n-2),\n"
            "sums of the previous terms, or two sequences interleaved.\n"
            f"Goal: predict the next {TO_WIN} unseen terms correctly in a row.\n"
            "Commands:\n"
            "  predict <number>  guess the next unseen term. Right: it joins the known terms and you predict\n"
            "                    the one after it. Wrong: the episode ends (partial credit only).\n"
            f"  reveal            show the next term without predicting it (at most {MAX_REVEALS} per episode).\n"
        )
        return intro + self._status(), {"difficulty": self.difficulty}

    def _status(self) -> str:
        known = ", ".join(str(t) for t in self.terms[: self.shown])
        return (
            f"Known terms: {known}\n"
            f"Correct predictions: {self.correct}/{TO_WIN}. Reveals left: {MAX_REVEALS - self.reveals}.\n"
            f"Term #{self.shown + 1} is next."
        )

    def step(self, action: str) -> tuple[str, float, bool, bool, dict[str, Any]]:
        info: dict[str, Any] = {"difficulty": self.difficulty}
        if self.done:
            return "The episode is over.", 0.0, True, False, info
        self.turn += 1
        words = action.lower().split()
        verb = words[0] if words else ""
        reward, terminated = 0.0, False
        if verb == "reveal" and len(words) == 1:
            if self.reveals >= MAX_REVEALS:
                obs = f"No reveals left. Use: predict <number>.\n{self._status()}"
            else:
                self.reveals += 1
                self.shown += 1
                obs = f"Revealed term #{self.shown}: {self.terms[self.shown - 1]}.\n{self._status()}"
        elif verb == "predict":
            guess = "".join(words[1:]).replace(",", "")
            if not NUMBER.fullmatch(guess):
                obs = f"Use: predict <integer>, e.g. predict 42.\n{self._status()}"
            elif int(guess) == self.terms[self.shown]:
                self.correct += 1
                self.shown += 1
                if self.correct == TO_WIN:
                    obs = f"Correct! {self.terms[self.shown - 1]} is right. You predicted {TO_WIN} terms: you win."
                    reward, terminated = 1.0, True
                else:
                    obs = f"Correct! {self.terms[self.shown - 1]} is right.\n{self._status()}"
            else:
                reward, terminated = self.correct / TO_WIN * 0.5, True
                obs = (
                    f"Wrong: term #{self.shown + 1} is {self.terms[self.shown]}. "
                    f"You got {self.correct}/{TO_WIN} predictions right. Game over."
                )
        else:
            obs = f"Unknown command. Use 'predict <number>' or 'reveal'.\n{self._status()}"
        self.done = terminated
        truncated = not terminated and self.turn >= self.max_turns
        if truncated:
            obs += "\nOut of turns."
        return obs, reward, terminated, truncated, info

    def solution(self) -> list[str]:
        """Predict the three terms that follow the initially shown ones (no reveals needed)."""
        return [f"predict {t}" for t in self.terms[self.shown : self.shown + TO_WIN]]
