"""Post-process the privileged hint the policy writes for an environment, and check that it does not leak.

Regret compares hinted with unhinted play, so a hint must help by *approach*, not by handing over the answer: a
hint that contains the answer turns regret into a measure of copying. The hint writer sees only the env source,
never an instance, so a leak means the source hard-codes an answer or the hint states values it should have
written as placeholders. Both are caught by looking for literal tokens of the solution in the hint.

**Games** -- a hint leaks when it contains, as a standalone token (case-insensitive):

* a number of 2+ digits from any solution action (``predict 23``, ``enter 4821``; ``129,000`` in the hint
  matches ``129000``);
* the final answer -- the final action without its leading command word (``report 7`` -> ``7``; ``go Hollow``
  -> ``Hollow``; a single-digit answer leaks too), and a 3+ digit final answer spelled digit by digit
  (``4 8 2 1``, ``4-8-2-1``);
* a word or compound token of 2+ characters from the final action's answer part (``9K359W``, ``banjo=2``)
  that is neither a common English or command word nor visible in ``visible_text`` (pass the first observation:
  the player reads it anyway, so repeating its words gives nothing away).

A one-token final action (``drop``, ``north``) is indistinguishable from a command: it leaks only if it is
neither common nor visible. Intermediate actions other than their 2+ digit numbers (``inspect 1``, ``north``)
are approach, not answer. Blind spots: answers paraphrased in words (``banjo is in house two``), and the *order*
of otherwise visible moves.

**Tool use** -- a hint leaks when it contains a concrete value of the instance: an argument of a solution tool
call or an ``<answer>`` of the solution (:func:`tool_call_values`), or any of ``initial_values`` (ids, names,
amounts, dates from tool outputs). Values too generic to tell (numbers below 10, strings under 3 characters,
common words like ``done``) and values that appear in ``visible_text`` are skipped; pass the *tool interface*
(``json.dumps(env.tools())``) there, not the request, because tool-use hints must use placeholders such as
``<order_id>`` even for values the request states. Multi-word values match as whole phrases only.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from spade_envs.extract import split_thinking
from spade_envs.spec import SETTINGS
from spade_envs.tooluse import parse_agent_text

__all__ = ["HINT_WORD_LIMITS", "HintResult", "clean_hint", "hint_leaks", "tool_call_values", "vet_hint"]

#: Longest usable hint in words. Tool-use hints name phases with placeholders, which costs a few more words.
HINT_WORD_LIMITS: dict[str, int] = {"games": 100, "tool_use": 120}

#: Words too common to count as a leak: English function words, and command and answer words every game uses.
COMMON_WORDS = frozenset(
    """a an the and or but not no yes of to in on at by for from with as into onto off up down out over under is
    are was be it its this that these those then than there here all any each every some none null true false ok
    done answer submit enter report guess solve move go open close take drop use put set get pick pickup check
    look query ask say choose select play place wait pass skip next stop start end left right north south east
    west""".split()
)

_HINT_PREFIX = re.compile(r"^\s*[*_#>`\s]*hint\s*[*_]*\s*[:.\-]\s*[*_]*\s*", re.IGNORECASE)
_NUMBER = re.compile(r"(?<![\w.])-?\d+(?:\.\d+)?(?!\w|\.\d)")
_THOUSANDS = re.compile(r"(?<=\d),(?=\d{3}(?!\d))")
_PUNCT = "\"'`.,;:!?()[]{}<>"


@dataclass(frozen=True)
class HintResult:
    """A hint ready to append to a first observation, or why there is none.

    Attributes:
        hint: the cleaned hint, or ``None`` when it is unusable.
        failure: ``None``, ``"hint_failed"`` (empty or too long) or ``"hint_leak"`` (see
            :data:`spade_envs.failures.HINT_FAILURE_CODES`).
        reason: what was wrong, for logs; empty when the hint is usable.
    """

    hint: str | None
    failure: str | None = None
    reason: str = ""

    @property
    def ok(self) -> bool:
        return self.failure is None


def _check_setting(setting: str) -> None:
    if setting not in SETTINGS:
        raise ValueError(f"unknown setting {setting!r}; known: {', '.join(SETTINGS)}")


def clean_hint(text: str, setting: str) -> HintResult:
    """Strip thinking, whitespace and ``HINT:`` prefixes from the writer's reply; enforce the word limit."""
    _check_setting(setting)
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


def tool_call_values(solution_turns: Iterable[str]) -> set[str]:
    """Every argument value (nested ones included) of the ``<tool_call>`` blocks in ``solution_turns``, as text.

    The text of every ``<answer>`` is included too: the final reply is the most concrete value of all. Numbers are
    written plainly (``2000.0`` becomes ``"2000"``); booleans and nulls are left out (too generic to leak).
    """
    values: set[str] = set()

    def collect(value: Any) -> None:
        if isinstance(value, bool) or value is None:
            return
        if isinstance(value, int):
            values.add(str(value))
        elif isinstance(value, float):
            values.add(str(int(value)) if value.is_integer() else repr(value))
        elif isinstance(value, str):
            if value.strip():
                values.add(value.strip())
        elif isinstance(value, dict):
            for item in value.values():
                collect(item)
        elif isinstance(value, (list, tuple)):
            for item in value:
                collect(item)

    for turn in solution_turns:
        calls, answer, _ = parse_agent_text(turn)
        for _name, arguments in calls:
            if isinstance(arguments, str):
                try:
                    arguments = json.loads(arguments)
                except json.JSONDecodeError:
                    pass
            collect(arguments)
        if answer:
            collect(answer)
    return values


