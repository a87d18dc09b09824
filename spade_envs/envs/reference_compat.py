r"""Compatibility mode for games written to the SPADE reference's contract (notes/spade-reference.md §1, §10).

:func:`wrap_reference_game` turns one reference-style ``game_*.py`` into ordinary SPADE env source: the game's code
is embedded as a string and executed *inside the sandbox worker*, never on the host, so the mode adds no path out
of the sandbox (the names it pre-seeds are pure stdlib modules and numpy; no ``os``, ``sys`` or ``subprocess``).

What the mode does, and the rules it picks where the reference is loose:

* **namespace**: the game runs in a fresh module pre-seeded, as the reference's loader does, with ``itertools``,
  ``math``, ``random``, ``re``, ``json``, ``collections``, ``functools``, ``string``, ``copy``, ``heapq``,
  ``operator``, ``statistics``, ``np``/``numpy``, ``deque``, ``defaultdict``, ``Counter``, ``OrderedDict``,
  ``namedtuple``, ``combinations``, ``permutations``, ``product``, ``chain``, ``accumulate``, ``reduce``,
  ``lru_cache``, ``deepcopy``, ``heappush``, ``heappop`` and the ``typing`` aliases (``List``, ``Dict``, ...).
* **class**: the first class defined in the game whose name ends in ``Env`` and that has callable ``reset`` and
  ``step``, skipping a class that another such class derives from (a ``BaseEnv`` helper never wins). It is built
  with no arguments (else ``max_turns=cap``); its own ``max_turns`` is kept, capped at the run's turn cap.
* **actions**: SPADE hands ``step`` the content of the agent's last ``\boxed{}``; the game gets it rewrapped as
  ``\boxed{X}``, as the reference's runtime does.
* **step faults**: an exception or a malformed return from the game's ``step`` ends the episode with reward -1
  (the reference's play rule), so an agent cannot crash a game into an environment fault.
* **solution()**: a list of str is used as is (a ``\boxed{}`` in an item is unwrapped); a str is split into the
  contents of its ``\boxed{...}`` in order, or, without any box, into its non-empty lines.
* **scoring** (``"total"``, the default): a terminal step wins when its own reward reaches 1 (the reference
  scorer's rule) *or* the game's rewards over the episode sum to 1 (the rule the reference's prompt asks games
  to follow: partial rewards per step whose total is 1 on success); otherwise the step reward is that sum.
  ``"final"`` keeps the reference scorer exactly: only the last step's own reward counts, so games that pay
  partial rewards never reach 1 and fail validation with ``solution_does_not_win``.
"""

from __future__ import annotations

__all__ = ["COMPAT_CODE_PREFIX", "SCORING_RULES", "wrap_reference_game"]

SCORING_RULES = ("total", "final")
#: Load failures raised by the wrapper start with this, then a failure code (``syntax_error``, ``no_env_class``).
COMPAT_CODE_PREFIX = "ReferenceGameError: "

