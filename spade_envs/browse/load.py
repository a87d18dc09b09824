"""A run directory as the browser reads it: metrics rows, designs joined with their scores, training episodes.

Read with :func:`~spade_envs.browse.run_record.read_record`, which skips an unfinished last line, so a run that is still
writing can be browsed at any moment.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from spade_envs.browse.run_record import RECORD_FILE, read_record

__all__ = ["Run", "design_id", "find_run_dir", "load_run"]

_MARKERS = (RECORD_FILE, "spade_metrics.jsonl")


@dataclass
class Run:
    """What the browser shows of one run."""

    root: Path
    metrics: list[dict[str, Any]] = field(default_factory=list)
    designs: list[dict[str, Any]] = field(default_factory=list)
    episodes: list[dict[str, Any]] = field(default_factory=list)
    header: dict[str, Any] | None = None


def design_id(entry: dict[str, Any]) -> str:
    """The page name of a design: its step and its design number."""
    return f"s{int(entry['step'])}-d{int(entry['design'])}"


def find_run_dir(path: str | Path) -> Path:
    """``spade.run_dir`` itself, or a folder holding it as ``spade/`` (a launcher's ``RUN_DIR``, the demo's)."""
    path = Path(path)
    for candidate in (path, path / "spade"):
        if any((candidate / name).exists() for name in _MARKERS):
            return candidate
    raise FileNotFoundError(f"{path} holds no SPADE run: neither it nor {path / 'spade'} has {' or '.join(_MARKERS)}")


def load_run(path: str | Path) -> Run:
    """Read a run's record and metrics; designer rewards and advantages joined onto their designs."""
    root = find_run_dir(path)
    run = Run(root=root, metrics=read_record(root / "spade_metrics.jsonl"))
    scores: dict[int, dict[str, Any]] = {}
    for entry in read_record(root / RECORD_FILE):
        kind = entry.get("kind")
        if kind == "header":
            run.header = entry
        elif kind == "design":
            run.designs.append(entry)
        elif kind == "episode":
            run.episodes.append(entry)
        elif kind == "scores":
            scores[int(entry["step"])] = entry
    for design in run.designs:
        rows = (scores.get(int(design["step"])) or {}).get("designer") or []
        row = next((r for r in rows if r.get("design") == design.get("design")), None)
        if row is not None:
            design.update(reward=row["reward"], advantage=row["advantage"], trained=not row.get("excluded"))
    for episode in run.episodes:
        rows = (scores.get(int(episode["step"])) or {}).get("agent") or []
        key = (episode["env_id"], episode["seed"])
        episode["group"] = [r for r in rows if (r.get("env_id"), r.get("seed")) == key]
    run.designs.sort(key=lambda d: (int(d["step"]), int(d["design"])))
    run.episodes.sort(key=lambda e: (int(e["step"]), int(e["slot"])))
    return run