@dataclass
class _Terms:
    """What counts as a leak: numbers compared by value, strings matched as standalone tokens or phrases."""

    numbers: dict[Decimal, str]
    strings: dict[str, str]
    spelled: dict[str, str]

    def add_number(self, token: str, where: str) -> None:
        digits = token.lstrip("-")
        if len(digits) > 1 and digits[0] == "0" and "." not in digits:  # a code like "0946": match the text
            self.strings.setdefault(token, where)
        else:
            self.numbers.setdefault(Decimal(token), where)


def _numbers_in(text: str) -> list[str]:
    return _NUMBER.findall(_THOUSANDS.sub("", text))


def _digit_count(token: str) -> int:
    return sum(c.isdigit() for c in token)


def _contains_phrase(text: str, phrase: str) -> bool:
    """``phrase`` occurs in ``text`` as whole words, any whitespace between them, ignoring case."""
    body = r"\s+".join(re.escape(w) for w in phrase.split())
    return bool(body) and re.search(rf"(?<![A-Za-z0-9]){body}(?![A-Za-z0-9])", text, re.I) is not None


def _compound_pattern(token: str) -> str:
    """``banjo=2`` also matches ``banjo = 2``: runs of letters and digits, any joiners padded by optional spaces."""
    parts = re.findall(r"[A-Za-z0-9]+|[^A-Za-z0-9]+", token)
    return r"\s*".join(re.escape(p) for p in parts)


def _is_number(token: str) -> bool:
    return re.fullmatch(r"-?\d+(?:\.\d+)?", token) is not None


def _game_terms(actions: list[str], visible: str) -> _Terms:
    terms = _Terms({}, {}, {})
    seen = {w.lower() for w in visible.split()} | {w.lower() for w in re.findall(r"[A-Za-z0-9]+", visible)}
    seen = {w.strip(_PUNCT) for w in seen}
    for action in actions:
        for number in _numbers_in(action):
            if _digit_count(number) >= 2:
                terms.add_number(number, "a number in the solution")
    tokens = actions[-1].split() if actions else []
    if not tokens:
        return terms
    if len(tokens) > 1 and tokens[0].rstrip(":").isalpha():
        tokens = tokens[1:]
        answer = " ".join(tokens)
        if _is_number(answer):
            terms.add_number(answer, "the final answer")
        elif len(answer) >= 2 and answer.lower() not in COMMON_WORDS:
            terms.strings.setdefault(answer, "the final answer")
    for raw in tokens:
        token = raw.strip(_PUNCT)
        if _is_number(token):
            if len(tokens) == 1:
                terms.add_number(token, "the final answer")
            if _digit_count(token) >= 3 and "." not in token:
                digits = token.lstrip("-")
                terms.spelled[r"[\s,;/|\-]+".join(digits)] = token
        elif len(token) >= 2 and token.lower() not in COMMON_WORDS and token.lower() not in seen:
            terms.strings.setdefault(token, "the final action")
    return terms


def _tool_terms(values: set[str], visible: str) -> _Terms:
    terms = _Terms({}, {}, {})
    for value in sorted(values):
        if _is_number(value):
            if _digit_count(value) >= 2:
                terms.add_number(value, "a concrete value of the instance")
        elif len(value) >= 3 and value.lower() not in COMMON_WORDS and not _contains_phrase(visible, value):
            terms.strings.setdefault(value, "a concrete value of the instance")
    return terms


def hint_leaks(
    hint: str,
    setting: str,
    *,
    solution_actions: list[str] | None = None,
    initial_values: Iterable[str] | None = None,
    visible_text: str | None = None,
) -> str | None:
    """Return why ``hint`` leaks the solution (see the module docstring for the rules), or ``None`` if it does not.

    Args:
        hint: the cleaned hint.
        setting: ``"games"`` or ``"tool_use"``.
        solution_actions: ``solution()`` of the instance the hint is checked against (games: commands; tool use:
            raw turns, whose call arguments and answers become values).
        initial_values: tool use: further concrete values of the instance (ids, names, amounts from tool outputs).
        visible_text: text whose words the hint may repeat: games, the first observation; tool use, the tools'
            schemas.

    Raises:
        ValueError: for an unknown setting, or nothing to compare with (games need ``solution_actions``).
    """
    _check_setting(setting)
    actions = list(solution_actions or [])
    if not actions and (setting == "games" or not initial_values):
        needed = "solution_actions" if setting == "games" else "solution_actions or initial_values"
        raise ValueError(f"a {setting} leak check needs {needed} to compare the hint with")
    visible = visible_text or ""
    if setting == "games":
        terms = _game_terms(actions, visible)
    else:
        terms = _tool_terms(tool_call_values(actions) | {str(v).strip() for v in initial_values or ()}, visible)
    for number in _numbers_in(hint):
        if Decimal(number) in terms.numbers:
            return f"the hint contains {number!r}, {terms.numbers[Decimal(number)]}"
    for string, where in terms.strings.items():
        pattern = _compound_pattern(string) if len(string.split()) == 1 else None
        found = re.search(rf"(?<![A-Za-z0-9]){pattern}(?![A-Za-z0-9])", hint, re.I) if pattern else None
        if found or (pattern is None and _contains_phrase(hint, string)):
            return f"the hint contains {string!r}, {where}"
    for pattern, answer in terms.spelled.items():
        if re.search(rf"(?<!\d){pattern}(?!\d)", hint):
            return f"the hint spells out the final answer {answer!r} digit by digit"
    return None


def vet_hint(
    text: str,
    setting: str,
    *,
    solution_actions: list[str] | None = None,
    initial_values: Iterable[str] | None = None,
    visible_text: str | None = None,
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
    )
    return result if leak is None else HintResult(None, "hint_leak", leak)
