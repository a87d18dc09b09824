"""Host-side checks of every reply a worker sends, per method: the closed boundary between env code and the host.

Env code shares its process with the worker loop, so any reply may be forged. :func:`check_result` accepts only
the exact shape each method may return (plain JSON of bounded depth, finite numbers, 64-bit integers, valid
Unicode strings within the size cap, well-formed tool schemas, a sane ``max_turns``) and raises :class:`BadReply`
otherwise; the host turns that into a typed error and kills the worker. The worker runs the same checks on what
env code returned (as contract violations), so an honest worker never sends a reply the host refuses.
"""

from __future__ import annotations

import math
from typing import Any

__all__ = [
    "MAX_DEPTH",
    "MAX_KEY_CHARS",
    "MAX_REWARD",
    "MAX_TOOLS",
    "MAX_TURNS",
    "BadReply",
    "check_json",
    "check_result",
    "check_step_result",
    "check_tools",
    "valid_text",
]

#: Deepest nesting of data in a result (the worker's scrub enforces the same bound).
MAX_DEPTH = 20
#: Longest dict key a worker sends (the worker's scrub cuts longer ones).
MAX_KEY_CHARS = 200
#: Rewards beyond this magnitude are a broken environment, not a signal.
MAX_REWARD = 1e4
#: Most turns an environment may declare: far above any training turn cap, small enough for ``range()``.
MAX_TURNS = 1_000_000_000
#: Most tool schemas a tool-use environment may declare.
MAX_TOOLS = 128
_INT_BOUND = 2**63


class BadReply(ValueError):
    """A result that the method may not return; the message says what is wrong."""


def valid_text(value: str) -> bool:
    """Whether ``value`` is valid Unicode text (no lone surrogates), so it can be encoded, shown and tokenized."""
    if value.isascii():
        return True
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


_DIGITS_AS_ZERO = bytes.maketrans(b"123456789", b"000000000")
_BIG_EXPONENTS = (b"e000", b"E000", b"e+000", b"E+000", b"e-000", b"E-000")


def _plainly_fine(line: bytes, max_chars: int, max_depth: int) -> bool:
    r"""Whether the raw JSON ``line`` cannot hold anything :func:`check_json` refuses (C-speed scans only).

    Strings cannot outgrow the whole line; without a ``\ud..`` escape no surrogate can appear (strict UTF-8
    decoding refuses encoded ones); without a run of 19 digits or a 3-digit exponent no number can exceed 64 bits
    or overflow to infinity; with fewer brackets than ``max_depth`` nothing can nest deeper.
    """
    if len(line) > max_chars or line.count(b"[") + line.count(b"{") >= max_depth:
        return False
    if b"\\u" in line and (b"\\ud" in line or b"\\uD" in line):
        return False
    digits = line.translate(_DIGITS_AS_ZERO)
    if b"0000000000000000000" in digits:  # 19 digits in a row
        return False
    for exponent in _BIG_EXPONENTS:
        if exponent in digits:
            return False
    return True


def check_json(value: Any, max_chars: int, max_depth: int = MAX_DEPTH, line: bytes | None = None) -> None:
    """Plain JSON data only: bounded depth, finite floats, 64-bit ints, strings valid and within ``max_chars``.

    ``line``: the raw JSON text ``value`` was decoded from; when a scan of it proves the walk unnecessary (the
    common, small reply), the walk is skipped.
    """
    if line is not None and _plainly_fine(line, max_chars, max_depth):
        return
    stack = [(value, 0)]
    while stack:
        item, depth = stack.pop()
        if item is None or isinstance(item, bool):
            continue
        if isinstance(item, str):
            if len(item) > max_chars:
                raise BadReply(f"a string of {len(item)} characters exceeds the cap of {max_chars}")
            if not valid_text(item):
                raise BadReply("a string is not valid Unicode (lone surrogate)")
        elif isinstance(item, int):
            if not -_INT_BOUND <= item < _INT_BOUND:
                raise BadReply("an integer exceeds 64 bits")
        elif isinstance(item, float):
            if not math.isfinite(item):
                raise BadReply(f"non-finite number {item!r}")
        elif isinstance(item, (list, dict)):
            if depth >= max_depth:
                raise BadReply(f"data nested deeper than {max_depth} levels")
            if isinstance(item, dict):
                for key in item:
                    if not isinstance(key, str) or len(key) > max_chars or not valid_text(key):
                        raise BadReply("a dict key is not a valid string within the size cap")
                stack.extend((v, depth + 1) for v in item.values())
            else:
                stack.extend((v, depth + 1) for v in item)
        else:
            raise BadReply(f"{type(item).__name__} is not JSON data")


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def check_max_turns(value: Any) -> int:
    if not _is_int(value) or not 1 <= value <= MAX_TURNS:
        raise BadReply(f"max_turns must be an int in [1, {MAX_TURNS}], got {value!r}"[:300])
    return value


