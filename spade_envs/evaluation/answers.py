"""Pull the final answer out of a model's response and compare it with the reference.

Math answers go through ``math-verify`` (it parses LaTeX and plain expressions and compares them symbolically);
its own timeouts use ``signal.alarm``, which only works on the main thread, so they are disabled here: the runner
calls these from worker threads.
"""

from __future__ import annotations

import logging
import re
from typing import Any

from spade_envs.evaluation.suite import MissingDependency

__all__ = ["choice_letter", "extract_code", "last_boxed", "math_equal"]

_LETTER = re.compile(r"(?i)answer\s*(?:is)?\s*[:：]?\s*\**\s*\(?\$?\s*(?:\\text\{)?\s*([A-J])\b")
_BOXED_LETTER = re.compile(r"\\boxed\{\s*(?:\\text\{)?\s*\(?([A-J])\)?\s*\}?\s*\}")
_FENCE = re.compile(r"```[ \t]*([A-Za-z0-9_+-]*)[^\n]*\n(.*?)```", re.DOTALL)


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
    logging.getLogger("math_verify").setLevel(logging.ERROR)  # it warns once that we disabled its alarm timeouts
    return math_verify


def math_equal(response: str, gold: str) -> tuple[bool, str]:
    r"""Whether ``response``'s final answer equals ``gold`` (math-verify), and the answer it extracted.

    The gold answer is parsed as ``$gold$`` so that a bare ``204`` or ``\frac{1}{2}`` parses as math.
    """
    mv = _math_verify()
    gold_parsed = mv.parse(f"${gold}$", parsing_timeout=None)
    if not gold_parsed:
        raise ValueError(f"math-verify cannot parse the reference answer {gold!r}")
    boxed = last_boxed(response)
    pred = mv.parse(f"$\\boxed{{{boxed}}}$" if boxed is not None else response, parsing_timeout=None)
    if not pred:
        return False, ""
    return bool(mv.verify(gold_parsed, pred, timeout_seconds=None)), str(pred[-1])


def choice_letter(response: str, letters: str = "ABCD") -> str:
    r"""The last ``Answer: X`` (or ``\boxed{X}``) letter in ``response`` among ``letters``; ``""`` if none."""
    hits = [(m.start(), m.group(1).upper()) for pattern in (_LETTER, _BOXED_LETTER) for m in pattern.finditer(response)]
    found = sorted(hit for hit in hits if hit[1] in letters)
    return found[-1][1] if found else ""


def extract_code(response: str) -> str:
    """The last fenced code block (a ``python`` one preferred) of ``response``; ``""`` if there is none."""
    blocks = _FENCE.findall(response)
    python = [body for lang, body in blocks if lang.lower() in ("python", "python3", "py")]
    chosen = python or [body for _lang, body in blocks]
    return chosen[-1] if chosen else ""
