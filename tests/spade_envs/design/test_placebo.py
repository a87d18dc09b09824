"""The placebo hint has the real hint's shape and none of its content."""

import pytest

from spade_envs.design.placebo import PLACEBO_WORDS, placebo_hint

HINTS = [
    "Inspect clues 1, 2, 3 and 4 first, then enter the code.",
    "Call <get_order> with <order_id>; refunds over $1,350 need APPROVAL first.",
    "Extraordinarily-long-compounded words stay one run: supercalifragilistic.",
]


@pytest.mark.parametrize("hint", HINTS)
def test_a_placebo_keeps_the_shape_and_drops_the_words(hint):
    placebo = placebo_hint(hint, "step 0 design 1")
    assert len(placebo) == len(hint) and len(placebo.split()) == len(hint.split())
    assert [len(w) for w in placebo.split()] == [len(w) for w in hint.split()]
    assert [c for c in placebo if not c.isalnum()] == [c for c in hint if not c.isalnum()]  # punctuation and spaces
    assert not {w.lower() for w in hint.split() if len(w) > 3} & {w.lower() for w in placebo.split()}
    assert placebo == placebo_hint(hint, "step 0 design 1") != placebo_hint(hint, "step 0 design 2")


def test_the_vocabulary_has_words_of_each_length():
    assert all(len(w) == n for n, words in PLACEBO_WORDS.items() for w in words)
    with pytest.raises(ValueError, match="hint is empty"):
        placebo_hint("  ")