def check_step_result(result: Any) -> tuple[str, float, bool, bool, dict[str, Any]]:
    """A ``step`` reply: ``[obs: str, reward: finite number within +-MAX_REWARD, bool, bool, info: dict]``."""
    if not isinstance(result, list) or len(result) != 5:
        raise BadReply("step result must be a list of 5 items")
    obs, reward, terminated, truncated, info = result
    if not isinstance(obs, str):
        raise BadReply("observation must be a string")
    if isinstance(reward, bool) or not isinstance(reward, (int, float)):
        raise BadReply(f"reward must be a finite number, got {type(reward).__name__}")
    if isinstance(reward, int):  # compare as an int: a 400-digit int must not reach float() or math.isfinite
        if abs(reward) > MAX_REWARD:
            raise BadReply(f"reward beyond +-{MAX_REWARD:g}")
    elif not math.isfinite(reward):
        raise BadReply(f"reward must be a finite number, got {reward!r}")
    elif abs(reward) > MAX_REWARD:
        raise BadReply(f"reward {reward!r} is beyond +-{MAX_REWARD:g}")
    if not isinstance(terminated, bool) or not isinstance(truncated, bool):
        raise BadReply("terminated and truncated must be booleans")
    if not isinstance(info, dict):
        raise BadReply("info must be an object")
    return obs, float(reward), terminated, truncated, info


def check_tools(tools: Any) -> list[dict[str, Any]]:
    """OpenAI-format function schemas: ``[{"type": "function", "function": {"name", "description", "parameters"}}]``."""
    if not isinstance(tools, list) or len(tools) > MAX_TOOLS:
        raise BadReply(f"tools() must return a list of at most {MAX_TOOLS} schemas")
    names = set()
    for tool in tools:
        fn = tool.get("function") if isinstance(tool, dict) else None
        if not isinstance(tool, dict) or tool.get("type") != "function" or not isinstance(fn, dict):
            raise BadReply('every tool schema must be {"type": "function", "function": {...}}')
        name, params = fn.get("name"), fn.get("parameters", {"type": "object", "properties": {}})
        if not isinstance(name, str) or not name.isidentifier() or len(name) > 64 or name in names:
            raise BadReply(f"tool names must be unique identifiers of at most 64 characters, got {name!r}"[:200])
        names.add(name)
        if not isinstance(fn.get("description", ""), str):
            raise BadReply(f"tool {name}: description must be a string")
        if not isinstance(params, dict) or params.get("type") != "object":
            raise BadReply(f'tool {name}: parameters must be a JSON schema of "type": "object"')
        props, required = params.get("properties", {}), params.get("required", [])
        if not isinstance(props, dict) or not all(isinstance(p, dict) for p in props.values()):
            raise BadReply(f"tool {name}: properties must map names to schemas")
        if not isinstance(required, list) or not all(isinstance(r, str) and r in props for r in required):
            raise BadReply(f"tool {name}: required must list property names")
    return tools


def _check_init(result: Any) -> dict[str, Any]:
    if not isinstance(result, dict) or set(result) != {"class_name", "setting", "max_turns"}:
        raise BadReply("init result must be {class_name, setting, max_turns}")
    name = result["class_name"]
    if not isinstance(name, str) or not name.isidentifier() or len(name) > MAX_KEY_CHARS:
        raise BadReply("class_name must be an identifier")
    if result["setting"] not in ("games", "tool_use"):
        raise BadReply("setting must be games or tool_use")
    check_max_turns(result["max_turns"])
    return result


def _check_reset(result: Any) -> list[Any]:
    if not isinstance(result, list) or len(result) != 3:
        raise BadReply("reset result must be [observation, info, max_turns]")
    obs, info, max_turns = result
    if not isinstance(obs, str) or not isinstance(info, dict):
        raise BadReply("reset must give a string observation and a dict info")
    if max_turns is not None:
        check_max_turns(max_turns)
    return result


def _check_str(result: Any) -> str:
    if not isinstance(result, str):
        raise BadReply("the result must be a string")
    return result


def _check_solution(result: Any) -> list[str]:
    if not isinstance(result, list) or not all(isinstance(a, str) for a in result):
        raise BadReply("solution result must be a list of strings")
    return result


def _check_constant(expected: Any) -> Any:
    def check(result: Any) -> Any:
        if result != expected or type(result) is not type(expected):
            raise BadReply(f"expected {expected!r}")
        return result

    return check


_CHECKS = {
    "init": _check_init,
    "reset": _check_reset,
    "step": check_step_result,
    "step_calls": check_step_result,
    "call_tool": _check_str,
    "tools": check_tools,
    "solution": _check_solution,
    "ping": _check_constant("pong"),
    "close": _check_constant(None),
}


def check_result(op: str, result: Any, max_chars: int, walk: bool = True) -> Any:
    """The result of ``op`` if it is one the method may return, else :class:`BadReply`.

    ``walk=False`` skips the plain-JSON check (:func:`check_json`) for a caller that has made it already.
    """
    if walk:
        check_json(result, max_chars, MAX_DEPTH + 2)  # +2: the method's own list and the info dict around the data
    if op not in _CHECKS:
        raise BadReply(f"unknown op {op!r}")
    return _CHECKS[op](result)
