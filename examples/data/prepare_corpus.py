"""Turn a folder of text files or a saved Hugging Face dataset into a SPADE corpus (JSONL).

Each output line is ``{"id", "text", "source"}``: ``id`` names the document (the file's path relative to the
folder, or the dataset's ``id`` column / ``<name>:<row>``), ``source`` names the collection it came from. The
result loads with ``spade_envs.design.corpus.Corpus``. Examples::

    python examples/data/prepare_corpus.py my_docs/ corpus.jsonl --min-words 50
    python examples/data/prepare_corpus.py saved_dataset/ corpus.jsonl --text-column content
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections import Counter
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

#: Files of a saved ``datasets.Dataset`` (``dataset_dict.json`` for a ``DatasetDict``).
DATASET_MARKERS = ("dataset_info.json", "state.json", "dataset_dict.json")
DEFAULT_EXTENSIONS = (".txt", ".md")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description="Turn text files or a saved dataset into a SPADE corpus (JSONL).")
    parser.add_argument("input", type=Path, help="a folder of text files (searched recursively) or a saved dataset")
    parser.add_argument("output", type=Path, help="the JSONL file to write (replaced atomically)")
    parser.add_argument("--text-column", default="text", help="text column of a saved dataset (default: text)")
    parser.add_argument("--min-words", type=int, default=1, help="skip documents with fewer words (default: 1)")
    parser.add_argument(
        "--extensions",
        nargs="+",
        default=list(DEFAULT_EXTENSIONS),
        help="file name endings to read from a folder (default: .txt .md)",
    )
    return parser


def _is_saved_dataset(path: Path) -> bool:
    return any((path / marker).is_file() for marker in DATASET_MARKERS)


def _from_folder(root: Path, extensions: Sequence[str], skipped: Counter[str]) -> Iterator[dict[str, Any]]:
    """Documents from every matching file under ``root``, in sorted order; hidden files and folders are skipped."""
    endings = tuple(e if e.startswith(".") else f".{e}" for e in extensions)
    for path in sorted(root.rglob("*")):
        relative = path.relative_to(root)
        if not path.is_file() or not path.name.endswith(endings) or any(p.startswith(".") for p in relative.parts):
            continue
        try:
            text = path.read_text(encoding="utf-8-sig")
        except UnicodeDecodeError:
            skipped["not_utf8"] += 1
            continue
        yield {"id": relative.as_posix(), "text": text, "source": root.name}


def _from_dataset(root: Path, column: str, skipped: Counter[str]) -> Iterator[dict[str, Any]]:
    """Documents from a saved ``Dataset`` (or every split of a ``DatasetDict``), read batch by batch."""
    import datasets

    loaded = datasets.load_from_disk(str(root))
    splits = sorted(loaded.items()) if isinstance(loaded, datasets.DatasetDict) else [("", loaded)]
    for split_name, split in splits:
        if column not in split.column_names:
            raise ValueError(f"dataset {root} has no column {column!r}; columns: {split.column_names}")
        source = f"{root.name}/{split_name}" if split_name else root.name
        wanted = [column, "id"] if "id" in split.column_names and column != "id" else [column]
        row = 0
        for batch in split.select_columns(wanted).iter(batch_size=1024):
            for i, text in enumerate(batch[column]):
                raw_id = batch["id"][i] if "id" in batch else None
                doc_id = str(raw_id) if raw_id not in (None, "") else f"{source}:{row}"
                row += 1
                if not isinstance(text, str):
                    skipped["not_text"] += 1
                    continue
                yield {"id": doc_id, "text": text, "source": source}


def main(argv: Sequence[str] | None = None) -> int:
    """Write the corpus; 0 on success, 1 when nothing was written, 2 for a bad input path or column."""
    args = build_parser().parse_args(argv)
    if args.min_words < 1:
        print(f"error: --min-words must be at least 1, got {args.min_words}", file=sys.stderr)
        return 2
    if not args.input.is_dir():
        print(f"error: input must be a folder or a saved dataset directory: {args.input}", file=sys.stderr)
        return 2
    skipped: Counter[str] = Counter()
    if _is_saved_dataset(args.input):
        records = _from_dataset(args.input, args.text_column, skipped)
    else:
        records = _from_folder(args.input, args.extensions, skipped)

    args.output.parent.mkdir(parents=True, exist_ok=True)
    partial = args.output.with_name(f".{args.output.name}.partial")
    written = 0
    try:
        with partial.open("w", encoding="utf-8") as out:
            for record in records:
                text = record["text"].strip()
                if not text:
                    skipped["empty"] += 1
                elif len(text.split()) < args.min_words:
                    skipped["too_short"] += 1
                else:
                    out.write(json.dumps({**record, "text": text}, ensure_ascii=False) + "\n")
                    written += 1
    except ValueError as exc:
        partial.unlink(missing_ok=True)
        print(f"error: {exc}", file=sys.stderr)
        return 2
    summary = ", ".join(f"{reason}={count}" for reason, count in sorted(skipped.items())) or "none"
    if written == 0:
        partial.unlink(missing_ok=True)
        print(f"error: no documents written from {args.input} (skipped: {summary})", file=sys.stderr)
        return 1
    os.replace(partial, args.output)
    print(f"wrote {written} documents to {args.output} (skipped: {summary})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
