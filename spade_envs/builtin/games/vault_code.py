"""Vault Code: crack a digit code whose digits are hidden behind arithmetic clues.

Each digit of the code is the value of an arithmetic fact that has to be computed (modular powers, gcds, divisor
counts, ...). The agent reveals clues one digit at a time with ``inspect`` and then enters the whole code. Wrong
entries only say how many digits sit in the right place and cost one of three attempts, so guessing does not pay.
"""

from __future__ import annotations

import math
import random
import re
from collections.abc import Callable
from typing import Any

ATTEMPTS = 3

#: A clue maker draws parameters from the rng and returns (clue text, digit value in 0..9).
ClueMaker = Callable[[random.Random], tuple[str, int]]


def _units_of_power(rng: random.Random) -> tuple[str, int]:
    a, b = rng.randint(2, 19), rng.randint(11, 49)
    return f"the units digit of {a}^{b}", pow(a, b, 10)


def _product_minus(rng: random.Random) -> tuple[str, int]:
    a, b, c = rng.randint(11, 49), rng.randint(11, 49), rng.randint(2, 99)
    return f"({a}*{b} - {c}) mod 10", (a * b - c) % 10


def _digit_sum(rng: random.Random) -> tuple[str, int]:
    n = rng.randint(1000, 99999)
    return f"the digit sum of {n}, taken mod 10", sum(int(d) for d in str(n)) % 10


def _gcd(rng: random.Random) -> tuple[str, int]:
    g = rng.randint(2, 40)
    x, y = rng.sample(range(2, 12), 2)
    while math.gcd(x, y) != 1:
        x, y = rng.sample(range(2, 12), 2)
    return f"gcd({g * x}, {g * y}) mod 10", math.gcd(g * x, g * y) % 10


def _divisors(rng: random.Random) -> tuple[str, int]:
    n = rng.choice([12, 18, 24, 30, 36, 40, 48, 60, 72, 84, 90, 96, 100, 120, 144, 180])
    count = sum(1 for d in range(1, n + 1) if n % d == 0)
    k = count - rng.randint(0, min(9, count))
    return f"the number of positive divisors of {n}, minus {k}", count - k


def _power_remainder(rng: random.Random) -> tuple[str, int]:
    a, b, m = rng.randint(2, 6), rng.randint(15, 60), rng.choice([7, 9, 10, 11])
    while pow(a, b, m) > 9:
        b += 1
    return f"the remainder of {a}^{b} divided by {m}", pow(a, b, m)


