"""The host<->worker wire format: one JSON object per line, each reply echoing its request's ``seq``.

Requests: ``{"seq": n, "op": "init|reset|step|call_tool|step_calls|tools|solution|ping|close", ...}``.
Replies: ``{"seq": n, "ok": true, "result": ...}`` or ``{"seq": n, "ok": false, "kind": ..., "error": ...}``.
The worker scrubs what it sends (:func:`scrub`); the host decodes strictly (:func:`decode`) and checks every
result again (:mod:`~spade_envs.sandbox.replies`), because env code runs in the worker's process and could have
tampered with the worker.
"""

from __future__ import annotations

import json
import math
from typing import Any

from spade_envs.sandbox.replies import MAX_DEPTH, MAX_KEY_CHARS, MAX_REWARD, BadReply, check_step_result, valid_text

__all__ = ["MAX_DEPTH", "MAX_REWARD", "BadOutput", "check_step_result", "decode", "encode", "scrub"]


class BadOutput(ValueError):
    """Env code returned a string that is not valid Unicode; reported as a ``bad_types`` contract violation."""


def encode(message: dict[str, Any]) -> bytes:
    """One compact JSON line; NaN and infinities are refused (scrub them first)."""
    return _ENCODER.encode(message).encode("utf-8") + b"\n"


# One encoder for every message: ``json.dumps`` with any non-default option builds a new one per call (~1 us).
_ENCODER = json.JSONEncoder(separators=(",", ":"), allow_nan=False)


def decode(line: bytes) -> dict[str, Any]:
    """Parse one line into a dict; ``ValueError`` for anything else (the caller treats it as a violation).

    NaN and infinity literals and nesting deep enough to exhaust the recursion limit raise ``ValueError``; the
    host then refuses ``1e999`` (decoded as infinity) and integers beyond 64 bits with
    :func:`~spade_envs.sandbox.replies.check_json`.
    """
    try:
        message = _DECODER.decode(line.decode("utf-8"))
    except RecursionError as exc:
        raise BadReply("data nested too deeply") from exc
    if not isinstance(message, dict):
        raise BadReply(f"a message must be a JSON object, got {type(message).__name__}")
    return message


def _refuse_constant(name: str) -> Any:
    raise BadReply(f"non-finite number {name} in message")


# Numbers decode at C speed; the host's check_json then refuses infinities (1e999) and integers beyond 64 bits.
# Python refuses integers of more than 4300 digits while parsing, so no literal costs quadratic time.
_DECODER = json.JSONDecoder(parse_constant=_refuse_constant)


def scrub(value: Any, max_chars: int, depth: int = 0) -> Any:
    """Turn ``value`` into plain JSON data.

    numpy scalars and arrays become Python values, non-finite floats and integers beyond 64 bits ``None``,
    unknown objects their (bounded) ``repr``. A string longer than ``max_chars`` raises ``OverflowError``, one that
    is not valid Unicode :class:`BadOutput`.
    """
    if depth > MAX_DEPTH:
        raise OverflowError(f"data nested deeper than {MAX_DEPTH} levels")
    if value is None or isinstance(value, bool):
        return value
    if isinstance(value, str):
        if len(value) > max_chars:
            raise OverflowError(f"string of {len(value)} characters exceeds the cap of {max_chars}")
        if not valid_text(value):
            raise BadOutput("strings must be valid Unicode text (found a lone surrogate)")
        return value
    if isinstance(value, int):
        return value if -(2**63) <= value < 2**63 else None
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if hasattr(value, "tolist") and callable(value.tolist):  # numpy scalars and arrays
        return scrub(value.tolist(), max_chars, depth + 1)
    if isinstance(value, dict):
        return {
            scrub(str(k)[:MAX_KEY_CHARS], max_chars, depth + 1): scrub(v, max_chars, depth + 1)
            for k, v in value.items()
        }
    if isinstance(value, (list, tuple, set, frozenset)):
        return [scrub(v, max_chars, depth + 1) for v in value]
    return scrub(repr(value)[:200], max_chars, depth)
