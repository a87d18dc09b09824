"""Numbers written in words, read as digits: a hint that spells out an answer still gives it away.

``four thousand seven hundred twenty one`` reads as ``4721``, ``twelve hundred`` as ``1200``, and a run of single
digits (``four seven two one``) as the digits in order, ``4721``. A lone digit word (``three``, ``one``) stays a
word: honest hints say "the three numbers" and "one step at a time" far more often than they spell a one-digit
answer. An ordinal names a position, so it is read as its number (``the third lever`` is ``3``, ``twenty-first`` is
``21``) unless it orders the procedure (``the second step``, ``the third turn``) or, when the caller says what the
player sees, counts something the env does not show (``the second clue`` of an env without clues); ``second`` is
read only after ``the`` (``a second request`` is approach), and ``first`` only inside a number (``read the inbox
first``, ``the first item`` are how honest hints order the work). :func:`spoken_numbers` rewrites a
token sequence (:func:`spade_envs.design.hint_reading.tokens`) so the leak check can look values up in it as if they had
been written in digits; :func:`amounts` then reads decimals, percentages and cents as the values a call carries
(``zero point one five`` and ``15 percent`` are ``0.15``, ``19 dollars and 99 cents`` is ``19.99``).
"""

from __future__ import annotations

import re
from decimal import Decimal

__all__ = ["amounts", "spoken_numbers", "stem"]

_UNITS = {w: i for i, w in enumerate("zero one two three four five six seven eight nine".split())}
_TEENS = {w: 10 + i for i, w in enumerate(
    "ten eleven twelve thirteen fourteen fifteen sixteen seventeen eighteen nineteen".split())}  # fmt: skip
_TENS = {w: 10 * i for i, w in enumerate("twenty thirty forty fifty sixty seventy eighty ninety".split(), 2)}
_SCALES = {"thousand": 1000, "million": 1_000_000}
_WORDS = {**_UNITS, **_TEENS, **_TENS}
#: Ordinals, as the cardinal word they stand for (``third`` counts as ``three``, ``hundredth`` as ``hundred``).
_ORDINALS = {
    **dict(zip("first second third fourth fifth sixth seventh eighth ninth".split(), list(_UNITS)[1:], strict=True)),
    **{w + "th": w for w in _TEENS if w != "twelve"},
    "twelfth": "twelve",
    **{w[:-1] + "ieth": w for w in _TENS},
    "hundredth": "hundred",
    "thousandth": "thousand",
}
#: ``first`` orders what an honest hint says far too often to name a value (``read the inbox first``, ``check the
#: first item``: 4 false alarms on the built-ins' tool-use solutions, which need 1 often): read inside a number only
#: (``twenty-first``). ``second`` is an adverb or a unit of time (``wait a second``): read after ``the`` only.
_ONLY_IN_A_NUMBER = frozenset({"first"})
_AFTER_THE = frozenset({"second"})
#: Nouns an ordinal orders the procedure by, not the world: ``the second step`` names no value.
_PROCEDURE = frozenset(
    """step steps time times turn turns round rounds phase phases stage stages try tries attempt attempts pass call
    calls request requests question questions move moves action actions message messages reply answer part half
    line task goal thing check checks look looks""".split()
)
#: Words after an ordinal that leave it without a noun (``fourth from the left``, ``the third one``).
_NO_NOUN = frozenset(
    "from one ones in on of to at by for with is are position place counting and or then before after".split()
)
_CURRENCY = frozenset({"dollar", "dollars", "euro", "euros", "pound", "pounds", "buck", "bucks", "usd", "eur"})
_CENTS = frozenset({"cent", "cents", "pence", "penny", "pennies"})
_NUMBER = re.compile(r"\d+(?:\.\d+)?|\.\d+")


def _value(run: list[str]) -> str:
    if len(run) == 1 and run[0] in _UNITS:  # "the three numbers", "one step": too common to read as a value
        return run[0]
    if len(run) > 1 and all(w in _UNITS for w in run):  # digits spelled one by one
        return "".join(str(_UNITS[w]) for w in run)
    total = current = 0
    for word in run:
        if word in _WORDS:
            current += _WORDS[word]
        elif word == "hundred":
            current = max(current, 1) * 100
        elif word in _SCALES:
            total, current = total + max(current, 1) * _SCALES[word], 0
    return str(total + current)


def _composes(run: list[str], word: str) -> bool:
    """Whether an ordinal's cardinal ``word`` ends the number ``run``.

    It does in ``twenty first`` and ``one hundred and fifth``; in ``door four first`` it follows ``4`` as an adverb.
    """
    return bool(run) and ((run[-1] in _TENS and word in _UNITS) or run[-1] == "hundred" or run[-1] in _SCALES)


def stem(word: str) -> str:
    """A crude singular (``levers`` is ``lever``), enough to match a hint's noun with the env's text."""
    return word[:-1] if len(word) > 3 and word.endswith("s") and not word.endswith("ss") else word


def _noun(seq: tuple[str, ...], i: int) -> str | None:
    """The word the ordinal ``seq[i]`` counts (``lever`` of ``the third lever``), or ``None`` (``fourth from``)."""
    after = seq[i + 1] if i + 1 < len(seq) else ""
    return after if after and after not in _NO_NOUN and after not in _ORDINALS and after.isalpha() else None


