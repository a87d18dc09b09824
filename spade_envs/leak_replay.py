"""The leak check that replays: a hint leaks when it names a value the solution cannot do without.

The token rules of :mod:`spade_envs.leaks` compare the hint with the solution's text and exempt values that are the
same on every vetted seed, so a designer could make the answer a constant (a fixed password for a middle move, a
fixed answer among 25 distractors) and have the hint name it. Here constants are not exempt; instead each value a
solution move carries that the hint names (in digits or in words) is *replayed*: the solution is played from
``reset`` with that value swapped for another, and if it then no longer wins, the value is what the env wanted
found, and the hint handed it over, even when the observation shows it among distractors. Values the solution does
not need (``inspect 1`` when inspecting is optional) are approach.
Games only; tool-use values are all checked by the token rules, constants included.
"""

from __future__ import annotations

import re

from spade_envs.episode import play, solution_policy
from spade_envs.leaks import Seq, named_values
from spade_envs.sandbox.client import RemoteEnv

__all__ = ["replay_leak", "swapped"]


def swapped(action: str, value: Seq) -> str | None:
    """``action`` with the first token of ``value`` replaced by another of the same shape, or ``None`` if absent."""
    token = value[0]
    other = "".join(str((int(c) + 5) % 10) for c in token) if token.isdigit() else "q" * max(2, len(token))
    pattern = re.compile(rf"(?<![A-Za-z0-9]){re.escape(token)}(?![A-Za-z0-9])", re.IGNORECASE)
    changed, n = pattern.subn(other, action, count=1)
    return changed if n else None


def replay_leak(env: RemoteEnv, hint: str, seed: int, actions: list[str], max_turns: int | None) -> str | None:
    """Why ``hint`` leaks on ``seed`` (the solution ``actions`` needs a value the hint names), or ``None``.

    Each candidate value costs one episode in ``env``.
    """
    for i, action in enumerate(actions):
        for value in named_values(hint, action):
            changed = swapped(action, value)
            if changed is None or changed == action:
                continue
            trial = [*actions[:i], changed, *actions[i + 1 :]]
            if not play(env, solution_policy(trial, "games"), seed, max_turns, setting="games").won:
                return (f"the hint names {' '.join(value)!r}, which move {i + 1} of the solution needs (replayed with "
                        "another value, the solution no longer wins)")  # fmt: skip
    return None
