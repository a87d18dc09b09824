"""Read user-provided benchmark files (JSONL, JSON, CSV, Parquet) with one clear error when they are missing.

Nothing is downloaded at run time: each file-based suite names the file it expects under ``--data-dir`` and where
to get it, and accepts the column spellings of the common public copies.
"""

from __future__ import annotations

import csv
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from spade_envs.evaluation.suite import MissingEvalData

__all__ = ["SUFFIXES", "find_data_file", "pick", "read_rows"]

SUFFIXES = (".jsonl", ".json", ".csv", ".parquet")


def find_data_file(data_dir: Path | None, stem: str, suite: str, where: str) -> Path:
    """``<data_dir>/<stem>{.jsonl,.json,.csv,.parquet}``, or :class:`MissingEvalData` saying where to get it."""
    if data_dir is not None:
        for suffix in SUFFIXES:
            path = Path(data_dir) / f"{stem}{suffix}"
            if path.is_file():
                return path
    looked = f"{data_dir}/{stem}{{{','.join(SUFFIXES)}}}" if data_dir is not None else "(no --data-dir given)"
    raise MissingEvalData(
        f"suite {suite} needs its data file {stem}.jsonl (or .json/.csv/.parquet) under --data-dir; looked in "
        f"{looked}. Get it from {where}. See docs/evaluation.md, 'Data'."
    )


def read_rows(path: Path) -> list[dict[str, Any]]:
    """Every row of a JSONL, JSON (a list of objects), CSV or Parquet file, as dicts."""
    suffix = path.suffix.lower()
    if suffix == ".jsonl":
        with open(path, encoding="utf-8") as handle:
            rows = []
            for number, line in enumerate(handle, 1):
                if line.strip():
                    try:
                        rows.append(json.loads(line))
                    except json.JSONDecodeError as exc:
                        raise ValueError(f"{path}:{number}: not a JSON line ({exc.msg})") from exc
            return rows
    if suffix == ".json":
        data = json.loads(path.read_text(encoding="utf-8"))
        if not isinstance(data, list):
            raise ValueError(f"{path}: expected a JSON list of objects, got {type(data).__name__}")
        return data
    if suffix == ".csv":
        with open(path, encoding="utf-8", newline="") as handle:
            return list(csv.DictReader(handle))
    if suffix == ".parquet":
        import pyarrow.parquet as pq

        return pq.read_table(path).to_pylist()
    raise ValueError(f"{path}: unsupported file type {suffix!r}; use one of {', '.join(SUFFIXES)}")


def pick(row: dict[str, Any], names: Sequence[str], path: Path, index: int) -> Any:
    """The first present, non-empty column among ``names`` (public copies spell columns differently)."""
    for name in names:
        value = row.get(name)
        if value is not None and value != "":
            return value
    raise ValueError(f"{path}: row {index} has none of the columns {list(names)}; it has {sorted(row)}")