def _lcm(rng: random.Random) -> tuple[str, int]:
    a, b = rng.randint(6, 40), rng.randint(6, 40)
    return f"lcm({a}, {b}) mod 10", (a * b // math.gcd(a, b)) % 10


def _primes_between(rng: random.Random) -> tuple[str, int]:
    while True:
        lo = rng.randint(10, 150)
        hi = lo + rng.randint(12, 40)
        count = sum(1 for p in range(lo, hi + 1) if all(p % d for d in range(2, math.isqrt(p) + 1)))
        if count <= 9:
            return f"the number of primes p with {lo} <= p <= {hi}", count


def _triangular(rng: random.Random) -> tuple[str, int]:
    n = rng.randint(20, 199)
    return f"(1 + 2 + 3 + ... + {n}) mod 10", n * (n + 1) // 2 % 10


def _binomial(rng: random.Random) -> tuple[str, int]:
    n, k = rng.randint(8, 16), rng.randint(2, 4)
    return f"C({n}, {k}) mod 10 (the number of ways to choose {k} items out of {n})", math.comb(n, k) % 10


#: Clue makers unlocked at each difficulty; a level uses its own tier and all easier ones.
TIERS: dict[int, list[ClueMaker]] = {
    1: [_units_of_power, _product_minus, _digit_sum],
    2: [_gcd, _divisors, _power_remainder],
    3: [_lcm, _primes_between, _triangular, _binomial],
}


class VaultCodeEnv:
    """Reveal an arithmetic clue per digit, compute each digit, then enter the full code (3 attempts)."""

    max_turns = 20

    def reset(self, seed: int | None = None) -> tuple[str, dict[str, Any]]:
        self.rng = random.Random(seed)
        self.difficulty = self.rng.randint(1, 3)
        self.length = 3 + self.difficulty
        makers = [m for level in range(1, self.difficulty + 1) for m in TIERS[level]]
        # Every code of difficulty d >= 2 has at least one clue of the hardest tier unlocked.
        chosen = [self.rng.choice(TIERS[self.difficulty])] + [self.rng.choice(makers) for _ in range(self.length - 1)]
        self.rng.shuffle(chosen)
        self.clues = [maker(self.rng) for maker in chosen]
        self.code = "".join(str(value) for _, value in self.clues)
        self.revealed: set[int] = set()
        self.attempts_left = ATTEMPTS
        self.turn = 0
        self.done = False
        vault_id = self.rng.randint(100, 999)
        checksum = sum(int(d) for d in self.code)
        obs = (
            f"You stand before vault no. {vault_id}, locked by a {self.length}-digit code (digits 1..{self.length}, "
            "left to right).\n"
            "Each digit is hidden behind a clue: an arithmetic fact whose value (0-9) IS that digit.\n"
            f"The keypad shows a checksum: the digits of the code add up to {checksum}.\n"
            "Commands:\n"
            f"  inspect <k>      reveal the clue for digit k (1..{self.length})\n"
            f"  enter <code>     try the full code, e.g. enter {'0' * self.length}\n"
            f"A wrong code tells you how many digits are in the right place and costs one of {ATTEMPTS} attempts;\n"
            f"after {ATTEMPTS} wrong codes the vault locks for good. Goal: open the vault."
        )
        return obs, {"difficulty": self.difficulty}

    def step(self, action: str) -> tuple[str, float, bool, bool, dict[str, Any]]:
        if self.done:
            return "The episode is over.", 0.0, True, False, {}
        self.turn += 1
        obs, reward, terminated = self._apply(" ".join(str(action).lower().split()))
        truncated = not terminated and self.turn >= self.max_turns
        self.done = terminated or truncated
        if truncated:
            obs += "\nOut of turns: the vault stays shut."
        return obs, reward, terminated, truncated, {"attempts_left": self.attempts_left}

    def _apply(self, command: str) -> tuple[str, float, bool]:
        """Return (observation, reward, terminated) for one normalised command."""
        verb, _, arg = command.partition(" ")
        if verb == "inspect":
            if not re.fullmatch(r"\d{1,3}", arg) or not 1 <= int(arg) <= self.length:
                return f"Usage: inspect <k> with k between 1 and {self.length}.", 0.0, False
            k = int(arg)
            self.revealed.add(k)
            return f"Clue for digit {k}: it equals {self.clues[k - 1][0]}.\n{self._known()}", 0.0, False
        if verb == "enter":
            guess = arg.replace(" ", "")
            if not re.fullmatch(r"\d+", guess) or len(guess) != self.length:
                return (
                    f"Usage: enter <code> with exactly {self.length} digits, e.g. enter {'0' * self.length}.",
                    0.0,
                    False,
                )
            if guess == self.code:
                return "Click. The vault swings open. You win!", 1.0, True
            self.attempts_left -= 1
            right = sum(1 for g, c in zip(guess, self.code) if g == c)
            if self.attempts_left == 0:
                return f"Wrong code ({right} of {self.length} digits in the right place). The vault locks.", 0.0, True
            return (
                f"Wrong code: {right} of {self.length} digits are in the right place. "
                f"Attempts left: {self.attempts_left}.",
                0.0,
                False,
            )
        return f"Unknown command. Use 'inspect <k>' (k = 1..{self.length}) or 'enter <code>'.", 0.0, False

    def _known(self) -> str:
        """Recap of every clue revealed so far, so the agent need not remember earlier turns."""
        lines = [f"  digit {k}: {self.clues[k - 1][0]}" for k in sorted(self.revealed)]
        return "Clues found so far:\n" + "\n".join(lines)

    def solution(self) -> list[str]:
        return [f"inspect {k}" for k in range(1, self.length + 1)] + [f"enter {self.code}"]
