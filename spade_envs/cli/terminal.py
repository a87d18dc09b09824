r"""Printing env text safely: C0/C1 control characters become visible escapes before they reach a terminal.

Environments (and their error messages) are generated code's output. Raw, an ``ESC ]52`` sequence sets the user's
clipboard, others retitle the window or redraw earlier lines (a rejection shown as "admissible"). Newlines and tabs
stay; every other control character, DEL and the C1 range (which some terminals also obey) print as ``\xNN``.
"""

from __future__ import annotations

import re
from typing import Any, TextIO

__all__ = ["SafeStream", "escape_controls"]

_CONTROLS = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def escape_controls(text: str) -> str:
    r"""``text`` with every control character but newline and tab written as a visible ``\xNN`` escape."""
    return _CONTROLS.sub(lambda m: f"\\x{ord(m.group()):02x}", text)


class SafeStream:
    """A text stream that escapes control characters in everything written to it (the CLI wraps stdout/stderr)."""

    def __init__(self, stream: TextIO) -> None:
        self._stream = stream

    def write(self, text: str) -> int:
        self._stream.write(escape_controls(text))
        return len(text)

    def __getattr__(self, name: str) -> Any:  # flush, fileno, isatty, encoding, ...
        return getattr(self._stream, name)
