"""The document corpus that grounds environment design: indexed once, sampled by seed, never held in memory.

Designer prompts quote one document each, truncated to a word budget. Corpora can be far larger than memory, so
loading only builds an index (JSONL line offsets, Parquet row positions, Arrow row numbers) after checking every
record once; a sampled document is read from disk on demand. Bad records are skipped and counted by reason at
indexing time, so a corpus that is mostly broken is visible in the logs before training starts.

Record format (JSONL lines, Parquet rows, saved ``datasets`` rows): the text is ``orig_doc`` when that is a
non-empty string, else ``text``; ``id`` (a non-empty string or an integer) names the document and is never metadata;
every other key is metadata that the designer never sees.
"""

from __future__ import annotations

import bisect
import importlib
import json
import logging
import random
import re
import threading
from array import array
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, fields
from itertools import islice
from pathlib import Path
from typing import Any, Protocol

from spade_envs.envs.errors import SpadeEnvError
from spade_envs.envs.spec import SETTINGS

__all__ = [
    "SKIP_REASONS",
    "TEXT_KEYS",
    "Corpus",
    "CorpusConfig",
    "CorpusError",
    "Document",
    "MAX_CHARS_PER_WORD",
    "truncate_words",
]

logger = logging.getLogger(__name__)

#: Keys holding a record's text, most preferred first.
TEXT_KEYS = ("orig_doc", "text")
#: Why a record was skipped; :attr:`Corpus.skipped` always has every key.
SKIP_REASONS = ("blank_line", "invalid_json", "not_an_object", "missing_text", "empty_text", "non_string_text")
_DATASET_MARKERS = ("dataset_info.json", "state.json")
_ROW_BATCH = 4096


class CorpusError(SpadeEnvError):
    """A corpus path cannot be used: missing, of an unknown kind, or holding no valid document."""


@dataclass(frozen=True)
class Document:
    """One corpus document.

    Attributes:
        doc_id: stable name: the record's ``id`` when it has one, else ``<file name>:<line or row number>``.
        text: the full text (see :func:`truncate_words` for the prompt-sized version).
        metadata: the record's other keys; provenance only, never shown to the model.
    """

    doc_id: str
    text: str
    metadata: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class CorpusConfig:
    """Where the corpus is and how much of a document a designer prompt may quote.

    Attributes:
        path: a JSONL or Parquet file, a directory of such files (``*.jsonl``, ``*.parquet``, not recursive), a
            directory written by ``datasets.Dataset.save_to_disk``, or a tuple of any of these.
        max_words_games: word budget of a document in a games designer prompt.
        max_words_tool_use: word budget in a tool-use designer prompt (shorter: the prompt also carries tool rules).
        seed: seed of the designer's document sampler (``random.Random(seed)``), so a run's documents replay.
    """

    path: str | tuple[str, ...]
    max_words_games: int = 6000
    max_words_tool_use: int = 4000
    seed: int = 42

    def __post_init__(self) -> None:
        if isinstance(self.path, (list, tuple)):
            object.__setattr__(self, "path", tuple(str(p) for p in self.path))
        elif isinstance(self.path, Path):
            object.__setattr__(self, "path", str(self.path))
        paths = self.path if isinstance(self.path, tuple) else (self.path,)
        if not paths or not all(isinstance(p, str) and p for p in paths):
            raise ValueError(f"path must be a non-empty path or list of paths, got {self.path!r}")
        for name in ("max_words_games", "max_words_tool_use"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"{name} must be a positive integer, got {value!r}")
        if isinstance(self.seed, bool) or not isinstance(self.seed, int):
            raise ValueError(f"seed must be an integer, got {self.seed!r}")

    @classmethod
    def from_dict(cls, data: dict[str, Any] | None) -> CorpusConfig:
        """Build from a config mapping; unknown keys are an error that names the known ones."""
        data = dict(data or {})
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise ValueError(f"unknown corpus option(s) {unknown}; known: {sorted(known)}")
        if "path" not in data:
            raise ValueError("corpus option 'path' is required")
        return cls(**data)

    def max_words(self, setting: str) -> int:
        """Word budget of ``setting`` (one of :data:`spade_envs.envs.spec.SETTINGS`)."""
        if setting not in SETTINGS:
            raise ValueError(f"setting must be one of {SETTINGS}, got {setting!r}")
        return self.max_words_games if setting == "games" else self.max_words_tool_use


