"""Adversarial hints: invisible Hangul fillers inside a word hide it from the token reading no more than a ZWSP."""

from __future__ import annotations

import pytest

from spade_envs.design.confusables import fold
from spade_envs.design.hint_reading import HintReading

# Default-ignorable letters (category Lo, not Cf): they render as nothing, NFKC keeps them as U+1160
HANGUL_FILLERS = ["\u115f", "\u1160", "\u3164", "\uffa0"]


@pytest.mark.parametrize("filler", HANGUL_FILLERS, ids=[f"U+{ord(c):04X}" for c in HANGUL_FILLERS])
def test_hangul_filler_inside_a_word_is_dropped(filler):
    assert fold(f"sword{filler}fish") == "swordfish"
    assert HintReading(f"the password is s{filler}wordf{filler}ish").says(("swordfish",))


def test_korean_text_is_unchanged():
    assert fold("비밀번호는 한국어") == "비밀번호는 한국어"
