"""``ast.parse`` that is safe to call from several host threads at once.

CPython 3.11 turns its internal syntax tree into ``ast`` objects with one recursion counter per interpreter, not per
thread. When a garbage-collector finalizer lets another thread run in the middle of that conversion and that thread
parses too, the counter goes wrong and ``ast.parse`` raises ``SystemError: AST constructor recursion depth mismatch``
on valid code (python/cpython#106905, fixed only in later versions). The recipe validates several designs at once in
executor threads, so a good design could be charged as a crash. Every host-side parse goes through :func:`parse_source`,
which serialises parses; a parse elsewhere in the process (a library) can still interleave, so that one error is
retried once: parsing is deterministic, so a second try gives the true answer.
"""

from __future__ import annotations

import ast
import threading

__all__ = ["parse_source"]

_LOCK = threading.Lock()
_RACE = "recursion depth mismatch"


def parse_source(source: str | bytes, filename: str = "<unknown>", mode: str = "exec") -> ast.AST:
    """``ast.parse(source, filename, mode)``, serialised across threads; raises what ``ast.parse`` raises."""
    with _LOCK:
        try:
            return ast.parse(source, filename, mode)
        except SystemError as exc:
            if _RACE not in str(exc):
                raise
            return ast.parse(source, filename, mode)
