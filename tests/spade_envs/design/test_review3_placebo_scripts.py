"""Review 3: the placebo of a hint in any script keeps its shape and drops every letter and digit.

Before, only ASCII letter and digit runs were replaced, so the placebo of a Russian or Chinese hint was the hint
itself: the placebo arm got the full information and an honest teaching hint earned regret 0.
"""

from __future__ import annotations

import unicodedata

import pytest

from spade_envs.design.placebo import placebo_hint

HINTS = {
    "russian": "Ключ — последняя цифра суммы трёх чисел; ответьте key и эту цифру.",
    "greek": "Το κλειδί είναι το τελευταίο ψηφίο του αθροίσματος: ΠΡΟΣΘΕΣΤΕ τους τρεις αριθμούς.",
    "chinese": "钥匙是三个数字之和的个位数；回答 key 和那个数字。",
    "japanese": "鍵は三つの数の和の一の位です。キーと答えてください。",
    "korean": "열쇠는 세 수의 합의 마지막 자리입니다. key와 그 숫자로 답하세요.",
    "arabic_digits": "المفتاح هو ٤٨٢١ ثم افتح الباب.",
    "hindi_digits": "पहले सुराग १, २ और ३ पढ़ें, फिर कोड ४८२१ डालें।",
    "armenian": "Բանալին երեք թվերի գումարի վերջին թվանշանն է։",
    "accented_latin": "Crème brûlée: saisissez le code à l'écran, puis ouvrez.",
    "fullwidth": "Ｅｎｔｅｒ ４８２１ ｎｏｗ.",
}


def _script(ch: str) -> str:
    """The first word of a character's name: its script (CYRILLIC, CJK, HIRAGANA, DEVANAGARI, ...)."""
    return unicodedata.name(ch, "?").split()[0]


def _same_script(new: str, old: str) -> bool:
    """Same first name word, or (a kind with no other member, such as the kana length mark) the same block."""
    return _script(new) == _script(old) or ord(new) >> 8 == ord(old) >> 8


def _replaced(ch: str) -> bool:
    return unicodedata.category(ch)[0] in "LMN"


@pytest.mark.parametrize("hint", HINTS.values(), ids=HINTS.keys())
def test_the_placebo_of_a_hint_in_any_script_keeps_its_shape_and_drops_its_words(hint):
    placebo = placebo_hint(hint, "step 0 design 1")
    assert len(placebo) == len(hint) and [len(w) for w in placebo.split()] == [len(w) for w in hint.split()]
    for old, new in zip(hint, placebo):
        if not _replaced(old):  # spaces and punctuation stay where they are
            assert new == old, (old, new)
        elif old.isdecimal():  # a digit becomes a digit of the same script
            assert new.isdecimal() and _script(new) == _script(old), (old, new)
        elif old.isascii() or _script(old) == "LATIN":  # Latin letters become letters of generic words
            assert new.isascii() and new.isalpha() and new.isupper() == old.isupper(), (old, new)
        else:  # any other letter (or mark) becomes a letter of its own script and case
            assert _same_script(new, old) and new.isupper() == old.isupper(), (old, new)
    words = [w for w in hint.split() if sum(map(_replaced, w)) >= 2]
    kept = [w for w in words if w in placebo.split()]
    assert not kept, kept
    assert placebo == placebo_hint(hint, "step 0 design 1") != placebo_hint(hint, "step 0 design 2")


def test_the_placebo_of_the_review_hint_has_no_word_of_the_rule():
    placebo = placebo_hint(HINTS["russian"], "step 0 design 0")
    for word in ["Ключ", "последняя", "цифра", "суммы", "трёх", "чисел", "ответьте", "эту", "цифру"]:
        assert word not in placebo, placebo
    assert "key" not in placebo.split() and placebo.count(" ") == HINTS["russian"].count(" ")


def test_ascii_hints_keep_their_placebo():
    # the ASCII path is unchanged: the same random draws in the same order give main's placebo (commit 0ee0d4a)
    assert placebo_hint("Inspect clues 1, 2, 3 and 4 first, then enter the code.", "step 0 design 1") == (
        "Explore steps 5, 6, 8 all 1 state, move first now note."
    )
    assert placebo_hint(
        "Call <get_order> with <order_id>; refunds over $1,350 need APPROVAL first.", "step 0 design 1"
    ) == ("Then <aim_steps> plan <track_so>; careful look $1,059 then PROGRESS track.")
