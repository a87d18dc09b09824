r"""Pull the final answer out of a model's response and compare it with the reference, as the official scorers do.

- **Math** (AIME): the last complete ``\boxed{...}`` of the visible text (after any ``</think>``), compared with
  ``math-verify`` at its default settings; no box means no answer. math-verify runs in a scorer process
  (:mod:`~spade_envs.evaluation.scorer_pool`) with a hard deadline, so a huge answer such as ``70^{70^{70}}`` is
  killed and counted wrong instead of freezing the run; inside that process math-verify's own alarms work.
- **Multiple choice** (GPQA): simple-evals' rule, the *first* ``Answer: X`` (``Answer`` in any case, the letter as
  written). Only where that reads nothing: the last line that *starts* with a wrapped answer (``**Answer**: C``,
  ``Answer: \(C\)``, ``Answer - C``), an upper-case letter; else the letter of the last ``\boxed{}``. So the
  widening never changes a verdict simple-evals reaches, and prose ("the answer - a doublet") is never read.
- **Code** (LiveCodeBench): LiveCodeBench's rule, the text between the last two lines that contain a fence.

Differences from the official scorers are listed in ``docs/evaluation.md``.
"""

from __future__ import annotations

import logging
import re
import signal
from dataclasses import dataclass
from typing import Any

from spade_envs.design.extract import split_thinking
from spade_envs.evaluation.scorer_pool import ScorerRaised, ScorerTimeout, shared_pool
from spade_envs.evaluation.suite import MissingDependency

__all__ = [
    "MATH_TIMEOUT_S",
    "PARSE_TIMEOUT_S",
    "VERIFY_TIMEOUT_S",
    "MathVerdict",
    "choice_letter",
    "extract_code",
    "last_boxed",
    "math_check",
    "math_equal",
]

log = logging.getLogger(__name__)

#: Hard deadline of one math-verify comparison, for what the alarms below cannot interrupt (big integers in C).
MATH_TIMEOUT_S = 30.0
#: math-verify's default limits for parsing the answer and for comparing it, applied as alarms in the scorer process.
PARSE_TIMEOUT_S = VERIFY_TIMEOUT_S = 5.0
_MATH_PRELOAD = ("math_verify",)
# Markup a model wraps its letter in; removed before looking for a wrapped "Answer: X" line (simple-evals'
# multilingual normalisation, widened).
_WRAPPERS = re.compile(r"\*\*|__|\\boxed|\\textbf|\\text|\\mathrm|\\mathbf|\\\(|\\\)|\\\[|\\\]|\\\$|\$|[{}\[\]()]")
_SPACES = re.compile(r"[ \t]+")
#: simple-evals' ``ANSWER_PATTERN_MULTICHOICE`` (its current version: a letter in dollars too), for ``{letters}``.
_STRICT = r"(?i)Answer[ \t]*:[ \t]*\$?([{letters}])\$?"
#: A wrapped answer line, after the wrappers are removed: list or heading markup, an optional "Final", "Answer", a
#: colon or a dash between spaces, and one upper-case letter standing alone.
_WIDENED = r"^[ #>*\-]*(?i:final )?(?i:answer) ?(?:: ?| [\-\u2013\u2014] )([{letters}])(?![A-Za-z0-9_])"


def last_boxed(text: str) -> str | None:
    r"""Content of the last complete ``\boxed{...}`` (nested braces balanced), or ``None``."""
    start = text.rfind("\\boxed")
    while start != -1:
        brace = text.find("{", start)
        if brace != -1 and text[start + len("\\boxed") : brace].strip() == "":
            depth = 0
            for i in range(brace, len(text)):
                depth += {"{": 1, "}": -1}.get(text[i], 0)
                if depth == 0:
                    return text[brace + 1 : i].strip()
        start = text.rfind("\\boxed", 0, start)
    return None


def _math_verify() -> Any:
    try:
        import math_verify
    except ImportError as exc:
        raise MissingDependency(
            "math answers are checked with math-verify: pip install 'math-verify[antlr4_9_3]==0.9.0' "
            "(the antlr4 4.9.3 runtime is the one omegaconf/verl already pin)"
        ) from exc
    return math_verify


class _Alarm(BaseException):
    """Raised by the alarm in a scorer process; not an ``Exception``, so math-verify's handlers let it through."""