def truncate_words(text: str, max_words: int, max_chars: int | None = None) -> str:
    """Keep the first ``max_words`` words and at most ``max_chars`` characters, marking the cut for the designer.

    Words alone do not bound a prompt: a CJK or no-space document is one "word" of any length (a 400k-character
    document passed whole). ``max_chars`` (default ``max_words x`` :data:`MAX_CHARS_PER_WORD`, far above English
    prose's ~6) cuts such text at a whitespace when one is near, else mid-run. The kept part is the original text up
    to the end of the last kept word, so line breaks and spacing survive. Text within both limits comes back
    unchanged.
    """
    if isinstance(max_words, bool) or not isinstance(max_words, int) or max_words < 1:
        raise ValueError(f"max_words must be a positive integer, got {max_words!r}")
    limit = max_words * MAX_CHARS_PER_WORD if max_chars is None else max_chars
    if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
        raise ValueError(f"max_chars must be a positive integer, got {max_chars!r}")
    words = list(islice(re.finditer(r"\S+", text), max_words + 1))
    cut, unit = (len(text), "") if len(words) <= max_words else (words[max_words - 1].end(), f"{max_words} words")
    if cut > limit:
        space = max(text.rfind(" ", 0, limit + 1), text.rfind("\n", 0, limit + 1))
        cut, unit = (space if space > limit // 2 else limit), f"{limit} characters"
    if not unit:
        return text
    return f"{text[:cut].rstrip()}\n[... document truncated at {unit} ...]"


#: Characters per word allowed by :func:`truncate_words` before it cuts by characters (English prose averages ~6).
MAX_CHARS_PER_WORD = 8


def _choose_text(record: dict[str, Any]) -> tuple[str | None, str]:
    """``(key, "")`` for the key holding the record's text, or ``(None, reason)`` when it has none."""
    reason = ""
    for key in TEXT_KEYS:
        value = record.get(key)
        if value is None:
            continue
        if isinstance(value, str) and value.strip():
            return key, ""
        reason = reason or ("empty_text" if isinstance(value, str) else "non_string_text")
    return None, reason or "missing_text"


def _document(record: dict[str, Any], fallback_id: str) -> Document:
    key, _ = _choose_text(record)
    if key is None:
        raise CorpusError(f"record {fallback_id} no longer holds a valid text: was the corpus changed after loading?")
    raw_id = record.get("id")
    has_id = isinstance(raw_id, (str, int)) and not isinstance(raw_id, bool) and str(raw_id) != ""
    metadata = {k: v for k, v in record.items() if k not in (key, "id")}
    return Document(doc_id=str(raw_id) if has_id else fallback_id, text=record[key], metadata=metadata)


class _Source(Protocol):
    """One indexed file or dataset: valid documents numbered ``0 .. count - 1``."""

    name: str
    skipped: dict[str, int]

    def __len__(self) -> int: ...

    def read(self, index: int) -> Document: ...


class _JsonlSource:
    """Byte offsets and line numbers of the valid lines of a JSONL file: 12 bytes per document, no text."""

    def __init__(self, path: Path) -> None:
        self.path, self.name = path, path.name
        self.skipped = dict.fromkeys(SKIP_REASONS, 0)
        self._offsets = array("q")
        self._lines = array("I")
        offset = 0
        with path.open("rb") as f:
            for line_no, line in enumerate(f, start=1):
                reason = self._check(line)
                if reason:
                    self.skipped[reason] += 1
                else:
                    self._offsets.append(offset)
                    self._lines.append(line_no)
                offset += len(line)

    @staticmethod
    def _check(line: bytes) -> str:
        if not line.strip():
            return "blank_line"
        try:
            record = json.loads(line)
        except (ValueError, RecursionError):
            return "invalid_json"
        if not isinstance(record, dict):
            return "not_an_object"
        return _choose_text(record)[1]

    def __len__(self) -> int:
        return len(self._offsets)

    def read(self, index: int) -> Document:
        fallback_id = f"{self.name}:{self._lines[index]}"
        with self.path.open("rb") as f:
            f.seek(self._offsets[index])
            line = f.readline()
        try:
            record = json.loads(line)
        except (ValueError, RecursionError):
            record = None
        if not isinstance(record, dict):
            raise CorpusError(f"line {fallback_id} is no longer a JSON object: was the corpus changed after loading?")
        return _document(record, fallback_id)


def _check_rows(columns: dict[str, list[Any]], n_rows: int, skipped: dict[str, int]) -> Iterable[int]:
    """Positions (within one batch) of the rows holding a valid text; counts the others in ``skipped``."""
    for i in range(n_rows):
        reason = _choose_text({key: values[i] for key, values in columns.items()})[1]
        if reason:
            skipped[reason] += 1
        else:
            yield i


class _ParquetSource:
    """Row numbers of the valid rows of a Parquet file; one row group (the last one read) is held at a time."""

    def __init__(self, path: Path) -> None:
        pq = _import("pyarrow.parquet", "Parquet")
        self.path, self.name = path, path.name
        self.skipped = dict.fromkeys(SKIP_REASONS, 0)
        self._rows = array("q")
        self._cache: tuple[int, Any] | None = None  # (row group, its pyarrow.Table): Arrow-compact, not Python
        self._lock = threading.Lock()
        parquet = pq.ParquetFile(path)
        columns = [key for key in TEXT_KEYS if key in parquet.schema_arrow.names]
        self._group_starts = [0]
        for group in range(parquet.num_row_groups):
            n_rows = parquet.metadata.row_group(group).num_rows
            table = parquet.read_row_group(group, columns=columns) if columns else None
            values = {key: table.column(key).to_pylist() for key in columns} if table is not None else {}
            start = self._group_starts[-1]
            self._rows.extend(start + i for i in _check_rows(values, n_rows, self.skipped))
            self._group_starts.append(start + n_rows)

    def __len__(self) -> int:
        return len(self._rows)

    def read(self, index: int) -> Document:
        row = self._rows[index]
        group = bisect.bisect_right(self._group_starts, row) - 1
        with self._lock:
            if self._cache is None or self._cache[0] != group:
                pq = _import("pyarrow.parquet", "Parquet")
                self._cache = (group, pq.ParquetFile(self.path).read_row_group(group))
            record = self._cache[1].slice(row - self._group_starts[group], 1).to_pylist()[0]
        return _document(record, f"{self.name}:{row}")


class _DatasetSource:
    """Row numbers of the valid rows of a saved ``datasets.Dataset``; the rows stay in memory-mapped Arrow files."""

    def __init__(self, dataset: Any, name: str) -> None:
        self.name = name
        self.skipped = dict.fromkeys(SKIP_REASONS, 0)
        self._dataset = dataset
        self._rows = array("q")
        columns = [key for key in TEXT_KEYS if key in dataset.column_names]
        if not columns:
            self.skipped["missing_text"] = len(dataset)
            return
        start = 0
        for batch in dataset.select_columns(columns).iter(batch_size=_ROW_BATCH):
            n_rows = len(batch[columns[0]])
            self._rows.extend(start + i for i in _check_rows(batch, n_rows, self.skipped))
            start += n_rows

    def __len__(self) -> int:
        return len(self._rows)

    def read(self, index: int) -> Document:
        row = self._rows[index]
        return _document(dict(self._dataset[row]), f"{self.name}:{row}")


def _import(module: str, what: str) -> Any:
    """Optional dependencies load lazily: ``datasets`` alone costs about a second to import."""
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise CorpusError(f"reading a {what} corpus needs {module.split('.')[0]!r}: pip install it ({exc})") from exc


def _open_saved_dataset(path: Path) -> list[_Source]:
    datasets = _import("datasets", "saved-dataset")
    loaded = datasets.load_from_disk(str(path))
    if isinstance(loaded, datasets.DatasetDict):
        return [_DatasetSource(split, f"{path.name}/{name}") for name, split in sorted(loaded.items())]
    return [_DatasetSource(loaded, path.name)]


def _open_path(path: Path) -> list[_Source]:
    """Every source under one configured path."""
    if not path.exists():
        raise CorpusError(f"corpus path does not exist: {path}")
    if path.is_dir():
        if any((path / marker).is_file() for marker in (*_DATASET_MARKERS, "dataset_dict.json")):
            return _open_saved_dataset(path)
        files = sorted([*path.glob("*.jsonl"), *path.glob("*.parquet")])
        if not files:
            raise CorpusError(
                f"corpus directory {path} has no *.jsonl or *.parquet files and is not a saved dataset "
                f"(no {' / '.join(_DATASET_MARKERS)})"
            )
        return [source for file in files for source in _open_path(file)]
    if path.suffix == ".jsonl":
        return [_JsonlSource(path)]
    if path.suffix == ".parquet":
        return [_ParquetSource(path)]
    raise CorpusError(f"corpus file {path} is neither .jsonl nor .parquet")


def _format_skipped(skipped: dict[str, int]) -> str:
    return ", ".join(f"{reason}={count}" for reason, count in skipped.items() if count) or "none"


class Corpus:
    """Indexed documents of one or more corpus paths, sampled uniformly by a caller-owned seeded RNG.

    Indexing reads every record once (so skip counts are known up front) and keeps only positions; ``get`` and
    ``sample`` read one record from disk. Document ``i`` is stable for unchanged files, so a seed replays a run.
    """

    def __init__(self, config: CorpusConfig) -> None:
        self.config = config
        paths = [Path(p) for p in (config.path if isinstance(config.path, tuple) else (config.path,))]
        self._sources: list[_Source] = [source for path in paths for source in _open_path(path)]
        self.skipped: dict[str, int] = dict.fromkeys(SKIP_REASONS, 0)
        self._starts = [0]
        for source in self._sources:
            for reason, count in source.skipped.items():
                self.skipped[reason] += count
            self._starts.append(self._starts[-1] + len(source))
            logger.info(
                "corpus: indexed %d documents from %s (skipped: %s)",
                len(source),
                source.name,
                _format_skipped(source.skipped),
            )
        shown = ", ".join(str(p) for p in paths)
        if len(self) == 0:
            raise CorpusError(
                f"no valid documents in corpus {shown} ({len(self._sources)} source(s); skipped: "
                f"{_format_skipped(self.skipped)}); each record needs a non-empty string "
                f"{' or '.join(repr(k) for k in TEXT_KEYS)}"
            )
        logger.info(
            "corpus: %d documents from %d source(s) in %s (skipped: %s)",
            len(self),
            len(self._sources),
            shown,
            _format_skipped(self.skipped),
        )

    @classmethod
    def load(cls, path: str | Path | Sequence[str | Path], **options: Any) -> Corpus:
        """Index ``path`` with default or given :class:`CorpusConfig` options (``max_words_games=...``)."""
        paths = tuple(str(p) for p in path) if isinstance(path, (list, tuple)) else str(path)
        return cls(CorpusConfig.from_dict({**options, "path": paths}))

    def __len__(self) -> int:
        return self._starts[-1]

    def get(self, index: int) -> Document:
        """Document number ``index`` (``0 <= index < len(self)``), read from disk."""
        if isinstance(index, bool) or not isinstance(index, int) or not 0 <= index < len(self):
            raise IndexError(f"document index must be an int in [0, {len(self)}), got {index!r}")
        source = bisect.bisect_right(self._starts, index) - 1
        return self._sources[source].read(index - self._starts[source])

    def sample(self, rng: random.Random) -> Document:
        """A document drawn uniformly from the valid ones with ``rng`` (a ``random.Random``)."""
        return self.get(rng.randrange(len(self)))

    def sample_text(self, rng: random.Random, setting: str) -> str:
        """The text of a sampled document, truncated to ``setting``'s word budget, ready for a designer prompt."""
        limit = self.config.max_words(setting)
        return truncate_words(self.sample(rng).text, limit)
