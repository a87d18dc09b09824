"""How the leak check reads a hint: as token sequences, and in every form a value can be written in.

Values are compared as **token sequences**: lower-cased runs of letters or of digits (``12kg`` is ``12 kg``,
``ACC-7731`` is ``acc 7731``, ``banjo=2`` is ``banjo 2``), numbers by value (``1,234.50`` is ``1234.5``,
``0946`` is ``946``, fullwidth ``４８２１`` is ``4821``), letters as the Latin letters they look like (Cyrillic
``ѕwоrdfіѕh``, accented ``swórdfísh`` and fullwidth ``ｓｗｏｒｄｆｉｓｈ`` are ``swordfish``:
:mod:`spade_envs.design.confusables`), and filler words (``and``, ``then``, ``to``, ...) ignored between tokens, so
``2, 5 and 7`` matches the list ``2 5 7``. A hint names a value (:func:`hint_says`) when the
value occurs in one of its readings: as written; with numbers in words read as digits, ordinals as positions
(``the third lever``: :mod:`spade_envs.design.number_words`); with percentages and cents read as amounts (``15%`` is
``0.15``, ``nineteen dollars and ninety-nine cents`` is ``19.99``); a 3+ digit number or 3+ letter word in
consecutive pieces of its kind (digit by digit ``4 8 2 1``, ``48-21``, letter by letter ``m-a-r-i-g-o-l-d``,
``O R C H I D``, ``mari gold``).
"""

from __future__ import annotations

import re
from collections.abc import Callable

from spade_envs.design.confusables import fold
from spade_envs.design.number_words import amounts, spoken_numbers, stem

__all__ = ["FILLER", "Seq", "contains", "hint_says", "is_number", "tokens", "unfilled"]

#: Words a hint may put between the parts of a value without hiding it (``2, 5 and 7``; ``go to 3 4``).
FILLER = frozenset({"and", "then", "to", "the", "a", "an", "of", "is", "are", "at", "next", "finally", "after"})
_TOKEN = re.compile(r"\d+(?:\.\d+)?|[^\W\d_]+")
_THOUSANDS = re.compile(r"(?<=\d),(?=\d{3}(?!\d))")
_PERCENT = re.compile(r"[%\u066a]")  # after NFKC (fullwidth ％ is %), Arabic ٪ too: a rate, read as "percent"
Seq = tuple[str, ...]


def _norm(token: str) -> str:
    if token[0].isdigit():
        if not token.isascii():  # fullwidth ４８２１, Arabic-Indic ٤٨٢١: the digits int() reads, so the env does too
            token = "".join(str(int(c)) if c.isdecimal() else c for c in token)
        if "." in token:
            token = token.rstrip("0").rstrip(".")
        return token.lstrip("0") or "0"
    return token.lower()


def tokens(text: str) -> Seq:
    """The normalised token sequence of ``text`` (see the module docstring)."""
    text = fold(text)  # NFKC (fullwidth Ｂｒａｖｏ, as an env's NFKC reads it) and look-alike letters as Latin ones
    return tuple(_norm(t) for t in _TOKEN.findall(_THOUSANDS.sub("", text)))


def contains(haystack: Seq, needle: Seq) -> bool:
    """``needle`` occurs contiguously in ``haystack``."""
    n = len(needle)
    if n == 0 or n > len(haystack):
        return False
    first = needle[0]
    return any(haystack[i] == first and haystack[i : i + n] == needle for i in range(len(haystack) - n + 1))


def unfilled(seq: Seq) -> Seq:
    """``seq`` without :data:`FILLER` words."""
    return tuple(t for t in seq if t not in FILLER)


def is_number(seq: Seq) -> bool:
    """``seq`` is one number token."""
    return len(seq) == 1 and seq[0][0].isdigit()


class HintReading:
    """A hint's readings (as written, without filler, numbers in words as digits, amounts), for value lookups.

    An I-shaped look-alike (Cyrillic ``Ӏ``, Greek ``Ι``) is read as ``i`` and, in one more view, as ``l``.
    ``visible`` is what the player sees (the first observation, the tool interface): an ordinal counts a position
    only among things it shows (:func:`~spade_envs.design.number_words.spoken_numbers`); ``None`` reads every ordinal.
    """

    def __init__(self, hint: str, visible: str | None = None) -> None:
        self.raw = tokens(hint)
        self.bare = unfilled(self.raw)
        things = None if visible is None else frozenset(stem(t) for t in tokens(visible))
        spoken = spoken_numbers(self.raw, things)  # "four seven two one", "the third lever": as digits
        self.views = [spoken, unfilled(spoken)] if spoken != self.raw else []
        if not hint.isascii():
            ell = tokens(fold(hint, ell=True))  # "heӀӀo": the I-shaped letters as l
            self.views += [ell, unfilled(ell)] if ell != self.raw else []
            hint = fold(hint)
        # "15%" as 0.15 and "$19 and 99 cents" as 19.99 (with "%" as a word: the token reading drops it)
        rates = amounts(spoken_numbers(tokens(_PERCENT.sub(" percent ", hint)), things))
        rates = tuple(_norm(t) if t[0].isdigit() else t for t in rates)
        if rates != spoken:
            self.views += [rates, unfilled(rates)]

    def says(self, value: Seq) -> bool:
        """Whether the hint names ``value`` in any reading (module docstring)."""
        if not value:
            return False
        if contains(self.raw, value) or (not FILLER.intersection(value) and contains(self.bare, value)):
            return True
        if any(contains(view, value) for view in self.views):
            return True
        if len(value) == 1 and len(value[0]) >= 3 and (value[0].isdigit() or value[0].isalpha()):
            return self._in_pieces(value[0])
        return False

    def _in_pieces(self, value: str) -> bool:
        """``value`` in 2+ consecutive pieces of its kind (``4 8 2 1``, ``48-21``, ``O R C H I D``, ``mari gold``)."""
        kind = str.isdigit if value.isdigit() else str.isalpha
        for i, first in enumerate(self.raw):
            if not value.startswith(first) or first == value:
                continue
            joined = first
            for piece in self.raw[i + 1 :]:
                joined += piece
                if not kind(piece) or not value.startswith(joined):
                    break
                if joined == value:
                    return True
        return False


def hint_says(hint: str, visible: str | None = None) -> Callable[[Seq], bool]:
    """Whether ``hint`` names a value (a token sequence), in any of its readings (module docstring).

    ``visible``: what the player sees, as for :class:`HintReading`.
    """
    return HintReading(hint, visible).says
