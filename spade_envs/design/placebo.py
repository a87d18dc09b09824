"""Placebo hints: text of the same shape as a real hint that says nothing about the environment.

Regret (hinted minus no-hint win rate) pays for the hint's information only if nothing else differs between the
arms. An env can tell the arms apart without reading the hint's content (a ``HINT:`` line, a longer first message)
and reward that: "reply `hint seen` if your message has a hint" wins every hinted play and teaches nothing. The
placebo arm closes that door: the agent gets a hint that has the real hint's wrapper, word count, word lengths,
punctuation and capitalisation, but generic words, and regret counts only what the real hint adds beyond the better
of the no-hint and placebo arms (:func:`spade_envs.design.rewards.paired_regret`). Our deviation from the paper
(``docs/paper.md``); ``spade.hint.placebo=false`` restores the paper's two arms.
"""

from __future__ import annotations

import hashlib
import random
import re

__all__ = ["PLACEBO_WORDS", "placebo_hint"]

#: Content-free advice words by length. A placebo word has the length of the real word it replaces.
PLACEBO_WORDS: dict[int, tuple[str, ...]] = {
    1: ("a",),
    2: ("be", "do", "it", "so", "to", "on", "in", "as"),
    3: ("try", "the", "and", "all", "act", "aim", "see", "now"),
    4: ("plan", "read", "each", "step", "then", "keep", "note", "look", "move", "calm"),
    5: ("check", "think", "first", "state", "order", "clear", "watch", "track", "steps"),
    6: ("review", "always", "before", "slowly", "option", "notice", "choose", "result"),
    7: ("careful", "explore", "observe", "general", "another", "options", "process"),
    8: ("consider", "progress", "patterns", "evidence", "thinking", "strategy", "reaching"),
    9: ("carefully", "reasoning", "situation", "responses", "attention"),
    10: ("systematic", "reflection", "considered", "particular", "deliberate"),
    11: ("observation", "information", "methodology", "persistence"),
    12: ("deliberately", "consistently", "observations", "thoughtfully"),
}
_LONGEST = max(PLACEBO_WORDS)
_TOKEN = re.compile(r"[A-Za-z]+|[0-9]+")


def _word(length: int, rng: random.Random) -> str:
    """A generic word of exactly ``length`` letters (long runs: generic words joined without spaces)."""
    parts: list[str] = []
    while length > _LONGEST:
        parts.append(rng.choice(PLACEBO_WORDS[_LONGEST]))
        length -= _LONGEST
    if length:
        parts.append(rng.choice(PLACEBO_WORDS[length]))
    return "".join(parts)


def _replace(match: re.Match[str], rng: random.Random) -> str:
    text = match.group(0)
    if text.isdigit():  # numbers keep their length but carry no instance information
        return "".join(rng.choice("0123456789") for _ in text)
    word = _word(len(text), rng)
    if text.isupper() and len(text) > 1:
        return word.upper()
    return word.capitalize() if text[0].isupper() else word


def placebo_hint(hint: str, key: str = "") -> str:
    """A content-free hint of the same shape as ``hint``, deterministic in ``(hint, key)``.

    Every letter run and digit run is replaced by a generic word (or random digits) of the same length and case;
    spaces and punctuation stay, so ``len(placebo_hint(h)) == len(h)`` and the word counts match.
    """
    if not hint.strip():
        raise ValueError("hint is empty: a placebo needs the real hint's shape")
    digest = hashlib.sha256(f"{key}\0{hint}".encode()).digest()
    rng = random.Random(int.from_bytes(digest[:8], "big"))
    return _TOKEN.sub(lambda m: _replace(m, rng), hint)
