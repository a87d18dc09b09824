"""Does a privileged hint leak the instance? The leak check of the hint phase, measured as a classifier.

Regret compares hinted with unhinted play, so a hint must help by *approach*, not by handing over what the player
would otherwise learn only by playing: a hint that contains the answer turns regret into a measure of copying.
``docs/designer.md`` ("What a leak is") states the rules and their measured precision and recall on a labelled
set of cases (``tests/spade_envs/data/leak_cases.json``); this module implements exactly those rules.

Values are compared as **token sequences** and a hint names a value in any of its readings (digits, numbers and
ordinals in words, percentages and cents, digit by digit, letter by letter): :mod:`spade_envs.design.hint_reading`.

**Games** (the player sees the first observation; ``other_solutions`` are the solutions of the other vetted seeds,
which tell instance values from constants of the game):

1. *the final answer* -- what the last answer-bearing action submits (``report 7`` -> ``7``; ``set Crimson``
   before a closing ``submit`` -> ``Crimson``; a bare ``Brennan`` or ``3 4``) leaks, unless it is the same on
   every vetted seed *and* shown in the observation (part of the setting: ``unlock door``), or it is also the
   argument of an earlier move every seed makes (``open 2`` before ``report 2``: the hint may name curtain 2), or
   it is shown and the hint names the answers of the other seeds too (listing every suspect singles none out);
2. *hidden instance values* -- any other value of the solution (a number of 2+ digits, a word of 2+ characters
   that is not a common or command word, a compound such as ``banjo=2``) leaks when it is not shown in the
   observation and not the same on every vetted seed (the first guess ``50`` of every binary search is approach);
3. *the move sequence* -- four or more consecutive moves of a solution that differs between seeds.

A one-token final move (``drop``, ``north``) is a move, not an answer. Blind spots: answers paraphrased in words
(``banjo is in house two``) and partial information (one digit of four).

**Tool use** (the player sees the request and the tool interface): any concrete value of the instance leaks --
an argument of a solution tool call, the final answer, a number or a name inside an answer sentence
(``The balance is $1,234.56``), the number inside an id (``5512`` of ``ORD-5512``), the file name of a path, or
any of ``initial_values`` -- unless it is too generic to tell (a number below
10, a string under 3 characters, a common word) or shown in the tool interface (pass ``json.dumps(env.tools())``
as ``visible_text``; not the request: tool-use hints must use placeholders such as ``<order_id>`` even for values
the request states).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from spade_envs.design.hint_reading import HintReading, Seq, contains, hint_says, is_number, tokens, unfilled
from spade_envs.envs.spec import SETTINGS
from spade_envs.envs.tooluse import parse_agent_text

__all__ = [
    "COMMON_WORDS",
    "check_setting",
    "classify_case",
    "hint_leaks",
    "hint_says",
    "leak_check_scores",
    "named_values",
    "tokens",
    "tool_call_values",
]

#: Words too common to count as a leak: English function words, and command and answer words every game uses.
COMMON_WORDS = frozenset(
    """a an the and or but not no yes of to in on at by for from with as into onto off up down out over under is
    are was be it its this that these those then than there here all any each every some none null true false ok
    done answer submit enter report guess solve move go open close take drop use put set get pick pickup check
    look query ask say choose select play place wait pass skip next stop start end left right north south east
    west""".split()
)
#: Single-word actions that close an episode without carrying the answer themselves (the answer is before).
FINISH_WORDS = frozenset({"submit", "done", "confirm", "finish", "end", "ok", "yes", "send", "check", "answer"})
SEQUENCE_MOVES = 4
_PUNCT = "\"'`.,;:!?()[]{}<>"


def check_setting(setting: str) -> None:
    """``ValueError`` naming the settings unless ``setting`` is one of them."""
    if setting not in SETTINGS:
        raise ValueError(f"unknown setting {setting!r}; known: {', '.join(SETTINGS)}")


def _digits(seq: Seq) -> int:
    return sum(c.isdigit() for c in "".join(seq))


def _words(action: str) -> list[str]:
    return [w for w in (w.strip(_PUNCT) for w in action.split()) if w]


def _arguments(action: str) -> list[str]:
    """The words of an action after its command word (``enter: 4821`` -> ``["4821"]``); a one-word action itself."""
    words = _words(action)
    if len(words) > 1 and words[0].rstrip(":").isalpha():
        return words[1:]
    return words


def _final_answer(actions: Sequence[str]) -> Seq | None:
    """What the last answer-bearing action submits, or ``None`` when the solution ends with a move."""
    for action in reversed(actions):
        words = _words(action)
        if not words:
            continue
        if len(words) == 1 and words[0].lower() in FINISH_WORDS:
            continue  # "submit": the answer was set by the action before
        if len(words) == 1 and words[0].lower() in COMMON_WORDS:
            return None  # a final move such as "drop" or "north"
        answer = tokens(" ".join(_arguments(action)))
        return answer if any(t not in COMMON_WORDS for t in answer) else None
    return None


def _values(actions: Sequence[str]) -> set[Seq]:
    """Every value an action carries: numbers of 2+ digits, uncommon words, compounds (``banjo=2``)."""
    out: set[Seq] = set()
    for action in actions:
        for word in _arguments(action):
            seq = tokens(word)
            if not seq:
                continue
            if len(seq) == 1:
                t = seq[0]
                if (t[0].isdigit() and _digits(seq) >= 2) or (not t[0].isdigit() and len(t) >= 2
                                                              and t not in COMMON_WORDS):  # fmt: skip
                    out.add(seq)
            elif _digits(seq) >= 2 or any(len(t) >= 2 and t not in COMMON_WORDS for t in seq):
                out.add(seq)
    return out


def _moves(actions: Sequence[str]) -> list[Seq]:
    return [tokens(" ".join(_arguments(a))) for a in actions if _words(a)]


def _windows(moves: list[Seq]) -> set[tuple[Seq, ...]]:
    """Every run of :data:`SEQUENCE_MOVES` consecutive moves."""
    return {tuple(moves[i : i + SEQUENCE_MOVES]) for i in range(len(moves) - SEQUENCE_MOVES + 1)}


def _game_leak(hint: HintReading, actions: list[str], visible: Seq, others: list[list[str]] | None) -> str | None:
    visible_set = set(visible)

    def shown(value: Seq) -> bool:
        return value[0] in visible_set if len(value) == 1 else contains(visible, value)

    answer = _final_answer(actions)
    if answer is not None and hint.says(answer):
        other_answers = [_final_answer(o) for o in others] if others is not None else []
        setting = others is not None and all(a == answer for a in other_answers) and shown(answer)
        steps = set.intersection(*({tokens(" ".join(_arguments(a))) for a in s[:-1]} for s in [actions, *others])) \
            if others is not None else set()  # fmt: skip
        names_all = shown(answer) and bool(other_answers) and all(a is None or hint.says(a) for a in other_answers)
        if not (setting or (answer in steps and not shown(answer)) or names_all):
            return f"the hint contains {' '.join(answer)!r}, the final answer"
    other_values = [_values(o) for o in others] if others is not None else None
    for value in sorted(_values(actions)):
        if shown(value) or (other_values is not None and all(value in v for v in other_values)):
            continue
        if hint.says(value):
            return f"the hint contains {' '.join(value)!r}, a hidden value of this instance"
    moves = _moves(actions)
    # a window of moves that every other vetted seed's solution also holds is the env's procedure, not this
    # instance's answer (VaultCodeEnv: "inspect 1 .. inspect 4" on every seed): only windows that differ are flagged
    shared = set.intersection(*(_windows(_moves(o)) for o in others)) if others else set()
    if len(moves) >= SEQUENCE_MOVES:
        for i in range(len(moves) - SEQUENCE_MOVES + 1):
            window = tuple(moves[i : i + SEQUENCE_MOVES])
            run = tuple(t for m in window for t in m)
            if window in shared:
                continue
            if run and contains(hint.bare, unfilled(run)):
                return f"the hint spells out {SEQUENCE_MOVES} consecutive moves of the solution: {' '.join(run)!r}"
    return None


def named_values(hint: str, action: str, visible: str | None = None) -> list[Seq]:
    """Values ``action`` carries that ``hint`` names, constants and shown values included.

    Carried values: its answer, numbers and uncommon words; the candidates :mod:`spade_envs.design.leak_replay` replays.
    """
    h = HintReading(hint, visible)
    carried = _values([action]) | ({a} if (a := _final_answer([action])) else set())
    return sorted(v for v in carried if h.says(v))


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


_NAME_RUN = re.compile(r"(?<!^)(?<![.!?]\s)\b[A-Z][a-z]+(?:\s+[A-Z][a-z]+)*")
_MIXED = re.compile(r"\b(?=[\w\-./]*\d)(?=[\w\-./]*[A-Za-z])[\w\-./]{3,}\b")


def _sentence_parts(value: str) -> set[str]:
    """Inside a sentence-long value: its numbers, ids mixing letters and digits, and capitalised names."""
    if len(value.split()) < 4:
        return set()
    parts = set(re.findall(r"\d[\d,]*(?:\.\d+)?", value))
    parts |= set(_MIXED.findall(value))
    parts |= set(_NAME_RUN.findall(value.strip()))
    return parts


def _tool_leak(hint: HintReading, values: set[str], visible: Seq) -> str | None:
    derived: set[str] = set()
    for value in values:
        derived |= _sentence_parts(value)
        if "/" in value.strip("/"):
            derived.add(value.rstrip("/").rsplit("/", 1)[-1])  # a path's file name
        derived |= {t for t in re.findall(r"\d{3,}", value) if t != value}  # an id's number: ORD-5512 -> 5512
    for value in [*sorted(values), *sorted(derived - values)]:  # whole values first: they name the leak best
        seq = tokens(value)
        if not seq:
            continue
        if is_number(seq):
            if "." not in seq[0] and _digits(seq) < 2:
                continue
        elif len(value.strip()) < 3 or value.strip().lower() in COMMON_WORDS:
            continue
        if contains(visible, seq):
            continue
        if hint.says(seq):
            return f"the hint contains {value!r}, a concrete value of the instance"
    return None


def hint_leaks(
    hint: str,
    setting: str,
    *,
    solution_actions: list[str] | None = None,
    initial_values: Iterable[str] | None = None,
    visible_text: str | None = None,
    other_solutions: Sequence[Sequence[str]] | None = None,
) -> str | None:
    """Return why ``hint`` leaks the instance (rules: module docstring), or ``None`` if it does not.

    Args:
        hint: the cleaned hint.
        setting: ``"games"`` or ``"tool_use"``.
        solution_actions: ``solution()`` of the instance the hint is checked against (games: commands; tool use:
            raw turns, whose call arguments and answers become values).
        initial_values: tool use: further concrete values of the instance (ids, names, amounts from tool outputs).
        visible_text: what the player may see anyway: games, the first observation; tool use, the tools' schemas.
        other_solutions: games: ``solution()`` on the other vetted seeds. Without them every value counts as
            instance-specific (a constant first move or a constant visible answer is then flagged too).

    Raises:
        ValueError: for an unknown setting, or nothing to compare with (games need ``solution_actions``).
    """
    check_setting(setting)
    actions = list(solution_actions or [])
    if not actions and (setting == "games" or not initial_values):
        needed = "solution_actions" if setting == "games" else "solution_actions or initial_values"
        raise ValueError(f"a {setting} leak check needs {needed} to compare the hint with")
    parsed, visible = HintReading(hint, visible_text), tokens(visible_text or "")
    if setting == "games":
        others = [list(o) for o in other_solutions] if other_solutions else None  # none: nothing is a constant
        return _game_leak(parsed, actions, visible, others)
    values = tool_call_values(actions) | {str(v).strip() for v in initial_values or () if str(v).strip()}
    return _tool_leak(parsed, values, visible)


def classify_case(case: dict[str, Any]) -> str | None:
    """Run the check as hint vetting does on a labelled case (``tests/spade_envs/data/leak_cases.json``).

    The hint is flagged when it leaks on any of the case's instances; for games the other instances are passed
    as ``other_solutions``, for tool use ``tools`` is the visible interface.
    """
    instances = case["instances"]
    for i, instance in enumerate(instances):
        if case["setting"] == "games":
            others = [other["solution"] for j, other in enumerate(instances) if j != i]
            why = hint_leaks(case["hint"], "games", solution_actions=instance["solution"],
                             visible_text=instance["observation"], other_solutions=others)  # fmt: skip
        else:
            why = hint_leaks(case["hint"], "tool_use", solution_actions=instance["solution"],
                             initial_values=instance.get("initial_values"), visible_text=case["tools"])  # fmt: skip
        if why is not None:
            return why
    return None


def leak_check_scores(
    cases: Iterable[dict[str, Any]], classify: Callable[[dict[str, Any]], str | None] = classify_case
) -> dict[str, Any]:
    """Precision and recall of ``classify`` on labelled cases, overall and per setting, with the misclassified ids."""
    out: dict[str, Any] = {}
    tallies: dict[str, dict[str, Any]] = {}
    for case in cases:
        flagged = classify(case) is not None
        for key in ("all", case["setting"]):
            t = tallies.setdefault(key, {"tp": 0, "fp": 0, "fn": 0, "tn": 0, "missed": [], "false_alarms": []})
            kind = ("tp" if flagged else "fn") if case["leak"] else ("fp" if flagged else "tn")
            t[kind] += 1
            if kind == "fn":
                t["missed"].append(case["id"])
            elif kind == "fp":
                t["false_alarms"].append(case["id"])
    for key, t in tallies.items():
        t["precision"] = t["tp"] / (t["tp"] + t["fp"]) if t["tp"] + t["fp"] else 1.0
        t["recall"] = t["tp"] / (t["tp"] + t["fn"]) if t["tp"] + t["fn"] else 1.0
        t["cases"] = t["tp"] + t["fp"] + t["fn"] + t["tn"]
        out[key] = t
    return out
