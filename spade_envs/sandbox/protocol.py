"""The host<->worker wire format: one JSON object per line, each reply echoing its request's ``seq``.

Requests: ``{"seq": n, "op": "init|reset|step|call_tool|step_calls|tools|solution|ping|close", ...}``.
Replies: ``{"seq": n, "ok": true, "result": ...}`` or ``{"seq": n, "ok": false, "kind": ..., "error": ...}``.
The worker scrubs what it sends (:func:`scrub`); the host checks it again (:func:`check_step_result`), because
env code runs in the worker's process and could have tampered with the worker.
"""

from __future__ import annotations

import json
import math
from typing import Any

__all__ = ["MAX_DEPTH", "MAX_REWARD", "check_step_result", "decode", "encode", "scrub"]

MAX_DEPTH = 20
#: Rewards beyond this magnitude are a broken environment, not a signal.
MAX_REWARD = 1e4


def encode(message: dict[str, Any]) -> bytes:
    """One compact JSON line; NaN and infinities are refused (scrub them first)."""
    return json.dumps(message, separators=(",", ":"), allow_nan=False).encode("utf-8") + b"\n"


def decode(line: bytes) -> dict[str, Any]:
    """Parse one line into a dict; ``ValueError`` for anything else (the caller treats it as a violation)."""
    message = _DECODER.decode(line.decode("utf-8"))
    if not isinstance(message, dict):
        raise ValueError(f"a message must be a JSON object, got {type(message).__name__}")
    return message


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"non-finite number {name} in message")


_DECODER = json.JSONDecoder(parse_constant=_refuse_constant)  # built once: json.loads(parse_constant=...) rebuilds it


def scrub(value: Any, max_chars: int, depth: int = 0) -> Any:
    """Turn ``value`` into plain JSON data.

    numpy scalars and arrays become Python values, non-finite floats ``None``, unknown objects their (bounded)
    ``repr``. A string longer than ``max_chars`` raises ``OverflowError``.
    """
    if depth > MAX_DEPTH:
        raise OverflowError(f"data nested deeper than {MAX_DEPTH} levels")
    if value is None or isinstance(value, bool):
        return value
    if isinstance(value, str):
        if len(value) > max_chars:
            raise OverflowError(f"string of {len(value)} characters exceeds the cap of {max_chars}")
        return value
    if isinstance(value, int):
        return value if abs(value) < 2**63 else float(value)
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if hasattr(value, "tolist") and callable(value.tolist):  # numpy scalars and arrays
        return scrub(value.tolist(), max_chars, depth + 1)
    if isinstance(value, dict):
        return {str(k)[:200]: scrub(v, max_chars, depth + 1) for k, v in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)):
        return [scrub(v, max_chars, depth + 1) for v in value]
    return repr(value)[:200]


def check_step_result(result: Any) -> tuple[str, float, bool, bool, dict[str, Any]]:
    """Host-side check of a ``step`` reply; ``ValueError`` names what is wrong."""
    if not isinstance(result, list) or len(result) != 5:
        raise ValueError("step result must be a list of 5 items")
    obs, reward, terminated, truncated, info = result
    if not isinstance(obs, str):
        raise ValueError("observation must be a string")
    if isinstance(reward, bool) or not isinstance(reward, (int, float)) or not math.isfinite(reward):
        raise ValueError(f"reward must be a finite number, got {reward!r}")
    if abs(reward) > MAX_REWARD:
        raise ValueError(f"reward {reward} is beyond +-{MAX_REWARD:g}")
    if not isinstance(terminated, bool) or not isinstance(truncated, bool):
        raise ValueError("terminated and truncated must be booleans")
    if not isinstance(info, dict):
        raise ValueError("info must be an object")
    return obs, float(reward), terminated, truncated, info
