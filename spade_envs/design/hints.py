"""Post-process the privileged hint the policy writes for an environment, and check that it does not leak.

The hint writer sees only the env source, never an instance. :func:`clean_hint` turns its reply into a hint
(thinking, prefixes and whitespace removed, a word limit per setting); :func:`vet_hint` then asks
:func:`spade_envs.design.leaks.hint_leaks` whether the hint gives away the instance it will be shown on. What counts as
a leak, and how well the check finds leaks, is in :mod:`spade_envs.design.leaks` and ``docs/designer.md``.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from spade_envs.design.extract import split_thinking
from spade_envs.design.leaks import COMMON_WORDS, check_setting, hint_leaks, tool_call_values

__all__ = ["COMMON_WORDS", "HINT_WORD_LIMITS", "HintResult", "clean_hint", "hint_leaks", "tool_call_values", "vet_hint"]

#: Longest usable hint in words. Tool-use hints name phases with placeholders, which costs a few more words.
HINT_WORD_LIMITS: dict[str, int] = {"games": 100, "tool_use": 120}

_HINT_PREFIX = re.compile(r"^\s*[*_#>`\s]*hint\s*[*_]*\s*[:.\-]\s*[*_]*\s*", re.IGNORECASE)


@dataclass(frozen=True)
class HintResult:
    """A hint ready to append to a first observation, or why there is none.

    Attributes:
        hint: the cleaned hint, or ``None`` when it is unusable.
        failure: ``None``, ``"hint_failed"`` (empty or too long) or ``"hint_leak"`` (see
            :data:`spade_envs.envs.failures.HINT_FAILURE_CODES`).
        reason: what was wrong, for logs; empty when the hint is usable.
    """

    hint: str | None
    failure: str | None = None
    reason: str = ""

    @property
    def ok(self) -> bool:
        return self.failure is None


def clean_hint(text: str, setting: str) -> HintResult:
    """Strip thinking, whitespace and ``HINT:`` prefixes from the writer's reply; enforce the word limit."""
    check_setting(setting)
    visible, _ = split_thinking(text)
    hint = " ".join(visible.split())
    while (stripped := _HINT_PREFIX.sub("", hint, count=1)) != hint:
        hint = stripped
    if not hint:
        return HintResult(None, "hint_failed", "the reply holds no hint outside <think>")
    words, limit = len(hint.split()), HINT_WORD_LIMITS[setting]
    if words > limit:
        return HintResult(None, "hint_failed", f"the hint has {words} words; the limit is {limit}")
    return HintResult(hint)


def vet_hint(
    text: str,
    setting: str,
    *,
    solution_actions: list[str] | None = None,
    initial_values: Iterable[str] | None = None,
    visible_text: str | None = None,
    other_solutions: Sequence[Sequence[str]] | None = None,
) -> HintResult:
    """:func:`clean_hint`, then :func:`hint_leaks` on the result: the one call the hint phase needs."""
    result = clean_hint(text, setting)
    if result.hint is None:
        return result
    leak = hint_leaks(
        result.hint,
        setting,
        solution_actions=solution_actions,
        initial_values=initial_values,
        visible_text=visible_text,
        other_solutions=other_solutions,
    )
    return result if leak is None else HintResult(None, "hint_leak", leak)
