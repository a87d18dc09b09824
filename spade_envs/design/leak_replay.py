"""The leak check that replays: a hint leaks when it names a value the solution cannot do without.

The token rules of :mod:`spade_envs.design.leaks` compare the hint with the solution's text and exempt values that are
the
same on every vetted seed (games) or shown in the tool interface or too small to tell (tool use), so a designer
could make the answer a constant (a fixed password for a middle move, a fixed answer among 25 distractors, a
recipient listed in a tool's ``enum``) and have the hint name it. Here nothing is exempt; instead each value a
solution move carries that the hint names (in any reading: :mod:`spade_envs.design.hint_reading`) is *replayed*: the
solution is played from ``reset`` with that value swapped for another of the same shape, and if it then no longer
wins, the value is what the env wanted found, and the hint handed it over, even when the env shows it among
distractors. Values the solution does not need (``inspect 1`` when inspecting is optional, the id of a look-up whose
result the replay never reads) are approach.

Games swap a token of a command, found as the env reads it (fullwidth ``４８２１`` is ``4821``: :func:`replay_leak`);
tool use swaps one number or name (a capitalised word) of one ``<tool_call>``'s arguments, or of the ``<answer>``
(:func:`replay_tool_leak`). A number the hint names whole also names its parts split over consecutive numbers of the
solution (``4821``: ``48`` and ``21``, or ``4, 8, 2, 1``; arguments of one call, calls of one or two turns, game
moves), and cents are named as dollars (``$12.50``: ``1250``). Every replay is an episode in the sandboxed ``env``:
generated code never runs in this process.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator
from typing import Any

from spade_envs.design.hint_reading import Seq, hint_says, tokens
from spade_envs.design.leaks import COMMON_WORDS, named_values
from spade_envs.envs.episode import play, solution_policy
from spade_envs.sandbox.client import RemoteEnv

__all__ = ["replay_leak", "replay_tool_leak", "swapped", "tool_variants"]

_NUMBER = re.compile(r"(?<!\d)(?<!\d[.,])(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?(?!\d)")
_WORD = re.compile(r"[^\W\d_]+")
# found apart, as the env's parser finds them (spade_envs.envs.tooluse.parse_agent_text): a call inside an answer is a
# call
_CALL = re.compile(r"<tool_call>(.*?)</tool_call>", re.DOTALL)
_ANSWER = re.compile(r"<answer>(.*?)</answer>", re.DOTALL)
#: A value split over consecutive numbers (``48`` and ``21``, or ``4, 8, 2, 1``; in one call, across calls or moves):
#: at most this many parts.
_SPLIT_PARTS = 8
#: Replays one seed may cost. A hint that names more of what the solution carries (a designer's list of thousands
#: of digits, each a replayed episode) is flagged rather than played: no honest hint names that many values.
MAX_REPLAYS = 64
_TOO_MANY = (f"the hint names more than {MAX_REPLAYS} values the solution carries (each would be replayed); "
             "a hint names approach, not values")  # fmt: skip


def _replay_turns(max_turns: int | None, actions: list[str]) -> int:
    """The turn limit of a replay: the caller's cap, else the solution's length and one more turn.

    The unswapped solution wins within its own moves; a swapped one that has not won by then has lost, however large
    the env's declared ``max_turns`` (a hostile env never ends the episode after a wrong value).
    """
    own = len(actions) + 1
    return own if max_turns is None else min(max_turns, own)


def _other_digits(text: str) -> str:
    return "".join(str((int(c) + 5) % 10) if c.isdecimal() else c for c in text)


#: A token of a move as the env reads it: a number (thousands commas, any script's digits) or a run of letters.
_SPAN = re.compile(r"\d{1,3}(?:,\d{3})+(?:\.\d+)?|\d+(?:\.\d+)?|[^\W\d_]+")


def swapped(action: str, value: Seq) -> str | None:
    """``action`` with the first token of ``value`` replaced by another of the same shape, or ``None`` if absent.

    The token is found as :func:`~spade_envs.design.hint_reading.tokens` reads the action, so a move written in another
    script (fullwidth ``４８２１``, Arabic-Indic digits, fullwidth letters an env's NFKC reads) is swapped too.
    """
    token = value[0]
    for m in _SPAN.finditer(action):
        if tokens(m.group()) == (token,):
            other = _other_digits(m.group()) if m.group()[0].isdecimal() else "q" * max(2, len(token))
            return action[: m.start()] + other + action[m.end() :]
    return None


def _split_parts(leaves: list[str], says: Callable[[Seq], bool]) -> set[Seq]:
    """Number leaves (in solution order) that are parts of a number ``says`` names whole (``4821``: ``48``, ``21``)."""
    parts: set[Seq] = set()
    for i in range(len(leaves)):
        for j in range(i + 2, min(i + _SPLIT_PARTS, len(leaves)) + 1):
            whole = "".join(leaves[i:j])
            if len(whole) >= 3 and says(tokens(whole)):
                parts.update(tokens(leaf) for leaf in leaves[i:j])
    return parts


def _move_numbers(action: str) -> list[str]:
    return [t for t in tokens(action) if t.isdigit()]


def replay_leak(
    env: RemoteEnv, hint: str, seed: int, actions: list[str], max_turns: int | None, visible: str | None = None
) -> str | None:
    """Why ``hint`` leaks on ``seed`` (the solution ``actions`` needs a value the hint names), or ``None``.

    Each candidate value costs one episode in ``env``. ``visible``: the first observation (ordinals count its things).
    """
    replays, limit = 0, _replay_turns(max_turns, actions)
    parts = _split_parts([n for a in actions for n in _move_numbers(a)], hint_says(hint, visible))  # dial 48, dial 21
    for i, action in enumerate(actions):
        split = {(n,) for n in _move_numbers(action)} & parts
        for value in sorted(set(named_values(hint, action, visible)) | split):
            changed = swapped(action, value)
            if changed is None or changed == action:
                continue
            replays += 1
            if replays > MAX_REPLAYS:
                return _TOO_MANY
            trial = [*actions[:i], changed, *actions[i + 1 :]]
            if not play(env, solution_policy(trial, "games"), seed, limit, setting="games").won:
                return (f"the hint names {' '.join(value)!r}, which move {i + 1} of the solution needs (replayed with "
                        "another value, the solution no longer wins)")  # fmt: skip
    return None


def _text_swaps(
    text: str, says: Callable[[Seq], bool], kind: frozenset[str] = frozenset()
) -> Iterator[tuple[str, str]]:
    """``(named part, text with it swapped)`` for each number (any size) or name of ``text`` the hint says.

    Names are capitalised words (``Northwind``, ``Oslo``, ``Priya``); a lower-case word (``state``, ``brightness``,
    ``exchange``) is the vocabulary of the interface, which honest hints use to say what to look at, and is left to
    the token rules. In a value of several tokens, a word of its parameter's name (``kind``) is the value's kind,
    not the value: ``bay`` of ``bay="Bay 14"`` (the hint "check each bay" names no bay; ``14`` is still swapped).
    """
    for m in _NUMBER.finditer(text):
        raw = m.group()
        if says(tokens(raw)):
            yield raw, text[: m.start()] + _other_digits(raw) + text[m.end() :]
    skip = COMMON_WORDS | kind if len(tokens(text)) > 1 else COMMON_WORDS
    names = {w.lower() for w in _WORD.findall(text) if w[0].isupper() and len(w) >= 2}
    for word in sorted(names - skip):
        if says(tokens(word)):
            pattern = re.compile(rf"(?<![A-Za-z0-9]){re.escape(word)}(?![A-Za-z0-9])", re.IGNORECASE)
            yield word, pattern.sub("q" * max(3, len(word)), text)


def _leaf_swaps(
    value: Any, says: Callable[[Seq], bool], kind: frozenset[str] = frozenset()
) -> Iterator[tuple[str, Any]]:
    """``(named part, value with it swapped)`` for every leaf of a call's arguments the hint names."""
    if isinstance(value, bool) or value is None:
        return
    if isinstance(value, (int, float)):
        text = str(int(value)) if isinstance(value, float) and value.is_integer() else str(value)
        cents = isinstance(value, int) and value >= 100 and value % 100  # 1250 cents: the hint's "$12.50"
        if says(tokens(text)) or (cents and says(tokens(f"{value // 100}.{value % 100:02d}"))):
            other = _other_digits(text)
            yield text, int(other) if isinstance(value, int) else float(other)
    elif isinstance(value, str):
        yield from _text_swaps(value, says, kind)
    elif isinstance(value, dict):
        for key, item in value.items():
            for part, changed in _leaf_swaps(item, says, frozenset(tokens(str(key)))):
                yield part, {**value, key: changed}
    elif isinstance(value, list):
        for i, item in enumerate(value):
            for part, changed in _leaf_swaps(item, says, kind):
                yield part, [*value[:i], changed, *value[i + 1 :]]


def _number_leaves(value: Any) -> Iterator[str]:
    """The digits of each whole-number leaf of a call's arguments (ints and digit strings), in order."""
    if isinstance(value, bool):
        return
    if isinstance(value, int):
        if 0 <= value < 10**_SPLIT_PARTS:
            yield str(value)
    elif isinstance(value, str):
        if value.strip().isdecimal() and len(value.strip()) <= _SPLIT_PARTS:
            yield value.strip()
    elif isinstance(value, dict):
        for item in value.values():
            yield from _number_leaves(item)
    elif isinstance(value, list):
        for item in value:
            yield from _number_leaves(item)


def _calls(turn: str) -> Iterator[tuple[re.Match[str], dict[str, Any] | None]]:
    """Each ``<answer>`` (with ``None``) and each ``<tool_call>`` (with its parsed JSON object) of ``turn``, in order.

    A tool call whose JSON does not parse, or is no object, is left out (the env rejects it anyway).
    """
    for m in sorted([*_ANSWER.finditer(turn), *_CALL.finditer(turn)], key=lambda m: m.start()):
        if m.re is _ANSWER:
            yield m, None
            continue
        try:
            call = json.loads(m.group(1))
        except json.JSONDecodeError:
            continue
        if isinstance(call, dict):
            yield m, call


def _split_says(says: Callable[[Seq], bool], turns: list[str]) -> Callable[[Seq], bool]:
    """``says``, also true of the parts of a number the hint names whole, over every call of ``turns`` in order.

    ``4821`` names ``48`` and ``21`` whether they are two arguments of one call or two calls (one turn or two).
    """
    leaves = [leaf for t in turns for _, call in _calls(t) if call is not None
              for leaf in _number_leaves(call.get("arguments"))]  # fmt: skip
    parts = _split_parts(leaves, says)
    return (lambda value: value in parts or says(value)) if parts else says


def tool_variants(hint: str, turn: str, solution: list[str] | None = None) -> Iterator[tuple[str, str]]:
    """``(named part, turn with it swapped)``: each argument value or answer part of ``turn`` that ``hint`` names.

    ``solution`` (all turns; default ``[turn]``) is where a number the hint names whole may be split across calls.
    """
    plain = hint_says(hint)
    return _variants(turn, plain, _split_says(plain, solution if solution is not None else [turn]))


def _variants(turn: str, plain: Callable[[Seq], bool], says: Callable[[Seq], bool]) -> Iterator[tuple[str, str]]:
    """:func:`tool_variants` with the hint's readings ready (``says`` also names the split parts of numbers)."""
    for m, call in _calls(turn):
        head, tail = turn[: m.start()], turn[m.end() :]
        if call is None:
            for part, changed in _text_swaps(m.group(1), plain):
                yield part, f"{head}<answer>{changed}</answer>{tail}"
            continue
        for part, arguments in _leaf_swaps(call.get("arguments"), says):
            yield part, f"{head}<tool_call>{json.dumps({**call, 'arguments': arguments})}</tool_call>{tail}"


def replay_tool_leak(
    env: RemoteEnv, hint: str, seed: int, turns: list[str], max_turns: int | None, visible: str | None = None
) -> str | None:
    """Why ``hint`` leaks on ``seed`` (a tool-use solution's ``turns`` need a value it names), or ``None``.

    Each candidate costs one episode in ``env``, played in training's call order (``tools()`` after ``reset``).
    ``visible``: the request and the tool interface (ordinals in the hint count their things).
    """
    replays, limit = 0, _replay_turns(max_turns, turns)
    plain = hint_says(hint, visible)
    says = _split_says(plain, turns)  # once: a number may be split across the calls of every turn
    for i, turn in enumerate(turns):
        for part, changed in _variants(turn, plain, says):
            if changed == turn:
                continue
            replays += 1
            if replays > MAX_REPLAYS:
                return _TOO_MANY
            trial = [*turns[:i], changed, *turns[i + 1 :]]
            result = play(env, solution_policy(trial, "tool_use"), seed, limit, setting="tool_use",
                          after_reset=env.tools)  # fmt: skip
            if not result.won:
                return (f"the hint names {part!r}, which turn {i + 1} of the solution needs (replayed with another "
                        "value, the solution no longer wins)")  # fmt: skip
    return None