def _under_alarm(seconds: float, fn: Any, *args: Any, **kwargs: Any) -> Any:
    def ring(_signum: int, _frame: Any) -> None:
        raise _Alarm

    previous = signal.signal(signal.SIGALRM, ring)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        return fn(*args, **kwargs)
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def _verify_in_worker(boxed: str, gold: str) -> tuple[bool | None, str]:
    """Runs in a scorer process: math-verify with its default 5 s parse and verify limits, as our own alarms.

    Returns ``(None, answer)`` when an alarm rang (math-verify would return a silent ``False``), so that the caller
    can log and mark the timeout; what no alarm can interrupt, the host kills.
    """
    mv = _math_verify()
    gold_parsed = mv.parse(f"${gold}$", parsing_timeout=None)
    if not gold_parsed:
        raise ValueError(f"math-verify cannot parse the reference answer {gold!r}")
    try:
        pred = _under_alarm(PARSE_TIMEOUT_S, mv.parse, f"$\\boxed{{{boxed}}}$", parsing_timeout=None)
        if not pred:
            return False, ""
        correct = _under_alarm(VERIFY_TIMEOUT_S, mv.verify, gold_parsed, pred, timeout_seconds=None)
    except _Alarm:
        return None, boxed[:200]
    return bool(correct), str(pred[-1])


@dataclass(frozen=True)
class MathVerdict:
    """``correct``; ``pred`` the parsed answer (``""`` if none); ``timed_out`` when the scorer was killed."""

    correct: bool
    pred: str
    timed_out: bool = False


def math_check(response: str, gold: str, timeout_s: float | None = None) -> MathVerdict:
    r"""Whether the last ``\boxed{}`` of ``response``'s visible text equals ``gold`` under math-verify.

    The gold answer is parsed as ``$gold$`` so that a bare ``204`` or ``\frac{1}{2}`` parses as math. A response
    without a complete box is wrong (a response cut off at the token limit has no final answer). A comparison that
    overruns math-verify's 5 s limits, or ``timeout_s`` (default :data:`MATH_TIMEOUT_S`) where no alarm can stop
    it, is logged, marked ``timed_out`` and counted wrong. An unparseable
    gold answer raises ``ValueError``.
    """
    timeout_s = MATH_TIMEOUT_S if timeout_s is None else timeout_s
    _math_verify()  # a missing package is the caller's error, not a wrong answer
    boxed = last_boxed(split_thinking(response)[0])
    if boxed is None:
        return MathVerdict(False, "")
    try:
        correct, pred = shared_pool(_MATH_PRELOAD).call(_verify_in_worker, boxed, gold, timeout_s=timeout_s)
        if correct is None:
            raise ScorerTimeout("math-verify's 5 s limit")
    except ScorerTimeout:
        log.warning("math-verify timed out on the answer %.200r (gold %r): counted wrong", boxed, gold)
        return MathVerdict(False, boxed[:200], timed_out=True)
    except ScorerRaised as exc:  # math-verify's own errors are the caller's (an unparseable gold answer)
        raise (exc.original if isinstance(exc.original, Exception) else exc) from None
    return MathVerdict(correct, pred)


def math_equal(response: str, gold: str) -> tuple[bool, str]:
    r"""``(correct, extracted answer)`` of :func:`math_check` (kept for callers of the old signature)."""
    verdict = math_check(response, gold)
    return verdict.correct, verdict.pred


def _letter_in_box(response: str, letters: str) -> str:
    boxed = last_boxed(response)
    if boxed is None:
        return ""
    inner = _SPACES.sub(" ", _WRAPPERS.sub(" ", boxed)).strip()
    hit = re.match(rf"([{letters}])(?:$|[ .:;,])", inner)
    return hit.group(1) if hit else ""


def choice_letter(response: str, letters: str = "ABCD") -> str:
    r"""The answer letter of a multiple-choice response, ``""`` if none (simple-evals' rule, see the module doc).

    1. simple-evals' own match, the first ``Answer: X`` (``Answer`` in any case); a lower-case letter is returned as
       written, so it never equals the gold letter, as in simple-evals.
    2. Where it finds none: the last line that starts with a wrapped answer, read after Markdown and LaTeX wrappers
       (``**``, ``\(...\)``, ``[X]``, ``\text{X}``) are removed, with ``:`` or a dash between spaces, and an
       upper-case letter standing alone (``**Answer** - a doublet`` is prose, not the letter ``a``).
    3. Else the letter of the last ``\boxed{}``.
    """
    visible = split_thinking(response)[0]
    strict = re.search(_STRICT.format(letters=letters), visible)
    if strict:
        return strict.group(1)
    widened = re.compile(_WIDENED.format(letters=letters))
    for line in reversed(visible.split("\n")):
        hit = widened.match(_SPACES.sub(" ", _WRAPPERS.sub(" ", line)).strip())
        if hit:
            return hit.group(1)
    return _letter_in_box(visible, letters)


def extract_code(response: str) -> str:
    """LiveCodeBench's rule: the lines between the last two lines that contain a fence; ``""`` if fewer than two."""
    lines = split_thinking(response)[0].split("\n")
    fences = [i for i, line in enumerate(lines) if "```" in line]
    if len(fences) < 2:
        return ""
    return "\n".join(lines[fences[-2] + 1 : fences[-1]])
