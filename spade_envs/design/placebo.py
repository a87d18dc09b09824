"""Placebo hints: text of the same shape as a real hint that says nothing about the environment.

Regret (hinted minus no-hint win rate) pays for the hint's information only if nothing else differs between the
arms. An env can tell the arms apart without reading the hint's content (a ``HINT:`` line, a longer first message)
and reward that: "reply `hint seen` if your message has a hint" wins every hinted play and teaches nothing. The
placebo arm closes that door: the agent gets a hint that has the real hint's wrapper, word count, word lengths,
punctuation and capitalisation, but generic words, and regret counts only what the real hint adds beyond the better
of the no-hint and placebo arms (:func:`spade_envs.design.rewards.paired_regret`). Our deviation from the paper
(``docs/paper.md``); ``spade.hint.placebo=false`` restores the paper's two arms.

Every letter, digit and mark of any script is replaced, in the script it is written in: Latin words by generic
English words, digits by random digits of the same script (``٤٨٢١`` by four other Arabic-Indic digits), any other
letter or mark by a random one of the same script, case and kind (Cyrillic capitals by Cyrillic capitals, hiragana
by hiragana, a Devanagari vowel sign by another, a CJK ideograph by any other), so a Russian hint's placebo is as
Russian-looking, and as empty, as an English hint's is English-looking: an env that pays for "Cyrillic in your
message" cannot tell the arms apart either.
"""

from __future__ import annotations

import hashlib
import random
import unicodedata
from functools import lru_cache

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
#: The word of a character's name that ends its kind: ``CYRILLIC CAPITAL``, ``HIRAGANA LETTER``, ``DEVANAGARI VOWEL``.
_KIND_WORDS = frozenset({"LETTER", "SMALL", "CAPITAL", "SYLLABLE", "CHARACTER", "DIGIT", "NUMERAL", "NUMBER",
                         "VOWEL", "SIGN", "LIGATURE"})  # fmt: skip
#: Kinds whose peers are a whole range, not the code points around the character (neighbouring ideographs share a
#: radical: a trace of the meaning).
_RANGES = {"CJK UNIFIED IDEOGRAPH": (0x4E00, 0xA000), "HANGUL SYLLABLE": (0xAC00, 0xD7A4)}


def _word(length: int, rng: random.Random) -> str:
    """A generic word of exactly ``length`` letters (long runs: generic words joined without spaces)."""
    parts: list[str] = []
    while length > _LONGEST:
        parts.append(rng.choice(PLACEBO_WORDS[_LONGEST]))
        length -= _LONGEST
    if length:
        parts.append(rng.choice(PLACEBO_WORDS[length]))
    return "".join(parts)


def _latin(text: str, rng: random.Random) -> str:
    """A generic word for the Latin word ``text``, or random digits for the ASCII number ``text``."""
    if text.isdigit():  # numbers keep their length but carry no instance information
        return "".join(rng.choice("0123456789") for _ in text)
    word = _word(len(text), rng)
    if text.isupper() and len(text) > 1:
        return word.upper()
    return word.capitalize() if text[0].isupper() else word


def _kind(ch: str) -> tuple[str, str]:
    """The general category of ``ch`` and its name up to the word that ends its kind (``CYRILLIC CAPITAL``)."""
    words = unicodedata.name(ch, "").split()
    for i, word in enumerate(words):
        if word.startswith("IDEOGRAPH"):
            return unicodedata.category(ch), " ".join([*words[:i], "IDEOGRAPH"])
        if word in _KIND_WORDS:
            return unicodedata.category(ch), " ".join(words[: i + 1])
    return unicodedata.category(ch), words[0] if words else ""


@lru_cache(maxsize=512)
def _peers(category: str, name: str, code: int) -> str:
    """Characters of the kind ``(category, name)``: in its range (:data:`_RANGES`), else near ``code``.

    Near: among the 128, else the 256 code points around it (the block's common letters first); with no other
    character of that name there, any of the same category.
    """
    if name in _RANGES:  # every assigned character of the range is of its kind
        return "".join(c for c in map(chr, range(*_RANGES[name])) if unicodedata.category(c) == category)
    for same in (lambda c: _kind(c) == (category, name), lambda c: unicodedata.category(c) == category):
        for size in (0x80, 0x100):
            low = code & ~(size - 1)
            found = "".join(c for c in map(chr, range(low, low + size)) if same(c))
            if len(found) > 1:
                return found
    return ""


def _other(ch: str, rng: random.Random) -> str:
    """A random character of the kind of ``ch`` (a digit of the same script for a digit)."""
    if ch.isdecimal():
        zero = ord(ch) - unicodedata.decimal(ch)
        return chr(zero + rng.randrange(10))
    peers = _peers(*_kind(ch), ord(ch))
    return rng.choice(peers) if peers else ("x" if ch.isalpha() else "0")


def _class(ch: str, after_latin: bool) -> str:
    """``latin``: an ASCII letter or digit, a Latin letter, a mark on one; ``other``: any letter, digit or mark."""
    category = unicodedata.category(ch)
    if ch.isascii():
        return "latin" if ch.isalnum() else ""
    if category[0] == "L" and unicodedata.name(ch, "").startswith("LATIN "):
        return "latin"
    if category[0] == "M" and after_latin:
        return "latin"
    return "other" if category[0] in "LMN" else ""


def placebo_hint(hint: str, key: str = "") -> str:
    """A content-free hint of the same shape as ``hint``, deterministic in ``(hint, key)``.

    Every Latin letter run and ASCII digit run is replaced by a generic word (or random digits) of the same length
    and case, every other letter, digit or mark by one of its own script and kind (module docstring); spaces and
    punctuation stay, so ``len(placebo_hint(h)) == len(h)`` and the word counts match.
    """
    if not hint.strip():
        raise ValueError("hint is empty: a placebo needs the real hint's shape")
    digest = hashlib.sha256(f"{key}\0{hint}".encode()).digest()
    rng = random.Random(int.from_bytes(digest[:8], "big"))
    out: list[str] = []
    run = ""  # the Latin word or ASCII number being read
    for ch in hint:
        kind = _class(ch, bool(run) and not run[-1].isdigit())
        if run and (kind != "latin" or ch.isdigit() != run[-1].isdigit()):
            out.append(_latin(run, rng))
            run = ""
        if kind == "latin":
            run += ch
        else:
            out.append(_other(ch, rng) if kind == "other" else ch)
    if run:
        out.append(_latin(run, rng))
    return "".join(out)