_TEMPLATE = '''\
"""Reference-format game {filename}, run under SPADE's compatibility mode (spade_envs.envs.reference_compat)."""

import collections
import copy
import functools
import heapq
import itertools
import json
import math
import operator
import random
import re
import statistics
import string
import sys
import types
import typing

_GAME_FILE = {filename!r}
_SCORING = {scoring!r}
_TURN_CAP = {turn_cap!r}
_GAME_SOURCE = {source!r}
_TYPING = ("Any", "Callable", "Dict", "FrozenSet", "Iterable", "List", "Mapping", "Optional", "Sequence", "Set",
           "Tuple", "Union")


class ReferenceGameError(Exception):
    """The game cannot be loaded even in compatibility mode; the message starts with a failure code."""


def _preseeded():
    names = {{m.__name__: m for m in (itertools, math, random, re, json, collections, functools, string, copy,
                                      heapq, operator, statistics)}}
    try:
        import numpy
    except ImportError:
        pass
    else:
        names["np"] = names["numpy"] = numpy
    c, it, ft = collections, itertools, functools
    names.update(deque=c.deque, defaultdict=c.defaultdict, Counter=c.Counter, OrderedDict=c.OrderedDict,
                 namedtuple=c.namedtuple, combinations=it.combinations, permutations=it.permutations,
                 product=it.product, chain=it.chain, accumulate=it.accumulate, reduce=ft.reduce,
                 lru_cache=ft.lru_cache, deepcopy=copy.deepcopy, heappush=heapq.heappush, heappop=heapq.heappop)
    names.update((name, getattr(typing, name)) for name in _TYPING)
    return names


def _game_class():
    try:
        code = compile(_GAME_SOURCE, _GAME_FILE, "exec")
    except SyntaxError as exc:
        raise ReferenceGameError("syntax_error: line " + str(exc.lineno) + ": " + str(exc.msg)) from None
    module = types.ModuleType("reference_game")
    module.__file__ = _GAME_FILE
    sys.modules[module.__name__] = module
    for name, value in _preseeded().items():
        module.__dict__.setdefault(name, value)
    exec(code, module.__dict__)
    found = [obj for name, obj in vars(module).items()
             if isinstance(obj, type) and name.endswith("Env") and obj.__module__ == module.__name__
             and callable(getattr(obj, "reset", None)) and callable(getattr(obj, "step", None))]
    concrete = [c for c in found if not any(other is not c and issubclass(other, c) for other in found)]
    if not concrete:
        raise ReferenceGameError("no_env_class: no class ending in 'Env' with callable reset and step")
    return concrete[0]


_GAME_CLASS = _game_class()


def _boxes(text):
    """Contents of every balanced \\\\boxed{{...}} in text, in order."""
    out, start = [], 0
    while True:
        at = text.find("\\\\boxed{{", start)
        if at < 0:
            return out
        depth, i = 0, at + len("\\\\boxed")
        for i in range(i, len(text)):
            depth += {{"{{": 1, "}}": -1}}.get(text[i], 0)
            if depth == 0:
                out.append(text[at + len("\\\\boxed{{"):i].strip())
                break
        else:
            return out
        start = i + 1


def _info(info):
    if not isinstance(info, dict):
        return {{}}
    keep = {{}}
    for key, value in info.items():
        if isinstance(key, str) and (value is None or isinstance(value, (bool, int, str))
                                     or isinstance(value, float) and math.isfinite(value)):
            keep[key[:100]] = value[:500] if isinstance(value, str) else value
    return keep


class ReferenceGameEnv:
    """The reference game behind SPADE's contract."""

    def __init__(self):
        try:
            game = _GAME_CLASS()
        except TypeError:
            game = _GAME_CLASS(max_turns=_TURN_CAP)
        designed = getattr(game, "max_turns", None)
        ok = isinstance(designed, int) and not isinstance(designed, bool) and designed > 0
        self.max_turns = min(designed, _TURN_CAP) if ok else _TURN_CAP
        try:
            game.max_turns = self.max_turns
        except Exception:
            pass
        self._game, self._total = game, 0.0

    def reset(self, seed=None):
        self._total = 0.0
        result = self._game.reset(seed=seed)
        if isinstance(result, str):
            return result, {{}}
        if isinstance(result, tuple) and len(result) == 2:
            return result[0], _info(result[1])
        return result

    def step(self, action):
        try:
            result = self._game.step("\\\\boxed{{" + str(action) + "}}")
            obs, reward, terminated, truncated, info = result
            reward = float(reward)
        except Exception as exc:
            return "Error: the game failed (" + type(exc).__name__ + ").", -1.0, True, False, {{"compat_error": 1}}
        if not math.isfinite(reward):
            return obs, reward, bool(terminated), bool(truncated), {{}}
        self._total += reward
        if _SCORING == "final":
            out = reward
        else:
            out = 1.0 if reward >= 1.0 - 1e-9 or self._total >= 1.0 - 1e-9 else self._total
        return obs, out, bool(terminated), bool(truncated), _info(info)

    def solution(self):
        raw = self._game.solution()
        if isinstance(raw, str):
            boxes = _boxes(raw)
            return boxes if boxes else [line.strip() for line in raw.splitlines() if line.strip()]
        if isinstance(raw, (list, tuple)) and all(isinstance(item, str) for item in raw):
            return [(_boxes(item) or [item.strip()])[-1] for item in raw]
        raise TypeError("solution() must return a str or a list of str, got " + type(raw).__name__)
'''


def wrap_reference_game(source: str, filename: str, *, scoring: str = "total", turn_cap: int = 25) -> str:
    """SPADE env source (class ``ReferenceGameEnv``) that runs the reference-format game ``source`` in the worker."""
    if scoring not in SCORING_RULES:
        raise ValueError(f"scoring must be one of {SCORING_RULES}, got {scoring!r}")
    if isinstance(turn_cap, bool) or not isinstance(turn_cap, int) or turn_cap < 1:
        raise ValueError(f"turn_cap must be an int >= 1, got {turn_cap!r}")
    return _TEMPLATE.format(filename=filename, scoring=scoring, turn_cap=turn_cap, source=source)
