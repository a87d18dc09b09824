"""Numbers written in words, read as digits: a hint that spells out an answer still gives it away.

``four thousand seven hundred twenty one`` reads as ``4721``, ``twelve hundred`` as ``1200``, and a run of single
digits (``four seven two one``) as the digits in order, ``4721``. A lone digit word (``three``, ``one``) stays a
word: honest hints say "the three numbers" and "one step at a time" far more often than they spell a one-digit
answer. :func:`spoken_numbers` rewrites a token sequence (:func:`spade_envs.leaks.tokens`) so the leak check can
look values up in it as if they had been written in digits.
"""

from __future__ import annotations

__all__ = ["spoken_numbers"]

_UNITS = {w: i for i, w in enumerate("zero one two three four five six seven eight nine".split())}
_TEENS = {w: 10 + i for i, w in enumerate(
    "ten eleven twelve thirteen fourteen fifteen sixteen seventeen eighteen nineteen".split())}  # fmt: skip
_TENS = {w: 10 * i for i, w in enumerate("twenty thirty forty fifty sixty seventy eighty ninety".split(), 2)}
_SCALES = {"thousand": 1000, "million": 1_000_000}
_WORDS = {**_UNITS, **_TEENS, **_TENS}


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


def spoken_numbers(seq: tuple[str, ...]) -> tuple[str, ...]:
    """``seq`` with every run of number words replaced by its value in digits (``and`` inside a run is skipped)."""
    out: list[str] = []
    run: list[str] = []
    for i, token in enumerate(seq):
        number = token in _WORDS or token == "hundred" or token in _SCALES
        joins = token == "and" and run and i + 1 < len(seq) and seq[i + 1] in _WORDS
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
