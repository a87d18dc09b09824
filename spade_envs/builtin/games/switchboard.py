"""Switchboard: find out by experiment which switches drive which lamps."""

from __future__ import annotations

import random
import re
from typing import Any

LAMPS = "ABCD"
# How each rule turns its parent switches into a lamp state. Both parents of AND/OR can change the lamp
# (each one does whenever the other is in the right position), so every parent is detectable by toggling.
RULES = {
    "follow": lambda a, b: a,
    "invert": lambda a, b: not a,
    "and": lambda a, b: a and b,
    "or": lambda a, b: a or b,
}
ASSIGNMENT = re.compile(r"([a-z])=(\d{1,3}(?:,\d{1,3})*)")


def _on(flag: bool) -> str:
    return "ON" if flag else "off"


class SwitchboardEnv:
    """Each lamp follows a hidden rule over one or two switches; the agent toggles switches and names the parents."""

    max_turns = 16  # the largest board (n = 6); reset sets 2n + 4 for the drawn size

    def reset(self, seed: int | None = None) -> tuple[str, dict[str, Any]]:
        self.rng = random.Random(seed)
        self.difficulty = self.rng.randint(1, 3)
        self.n = self.difficulty + 3  # 4, 5 or 6 switches
        self.m = 3 if self.difficulty == 1 else self.rng.choice((3, 4)) if self.difficulty == 2 else 4
        self.max_turns = 2 * self.n + 4
        self._draw_rules()
        self.switches = [self.rng.random() < 0.5 for _ in range(self.n)]
        self.turn = 0
        self.done = False
        names = ", ".join(LAMPS[: self.m])
        intro = (
            f"SWITCHBOARD (difficulty {self.difficulty})\n"
            f"A board has {self.n} switches (numbered 1-{self.n}) and {self.m} lamps ({names}). Each lamp is\n"
            "driven by a hidden rule over its parent switches: it follows one switch, is the inverse of one\n"
            "switch, or is the AND or the OR of two switches. Some switches may drive no lamp at all.\n"
            "Goal: find the parent switches of every lamp.\n"
            "Commands:\n"
            "  toggle <i>                 flip switch i and see every switch and lamp\n"
            "  answer A=2 B=1,4 C=3 ...   name the parents of every lamp (ends the episode; all lamps must be\n"
            "                             right to win, a wrong answer gets partial credit only)\n"
            f"You have {self.max_turns} turns.\n"
        )
        return intro + self._board(), {"difficulty": self.difficulty}

    def _draw_rules(self) -> None:
        """Pick a rule and distinct parents for each lamp; at least one switch is a decoy that drives nothing."""
        decoys = set(self.rng.sample(range(self.n), 1 if self.difficulty == 1 else self.rng.randint(1, 2)))
        usable = [i for i in range(self.n) if i not in decoys]
        two_parent = min(self.difficulty, self.m)  # more AND/OR lamps on harder boards
        kinds = ["and" if self.rng.random() < 0.5 else "or" for _ in range(two_parent)]
        kinds += [self.rng.choice(("follow", "invert")) for _ in range(self.m - two_parent)]
        self.rng.shuffle(kinds)
        self.rules: list[tuple[str, tuple[int, ...]]] = []
        for kind in kinds:
            size = 2 if kind in ("and", "or") else 1
            parents = tuple(sorted(self.rng.sample(usable, size)))
            while any(parents == p for _, p in self.rules):  # no two lamps share a parent set
                parents = tuple(sorted(self.rng.sample(usable, size)))
            self.rules.append((kind, parents))

    def _lamps(self) -> list[bool]:
        states = []
        for kind, parents in self.rules:
            a = self.switches[parents[0]]
            b = self.switches[parents[-1]]
            states.append(bool(RULES[kind](a, b)))
        return states

    def _board(self) -> str:
        switches = " ".join(f"{i + 1}:{_on(s)}" for i, s in enumerate(self.switches))
        lamps = " ".join(f"{LAMPS[j]}:{_on(s)}" for j, s in enumerate(self._lamps()))
        return f"Switches: {switches}\nLamps:    {lamps}\nTurns left: {self.max_turns - self.turn}."

    def _truth(self) -> str:
        """The correct answer in the command syntax, e.g. 'A=2 B=1,4 C=3'."""
        return " ".join(f"{LAMPS[j]}={','.join(str(p + 1) for p in ps)}" for j, (_, ps) in enumerate(self.rules))

    def _parse_answer(self, text: str) -> list[set[int]] | str:
        """Parents per lamp from 'A=2 B=1,4 ...', or an explanation of what is wrong with the text."""
        text = re.sub(r"\s*([=,])\s*", r"\1", text.replace(";", " "))
        found: dict[int, set[int]] = {}
        for part in text.split():
            match = ASSIGNMENT.fullmatch(part)
            lamp = LAMPS.lower().find(match.group(1)) if match else -1
            if not match or not 0 <= lamp < self.m:
                return f"Could not read '{part[:20]}'. Write e.g. answer A=2 B=1,4 C=3."
            switches = {int(x) for x in match.group(2).split(",")}
            if not all(1 <= s <= self.n for s in switches):
                return f"Switch numbers run from 1 to {self.n}."
            found[lamp] = {s - 1 for s in switches}
        if len(found) != self.m:
            return f"Name the parents of every lamp ({', '.join(LAMPS[: self.m])}), e.g. answer A=2 B=1,4 C=3."
        return [found[j] for j in range(self.m)]

    def step(self, action: str) -> tuple[str, float, bool, bool, dict[str, Any]]:
        info: dict[str, Any] = {"difficulty": self.difficulty}
        if self.done:
            return "The episode is over.", 0.0, True, False, info
        self.turn += 1
        text = action.encode("ascii", "replace").decode().lower().strip()
        verb, _, rest = text.partition(" ")
        reward, terminated = 0.0, False
        if verb == "toggle" and rest.strip().isdigit() and 1 <= int(rest) <= self.n:
            i = int(rest) - 1
            before = self._lamps()
            self.switches[i] = not self.switches[i]
            changed = [LAMPS[j] for j, (x, y) in enumerate(zip(before, self._lamps())) if x != y]
            obs = f"Switch {i + 1} is now {_on(self.switches[i])}. Lamps that changed: {', '.join(changed) or 'none'}."
        elif verb == "toggle":
            obs = f"Use: toggle <i> with i from 1 to {self.n}."
        elif verb == "answer":
            parsed = self._parse_answer(rest)
            if isinstance(parsed, str):
                obs = parsed
            else:
                right = sum(set(p) == got for (_, p), got in zip(self.rules, parsed))
                terminated = True
                if right == self.m:
                    reward, obs = 1.0, "Every lamp's parents are right: you win!"
                else:
                    reward = right / self.m * 0.5
                    obs = f"{right}/{self.m} lamps right. The parents were: {self._truth()}. Game over."
        else:
            obs = "Unknown command. Use 'toggle <i>' or 'answer A=... B=...'."
        self.done = terminated
        truncated = not terminated and self.turn >= self.max_turns
        if not terminated:
            obs += "\n" + self._board() + ("\nOut of turns." if truncated else "")
        return obs, reward, terminated, truncated, info

    def solution(self) -> list[str]:
        """Toggle every switch twice, in two sweeps 1..n, then answer.

        Between the sweeps every other switch has been flipped, so each pair of switches is tried with the partner
        in both positions: an AND/OR parent changes its lamp in one of its two toggles, while a non-parent never does.
        """
        sweep = [f"toggle {i + 1}" for i in range(self.n)]
        return sweep + sweep + [f"answer {self._truth()}"]
