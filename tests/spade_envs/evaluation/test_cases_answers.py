"""Case tables: our AIME, GPQA and code extraction against the official scorers' rules, case by case.

Each AIME row holds what the reference implementation's AIME scorer decides (restated below) next to ours.

Each GPQA row holds what simple-evals' GPQA scorer decides (the first ``Answer: X`` match of its regex, compared
case-sensitively) and what we decide; rows where they differ carry the reason documented in docs/evaluation.md.
"""

from __future__ import annotations

import re
import threading
import time

import pytest

from spade_envs.evaluation import answers as answers_module
from spade_envs.evaluation.answers import choice_letter, extract_code, math_check, math_equal

# simple-evals' GPQA rule, restated: first match of this pattern, letter compared as written. Both published versions
# (the current one accepts a letter in dollars); rows must agree with each (or carry the documented reason).
_SIMPLE_EVALS = (re.compile(r"(?i)Answer[ \t]*:[ \t]*([A-D])"), re.compile(r"(?i)Answer[ \t]*:[ \t]*\$?([A-D])\$?"))


def _simple_evals_correct(response: str, gold: str) -> bool:
    verdicts = {bool(hit) and hit.group(1) == gold for hit in (p.search(response) for p in _SIMPLE_EVALS)}
    assert len(verdicts) == 1, "a row where simple-evals' two versions disagree says nothing"
    return verdicts.pop()


WIDER = "markup"  # docs: we also read letters wrapped in Markdown/LaTeX/brackets, dashes, or a boxed letter
THINK = "think"  # docs: the reasoning section (<think>...</think>) is not searched
GPQA_CASES = [  # response, gold, our verdict, reason when it differs from simple-evals
    ("Answer: C", "C", True, None),
    ("ANSWER: D", "D", True, None),
    ("answer: c", "C", False, None),  # simple-evals reads 'c', which is not 'C'
    ("Answer: B\nNote that the answer is a bit subtle.", "B", True, None),
    ("Answer: B, which shows a doublet of triplets", "B", True, None),  # first match, not the last
    ("Reasoning... Answer: A? No. Answer: C", "A", True, None),  # the first match wins, as in simple-evals
    ("Answer: C\n\nThis answer is a consequence of the selection rules.", "C", True, None),
    ("The correct answer is C.", "C", False, None),
    ("Answer: Option C", "C", False, None),
    ("Answer:C", "C", True, None),
    ("Answer: Because of symmetry, D", "B", True, None),  # simple-evals' regex reads the B of "Because"
    ("**Answer**: C", "C", True, WIDER),
    ("**Answer:** C", "C", True, WIDER),
    ("**Final Answer**: C", "C", True, WIDER),
    ("**Answer: C**", "C", True, None),
    ("Answer: \\(C\\)", "C", True, WIDER),
    ("Answer: \\(\\text{C}\\)", "C", True, WIDER),
    ("Answer: [C]", "C", True, WIDER),
    ("Answer: (C)", "C", True, WIDER),
    ("Answer: $\\mathrm{C}$", "C", True, WIDER),
    ("Answer: **C)**", "C", True, WIDER),
    ("Answer - C", "C", True, WIDER),
    ("Answer \u2014 C", "C", True, WIDER),
    ("\\boxed{\\textbf{C}}", "C", True, WIDER),
    ("\\boxed{\\mathrm{C}}", "C", True, WIDER),
    ("\\boxed{C) 1.2 eV}", "C", True, WIDER),
    ("Final answer: $\\boxed{\\text{C}}$", "C", True, WIDER),
    ("\\boxed{A} at first, then \\boxed{D}", "D", True, WIDER),
    ("an answer-by-answer check shows it. Answer: C", "C", True, None),
    ("<think>Answer: A</think>\nAnswer: D", "D", True, THINK),
    ("no letter at all", "A", False, None),
    # review 3: prose before the final line that the widened forms once read as an earlier, wrong answer
    ("The answer \u2014 assuming an ideal gas \u2014 follows from PV = nRT.\n\nAnswer: C", "C", True, None),
    ("Let me check the answer - according to Hund's rule the spin is maximal.\n\nAnswer: B", "B", True, None),
    (
        "For this answer: \\(B_0\\) must vanish at the boundary, so the field is zero there.\n\nAnswer: D",
        "D",
        True,
        None,
    ),
    ("My first guess for the answer: (A) fails the charge balance.\nChecking the rest...\nAnswer: C", "C", True, None),
    ("A tentative answer: **B** is excluded by symmetry.\nAnswer: D", "D", True, None),
    ("Before the final answer: [a quick check of units] the units work out.\nAnswer: B", "B", True, None),
    ("The short answer: $\\Delta G < 0$, so the reaction is spontaneous.\n\nAnswer: A", "A", True, None),
    ("answer - a doublet of triplets is expected here.\n\nAnswer: B", "B", True, None),
    ("**Answer** - a doublet of triplets.\n\n**Answer**: B", "B", True, WIDER),  # no strict match: the last line
    ("The answer (B) is excluded, see above.\n**Answer**: C", "C", True, WIDER),  # widened only at a line start
]


