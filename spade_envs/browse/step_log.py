"""Resume: cut an append-only JSON-lines log of a run back to the checkpoint's step.

A run appends one JSON row per line to its logs (``spade_metrics.jsonl`` by step, the trainer's ``batches.jsonl``
by global step) while it goes. On resume the steps after the checkpoint run again, so their rows must go, or they
would appear twice. A crash during an append (a kill, node loss, a full disk) can leave the last line unfinished:
it is what the crash was writing, so it is dropped with a warning, and the resumed run appends after whole lines.
Any other line that is not a JSON row with the step is an error naming the file and line: the file was edited or
damaged, and guessing would lose or repeat steps.
"""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path

from spade_envs.envs.errors import SpadeEnvError

__all__ = ["StepLogError", "cut_after"]

logger = logging.getLogger(__name__)


class StepLogError(SpadeEnvError, ValueError):
    """A line of a run log, other than an unfinished last one, is not a JSON row with its step (names path:line)."""


def cut_after(path: str | os.PathLike[str], key: str, last: int) -> list[int]:
    """Keep the rows of ``path`` whose ``key`` is at most ``last`` (file replaced atomically); their ``key`` values.

    A missing file keeps nothing. An unfinished last line (no newline, or not a whole JSON object) is dropped with a
    warning; a whole row that only lacks its newline is kept and given one.

    Raises:
        StepLogError: a line before the last is not a JSON object with an integer ``key``, or the last line is a
            whole JSON object without it.
    """
    path = Path(path)
    if not path.exists():
        return []
    # split at newlines only (a row never holds a raw one); a torn multi-byte character must not stop the resume
    text = path.read_bytes().decode("utf-8", errors="replace")
    parts = text.split("\n")
    if parts[-1] == "":
        parts.pop()  # the file ends with a newline: no unfinished line
    kept: list[str] = []
    steps: list[int] = []
    changed = bool(text) and not text.endswith("\n")  # a last line to drop, or to end
    for lineno, line in enumerate(parts, start=1):
        is_last = lineno == len(parts)
        try:
            row = json.loads(line)
        except (ValueError, RecursionError) as exc:  # RecursionError: deep nesting; ValueError: a 4300+ digit int
            if not is_last:
                raise StepLogError(f"{path}:{lineno}: not valid JSON ({exc}); {_FIX}") from exc
            logger.warning("spade: %s:%d: dropped an unfinished last line (%d characters; a crash during the append): "
                           "%.80r", path, lineno, len(line), line)  # fmt: skip
            changed = True
            continue
        step = row.get(key) if isinstance(row, dict) else None
        if not isinstance(step, int) or isinstance(step, bool):
            raise StepLogError(f"{path}:{lineno}: expected a JSON object with an integer {key!r}, got {line[:80]!r}; "
                               f"{_FIX}")  # fmt: skip
        if step <= last:
            kept.append(line)
            steps.append(step)
        changed = changed or step > last
    if changed:
        tmp = path.with_name(path.name + ".tmp")
        tmp.write_text("".join(line + "\n" for line in kept), encoding="utf-8")
        tmp.replace(path)
    return steps


_FIX = "only an unfinished last line (a crash during the append) is dropped on resume: repair or remove this line"
