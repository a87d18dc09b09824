"""The run record: what a SPADE run designed, measured and played, one JSON line per entry (docs/run_record.md).

Framework-free: the recipe's env-pool actor is the one writer (the designer and agent loops and the trainer send it
their entries), ``spade-envs browse`` and tests read it. The file is append-only; each entry is one newline-ended
line written with one call, so a reader of a run in progress skips at most one unfinished last line. Texts are
capped (:class:`RecordCaps`) and past ``max_mb`` entries keep their verdicts and numbers but drop their texts, so a
long run stays within a stated size. On resume the lines of steps after the restored checkpoint are cut
(:meth:`RunRecord.truncate_after`), as for ``spade_metrics.jsonl``, so no step is recorded twice.
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any

__all__ = ["FORMAT", "RECORD_FILE", "RecordCaps", "RunRecord", "read_record"]

#: The record's file name in the run directory (``spade.run_dir``).
RECORD_FILE = "run_record.jsonl"
#: Written in the first line (``kind: header``); bumped when an entry's meaning changes.
FORMAT = "spade-run-record/1"
#: Entry fields that hold long text, dropped once the file is past ``max_mb`` (the entry says ``"compact": true``).
_TEXTS = ("source", "doc_head", "hint", "hint_text", "transcripts", "transcript")


@dataclass(frozen=True)
class RecordCaps:
    """Size bounds of the record (the ``spade.record`` block; see its comments in ``spade/default.yaml``)."""

    enable: bool = True
    source_chars: int = 24_000
    doc_chars: int = 600
    hint_chars: int = 2_000
    transcripts_per_arm: int = 2
    transcript_chars: int = 6_000
    episodes_per_step: int = 2
    max_mb: float = 512.0

    @classmethod
    def from_dict(cls, values: dict[str, Any] | None) -> RecordCaps:
        """From the ``spade.record`` block; an unknown key or a negative bound is a clear error."""
        values = dict(values or {})
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(values) - known)
        if unknown:
            raise ValueError(f"spade.record: unknown keys {unknown}; known: {sorted(known)}")
        caps = cls(**values)
        for name, value in asdict(caps).items():
            if name != "enable" and (not isinstance(value, (int, float)) or value < 0):
                raise ValueError(f"spade.record.{name} must be a number >= 0, got {value!r}")
        return caps


def cut(text: str | None, limit: int, keep_tail: bool = False) -> str | None:
    """``text`` within ``limit`` characters, saying how much was cut (its tail kept when ``keep_tail``)."""
    if text is None or len(text) <= limit:
        return text
    note = f"[... {len(text) - limit} characters cut by spade.record ...]"
    return note + "\n" + text[len(text) - limit :] if keep_tail else text[:limit] + "\n" + note


def cap_transcript(transcript: dict[str, Any], limit: int) -> dict[str, Any]:
    """A transcript (``turns``: ``[{role, text}]``) within ``limit`` characters; the prompt keeps its tail."""
    turns = transcript.get("turns") or []
    share = max(200, limit // max(1, len(turns)))
    kept, used = [], 0
    for i, turn in enumerate(turns):
        if used >= limit:
            kept.append({"role": "note", "text": f"[... {len(turns) - i} more turns cut by spade.record ...]"})
            break
        text = cut(str(turn.get("text", "")), min(share, limit - used), keep_tail=turn.get("role") == "prompt")
        kept.append({**turn, "text": text})
        used += len(text or "")
    return {**transcript, "turns": kept}


class RunRecord:
    """The append-only writer of ``RUN_DIR/run_record.jsonl`` (one writer per run: the env-pool actor)."""

    def __init__(self, run_dir: str | Path, caps: RecordCaps) -> None:
        self.path = Path(run_dir) / RECORD_FILE
        self.caps = caps
        self.size = self.path.stat().st_size if self.path.exists() else 0
        if caps.enable and self.size == 0:
            self._append({"kind": "header", "format": FORMAT, "caps": asdict(caps)})

    def write(self, entry: dict[str, Any]) -> bool:
        """Append ``entry`` (a dict with ``kind`` and ``step``) with its texts capped; False when recording is off."""
        if not self.caps.enable:
            return False
        self._append(self._capped(entry))
        return True

    def _capped(self, entry: dict[str, Any]) -> dict[str, Any]:
        caps = self.caps
        if self.size >= caps.max_mb * 1e6:
            return {**{k: v for k, v in entry.items() if k not in _TEXTS}, "compact": True}
        out = dict(entry)
        for key, limit in (("source", caps.source_chars), ("doc_head", caps.doc_chars), ("hint", caps.hint_chars),
                           ("hint_text", caps.hint_chars)):  # fmt: skip
            if isinstance(out.get(key), str):
                out[key] = cut(out[key], limit)
        if isinstance(out.get("transcripts"), dict):
            keep = caps.transcripts_per_arm
            out["transcripts"] = {arm: [cap_transcript(t, caps.transcript_chars) for t in ts[:keep]]
                                  for arm, ts in out["transcripts"].items()}  # fmt: skip
        if isinstance(out.get("transcript"), dict):
            out["transcript"] = cap_transcript(out["transcript"], caps.transcript_chars)
        return out

    def _append(self, entry: dict[str, Any]) -> None:
        # a lone surrogate (env text may hold one) has no UTF-8 form: written as "?" rather than failing the run
        line = (json.dumps(entry, ensure_ascii=False) + "\n").encode("utf-8", errors="replace")
        fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            done = 0
            while done < len(line):  # a concurrent reader sees whole lines plus at most one unfinished last line
                done += os.write(fd, line[done:])
        finally:
            os.close(fd)
        self.size += len(line)

    def truncate_after(self, step: int) -> int:
        """Resume: drop the entries of steps after ``step`` (atomically); returns how many were dropped."""
        if not self.path.exists():
            return 0
        lines = _lines(self.path)
        kept = [ln for ln in lines if ln.endswith("\n") and _step(ln) <= step]
        if len(kept) < len(lines):
            tmp = self.path.with_name(RECORD_FILE + ".tmp")
            tmp.write_text("".join(kept), encoding="utf-8")
            tmp.replace(self.path)
            self.size = self.path.stat().st_size
        return len(lines) - len(kept)


def _lines(path: Path) -> list[str]:
    """The file's lines, split at newlines only: JSON keeps U+2028, U+0085 and the like raw, inside an entry."""
    parts = path.read_bytes().decode("utf-8", errors="replace").split("\n")
    return [p + "\n" for p in parts[:-1]] + ([parts[-1]] if parts[-1] else [])


def _step(line: str) -> int:
    try:
        step = json.loads(line).get("step")
    except json.JSONDecodeError:
        return 1 << 62  # a torn line of a crash: dropped
    return -1 if step is None else int(step)


def read_record(path: str | Path) -> list[dict[str, Any]]:
    """The entries of a record file, safe on a run in progress (an unfinished last line is skipped)."""
    path = Path(path)
    if path.is_dir():
        path = path / RECORD_FILE
    if not path.exists():
        return []
    entries = []
    for line in _lines(path):
        if not line.endswith("\n"):
            break
        try:
            entries.append(json.loads(line))
        except json.JSONDecodeError:
            continue
    return entries
