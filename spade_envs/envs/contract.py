"""The executable-environment contract shared by the designer, validation, the sandbox and the agent loops.

An environment is a class whose name ends in ``Env``. It needs no base class (games usually have none; tool-use
environments subclass :class:`spade_envs.envs.tooluse.ToolUseEnv`). Call order: construct with no arguments, then
``reset(seed)`` before every episode, then ``step(action)`` until ``terminated`` or ``truncated``.

Members every environment has:

* ``max_turns: int`` -- the most agent turns an episode may take; the runtime truncates after that many steps.
* ``reset(seed) -> (observation: str, info: dict)`` -- starts an episode. All randomness comes from ``seed``
  through a per-instance ``random.Random(seed)``; never the global ``random`` module, which other environments
  in the same process share. The same seed must give the same observation.
* ``step(action: str) -> (observation: str, reward: float, terminated: bool, truncated: bool, info: dict)`` --
  one agent turn. For games ``action`` is the *command* the runtime extracted from the agent's text
  (:func:`extract_command`); tool-use environments receive the raw agent text. ``step`` never raises on garbage
  input: it explains the problem in the observation.
* ``solution() -> list[str]`` -- after ``reset(seed)``, the actions that, replayed one per turn, win that episode.

Only the outcome counts (:func:`outcome_reward`): the last reward clamped to [0, 1] if the episode terminated,
0 if it was truncated. An episode is won when its outcome is 1.
"""

from __future__ import annotations

import math
import re
from typing import Any, Protocol, runtime_checkable

from spade_envs.envs.errors import ContractViolation

__all__ = [
    "ExecutableEnv",
    "StepResult",
    "check_reset_output",
    "check_step_output",
    "extract_command",
    "is_win",
    "outcome_reward",
]

StepResult = tuple[str, float, bool, bool, dict[str, Any]]

_BOXED = re.compile(r"\\boxed\s*\{")
_BRACE = re.compile(r"[{}]")
#: Outcomes within this of 1 are wins: rewards summed in floats (0.1 x 10 = 0.9999999999999999) must not lose.
WIN_TOLERANCE = 1e-9


@runtime_checkable
class ExecutableEnv(Protocol):
    """Structural type of every SPADE environment (games and tool use)."""

    max_turns: int

    def reset(self, seed: int | None = None) -> tuple[str, dict[str, Any]]:
        """Start an episode determined entirely by ``seed``; return the first observation and an info dict."""
        ...

    def step(self, action: str) -> StepResult:
        """Apply one agent turn; return ``(observation, reward, terminated, truncated, info)``."""
        ...

    def solution(self) -> list[str]:
        """Return the actions that win the episode started by the last ``reset``."""
        ...


def extract_command(text: str) -> str:
    r"""Return the content of the last complete ``\\boxed{...}`` in ``text``, else the stripped text.

    Braces inside the box are balanced (``\\boxed{f(x)={1,2}}`` gives ``f(x)={1,2}``). An unclosed box is ignored,
    so a truncated response falls back to its stripped text. Linear in ``len(text)``: one pass matches every brace
    (a stack of open positions), so no crafted text makes extraction quadratic.
    """
    openers = {m.end() - 1 for m in _BOXED.finditer(text)}
    if not openers:
        return text.strip()
    stack: list[int] = []
    found: tuple[int, int] | None = None
    for match in _BRACE.finditer(text):
        pos = match.start()
        if text[pos] == "{":
            stack.append(pos)
        elif stack:
            start = stack.pop()
            if start in openers and (found is None or start > found[0]):
                found = (start, pos)
    return text[found[0] + 1 : found[1]].strip() if found is not None else text.strip()


def outcome_reward(reward: float, terminated: bool, truncated: bool) -> float:
    """Episode outcome from the last step: reward clamped to [0, 1] if terminated, 0 if truncated or unfinished."""
    if truncated or not terminated:
        return 0.0
    if not math.isfinite(reward):
        raise ContractViolation(f"final reward must be finite, got {reward!r}", code="nonfinite_reward")
    value = min(1.0, max(0.0, float(reward)))
    return 1.0 if value >= 1.0 - WIN_TOLERANCE else value


def is_win(outcome: float) -> bool:
    """An episode is won when its outcome reaches 1 (partial credit below 1 is not a win)."""
    return outcome >= 1.0 - WIN_TOLERANCE


def check_reset_output(result: object) -> tuple[str, dict[str, Any]]:
    """Return ``result`` if it is a well-typed ``reset`` result, else raise :class:`ContractViolation`."""
    if not isinstance(result, tuple) or len(result) != 2:
        raise ContractViolation(f"reset must return (observation, info), got {type(result).__name__}")
    obs, info = result
    if not isinstance(obs, str):
        raise ContractViolation(f"reset observation must be str, got {type(obs).__name__}")
    if not obs.strip():
        raise ContractViolation("reset observation must not be empty")
    if not isinstance(info, dict):
        raise ContractViolation(f"reset info must be dict, got {type(info).__name__}")
    return obs, info


def check_step_output(result: object) -> StepResult:
    """Return ``result`` normalised to ``(str, float, bool, bool, dict)``, else raise :class:`ContractViolation`.

    ``bool`` flags may be any ``bool``-like value from numpy; rewards must be real and finite.
    """
    if not isinstance(result, tuple) or len(result) != 5:
        raise ContractViolation(f"step must return a 5-tuple, got {type(result).__name__}")
    obs, reward, terminated, truncated, info = result
    if not isinstance(obs, str):
        raise ContractViolation(f"step observation must be str, got {type(obs).__name__}")
    if isinstance(reward, bool) or not isinstance(reward, (int, float)) and not hasattr(reward, "__float__"):
        raise ContractViolation(f"step reward must be a number, got {type(reward).__name__}")
    value = float(reward)
    if not math.isfinite(value):
        raise ContractViolation(f"step reward must be finite, got {value!r}", code="nonfinite_reward")
    for name, flag in (("terminated", terminated), ("truncated", truncated)):
        if type(flag).__name__ not in ("bool", "bool_"):
            raise ContractViolation(f"step {name} must be bool, got {type(flag).__name__}")
    if not isinstance(info, dict):
        raise ContractViolation(f"step info must be dict, got {type(info).__name__}")
    return obs, value, bool(terminated), bool(truncated), info
