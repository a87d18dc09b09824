"""Plain-text tables for the CLI and the benchmarks (aligned columns, a rule under the header)."""

from __future__ import annotations

from collections.abc import Sequence

__all__ = ["format_table"]


def format_table(header: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    """Left-aligned columns separated by two spaces, with a dashed rule under ``header``."""
    cells = [[str(c) for c in header], *([str(c) for c in row] for row in rows)]
    widths = [max(len(row[i]) for row in cells) for i in range(len(header))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(row, widths)).rstrip() for row in cells]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)