def _lone_ordinal(seq: tuple[str, ...], i: int, noun: str | None, things: frozenset[str] | None) -> bool:
    """``seq[i]``, an ordinal outside a number counting ``noun``, names a position (rules: module docstring)."""
    if seq[i] in _ONLY_IN_A_NUMBER or (seq[i] in _AFTER_THE and (i == 0 or seq[i - 1] != "the")):
        return False
    return things is None or noun is None or stem(noun) in things


def spoken_numbers(seq: tuple[str, ...], things: frozenset[str] | None = None) -> tuple[str, ...]:
    """``seq`` with every run of number words replaced by its value in digits (``and`` inside a run is skipped).

    An ordinal ends its run (``twenty first`` is ``21``; ``the third`` alone is ``3``, never a lone word). Given
    ``things`` (the :func:`stem` of every word the player sees), an ordinal outside a number is read only when it
    counts one of them or no noun at all (``the third lever`` of levers the env shows, ``fourth from the left``):
    ``the second clue`` of an env without clues is how a hint orders its own advice.
    """
    out: list[str] = []
    run: list[str] = []
    last_noun: str | None = None
    for i, token in enumerate(seq):
        word = _ORDINALS.get(token)
        if word is not None:  # a bare ordinal counts what the one before it did: "the second column, then the third"
            noun = last_noun = _noun(seq, i) or last_noun
        if word is not None and noun not in _PROCEDURE:
            if _composes(run, word):
                out.append(_value([*run, word]))
                run = []
                continue
            if run:
                out.append(_value(run))
                run = []
            if _lone_ordinal(seq, i, noun, things):
                out.append(str(_WORDS.get(word) or (100 if word == "hundred" else _SCALES.get(word, 0))))
                continue
        number = token in _WORDS or token == "hundred" or token in _SCALES
        after = seq[i + 1] if i + 1 < len(seq) else ""
        ends = after in _ORDINALS and _composes(run, _ORDINALS[after])  # "one hundred and first"
        joins = token == "and" and run and (after in _WORDS or ends)
        if number or joins:
            if number:
                run.append(token)
            continue
        if run:
            out.append(_value(run))
            run = []
        out.append(token)
    if run:
        out.append(_value(run))
    return tuple(out)


def _number(token: str) -> Decimal | None:
    """The value of a number token (``15``, ``19.99``, ``.15``: tokens are normalised), else ``None``."""
    return Decimal(token) if _NUMBER.fullmatch(token) else None


def _plain(value: Decimal) -> str:
    text = format(value, "f")
    return text.rstrip("0").rstrip(".") if "." in text else text


def _at(seq: tuple[str, ...], i: int) -> str:
    return seq[i] if i < len(seq) else ""


def _digit_text(token: str) -> str | None:
    """``token`` as plain digits: a digit run, or a lone digit word that :func:`spoken_numbers` left a word."""
    return token if token.isdigit() else str(_UNITS[token]) if token in _UNITS else None


def _decimals(seq: tuple[str, ...]) -> tuple[str, ...]:
    """A decimal point in words: ``19 point 99`` (``nineteen point nine nine``) is ``19.99``."""
    out: list[str] = []
    i = 0
    while i < len(seq):
        left, right = _digit_text(seq[i]), _digit_text(_at(seq, i + 2)) if _at(seq, i + 1) == "point" else None
        if left is not None and right is not None:
            out.append(f"{left}.{right}")
            i += 3
        else:
            out.append(seq[i])
            i += 1
    return tuple(out)


def amounts(seq: tuple[str, ...]) -> tuple[str, ...]:
    """``seq`` (after :func:`spoken_numbers`) with percentages as rates and dollars-and-cents as one amount.

    ``15 percent`` / ``15 per cent`` become ``0.15``; ``19 dollars and 99 cents`` (currency word or ``and``, not
    both needed: ``$19 and 99 cents`` tokenises as ``19 and 99 cents``) becomes ``19.99``; ``99 cents`` alone
    ``0.99``; a decimal point in words is read first (``twelve point five percent`` is ``0.125``).
    """
    seq = _decimals(seq)
    out: list[str] = []
    i = 0
    while i < len(seq):
        n = _number(seq[i])
        if n is None:
            out.append(seq[i])
            i += 1
            continue
        if _at(seq, i + 1) == "percent" or (_at(seq, i + 1), _at(seq, i + 2)) == ("per", "cent"):
            out.append(_plain(n / 100))
            i += 2 if seq[i + 1] == "percent" else 3
            continue
        j = i + 1 + (_at(seq, i + 1) in _CURRENCY)
        j += _at(seq, j) == "and"
        m = _number(_at(seq, j))
        whole = n == n.to_integral_value()
        cents = m is not None and m == m.to_integral_value() and m < 100 and _at(seq, j + 1) in _CENTS
        if whole and j > i + 1 and m is not None and cents:
            out.append(_plain(n + m / 100))
            i = j + 2
        elif whole and n < 100 and _at(seq, i + 1) in _CENTS:
            out.append(_plain(n / 100))
            i += 2
        else:
            out.append(seq[i])
            i += 1
    return tuple(out)