@pytest.mark.parametrize(("response", "gold", "ours", "reason"), GPQA_CASES)
def test_gpqa_letter_matches_simple_evals_or_a_documented_difference(response, gold, ours, reason):
    assert (choice_letter(response) == gold) is ours
    official = _simple_evals_correct(response, gold)
    assert (official == ours) is (reason is None), f"simple-evals says {official}; reason {reason}"


# The reference implementation's AIME rule, restated: the last \boxed{...} without nested braces, math-verify at its
# defaults on "\boxed{pred}" against "\boxed{gold}"; no box is wrong.
_REFERENCE_BOX = re.compile(r"\\boxed\{([^{}]+)\}")


def _reference_correct(response: str, gold: str) -> bool:
    import math_verify

    found = _REFERENCE_BOX.findall(response)
    if not found:
        return False
    return bool(
        math_verify.verify(math_verify.parse(f"\\boxed{{{gold}}}"), math_verify.parse(f"\\boxed{{{found[-1]}}}"))
    )


BOX = "box"  # docs: box forms the reference's regex misses (nested braces, a space before the brace)
MATH_CASES = [  # response, gold, our verdict, reason when it differs from the reference implementation
    (r"\boxed{70}", "70", True, None),
    (r"$\boxed{70}$.", "70", True, None),
    (r"\boxed{033}", "33", True, None),
    (r"\boxed{\dfrac{140}{2}}", "70", True, BOX),
    (r"\boxed{\frac{1}{2}}", "0.5", True, BOX),
    (r"\boxed{35\cdot 2}", "70", True, None),
    (r"\boxed{70.0}", "70", True, None),
    (r"\boxed{1,000}", "1000", True, None),
    (r"\boxed{70^\circ}", "70", True, None),
    (r"\boxed{71}", "70", False, None),
    (r"\boxed{70.}", "70", False, None),
    (r"\boxed{5, 70}", "70", False, None),
    (r"answer \boxed{5} and finally \boxed{70}", "70", True, None),
    (r"\boxed{70} wait no \boxed{71", "70", True, None),  # the unclosed box is not an answer
    (r"\boxed {70}", "70", True, BOX),
    # no box, no answer: a response cut off at max_tokens whose last expression equals the gold is wrong
    ("The answer is 70.", "70", False, None),
    ("... so far we have m+n = 70", "70", False, None),
    (r"\fbox{70}", "70", False, None),
    (r"\boxed70", "70", False, None),
    (r"<think>\boxed{70}</think> so the answer is 13", "70", False, THINK),  # a box in the reasoning is not final
    (r"<think>draft \boxed{12}</think> final \boxed{13}", "13", True, None),
]


@pytest.mark.parametrize(("response", "gold", "correct", "reason"), MATH_CASES)
def test_aime_scores_the_last_boxed_answer_with_math_verify(response, gold, correct, reason):
    assert math_equal(response, gold)[0] is correct
    official = _reference_correct(response, gold)
    assert (official == correct) is (reason is None), f"the reference says {official}; reason {reason}"


def test_a_huge_answer_is_killed_counted_wrong_and_does_not_freeze_other_threads(caplog):
    """70^(70^70) cannot be computed; the scorer process is killed at its deadline and other threads keep going."""
    beats: list[float] = []
    stop = threading.Event()

    def heartbeat() -> None:
        while not stop.is_set():
            beats.append(time.monotonic())
            time.sleep(0.01)

    thread = threading.Thread(target=heartbeat)
    thread.start()
    try:
        verdicts = [math_check(rf"\boxed{{{big}}}", "70", timeout_s=3.0) for big in ("70^{70^{70}}", "(10^{100})!")]
    finally:
        stop.set()
        thread.join()
    assert all(not v.correct and v.timed_out for v in verdicts)
    assert math_check(r"\boxed{70}", "70").correct  # the pool still serves after a kill
    assert len(beats) > 50  # the heartbeat thread ran while the scorer was busy (no GIL freeze)
    gaps = [b - a for a, b in zip(beats, beats[1:])]
    assert max(gaps) < 2.0


def test_an_unparseable_gold_answer_is_an_error_not_a_wrong_answer():
    with pytest.raises(ValueError, match="cannot parse the reference answer"):
        math_check(r"\boxed{1}", "")


CODE_CASES = [  # LiveCodeBench: the lines between the last two lines that contain a fence
    ("```python\nprint(1)\n```", "print(1)"),
    ("```\nx\n```\n```python\nprint(1)\n```", "print(1)"),
    ("```python\nprint(1)\n```\nExample:\n```text\n3\n```", "3"),
    ("no code", ""),
    ("```python\nprint(1)", ""),
    ("<think>```python\nprint(0)\n```</think>\n```python\nprint(2)\n```", "print(2)"),
]


@pytest.mark.parametrize(("response", "code"), CODE_CASES)
def test_code_extraction_follows_livecodebench(response, code):
    assert extract_code(response) == code


def test_math_verify_s_own_limit_is_marked_as_a_timeout():
    """Within the hard deadline, math-verify's 5 s limits still apply, and their timeouts are marked (not silent)."""
    verdict = math_check(r"\boxed{70^{70^{70}}}", "70", timeout_s=60.0)
    assert verdict == answers_module.MathVerdict(False, "70^{70^{70}}", timed_out=True)
