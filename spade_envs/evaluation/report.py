"""The final table (stdout), ``results.md`` and ``results.json`` (versions, dataset checksums, sampling)."""

from __future__ import annotations

import importlib.metadata
import json
import platform
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from spade_envs.evaluation.protocol import fingerprint
from spade_envs.evaluation.runner import SuiteRun

__all__ = ["PACKAGES", "format_table", "package_versions", "write_reports"]

PACKAGES = ("spade-verl", "reasoning-gym", "math-verify", "bfcl-eval", "verl")


def package_versions() -> dict[str, str]:
    """Versions of the packages that decide scores (``not installed`` where absent), and Python's."""
    versions = {"python": platform.python_version()}
    for name in PACKAGES:
        try:
            versions[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            versions[name] = "not installed"
    return versions


def _short(why: str, limit: int = 100) -> str:
    """The first sentence of a reason, for a table cell (``results.json`` and stderr keep all of it)."""
    first = why.split(". ")[0].rstrip(".")
    return first if len(first) <= limit else first[: limit - 3] + "..."


def _status(run: SuiteRun) -> str:
    if run.error is not None:
        return f"not run: {_short(run.error)}"
    if run.stopped is not None:
        return f"stopped: {_short(run.stopped)}"
    counted = [f"{run.scorer_timeouts} scorer timeouts"] if run.scorer_timeouts else []
    counted += [f"{run.inference_errors} over the context length"] if run.inference_errors else []
    if run.complete and not run.failures:
        return "ok" + (f" ({', '.join(counted)})" if counted else "")
    notes = [f"{len(run.failures)} failed"] if run.failures else []
    if run.interrupted:
        notes.append(f"interrupted by {run.interrupted}")
    if run.abandoned:
        notes.append(f"{run.abandoned} abandoned in flight")
    notes += counted
    return f"incomplete ({', '.join(notes) or 'samples missing'})"


def _row(run: SuiteRun) -> list[str]:
    score = run.scores.get("score")
    status = _status(run)
    also = ", ".join(f"{k} {100 * run.scores[k]:.1f}" for k in run.suite.shown_metrics if k in run.scores)
    return [run.suite.name, run.suite.metric, "-" if score is None else f"{100 * score:.1f}", also,
            str(len(run.items)), str(len(run.records)), status]  # fmt: skip


def format_table(runs: Sequence[SuiteRun], errors: dict[str, str] | None = None) -> str:
    """A Markdown table: suite, metric, score x100 (one decimal), items, scored samples, status; then the mean.

    An ``also`` column after the score shows the secondary metrics a suite names in ``shown_metrics`` (ACEBench's
    process accuracy); it appears only when some suite has one.
    """
    header = ["suite", "metric", "score", "also", "items", "samples", "status"]
    rows = [_row(run) for run in runs]
    rows += [[name, "-", "-", "", "-", "-", f"not run: {_short(why)}"] for name, why in (errors or {}).items()]
    scored = [run.scores["score"] for run in runs if "score" in run.scores]
    if len(scored) > 1:
        rows.append(["average", "", f"{100 * sum(scored) / len(scored):.1f}", "", "", "", ""])
    if not any(row[3] for row in rows):
        header, rows = header[:3] + header[4:], [row[:3] + row[4:] for row in rows]
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    line = lambda cells: "| " + " | ".join(c.ljust(w) for c, w in zip(cells, widths)) + " |"  # noqa: E731
    return "\n".join([line(header), "|" + "|".join("-" * (w + 2) for w in widths) + "|", *map(line, rows)])


def write_reports(
    out_dir: Path, runs: Sequence[SuiteRun], settings: dict[str, Any], errors: dict[str, str] | None = None
) -> str:
    """Write ``results.md`` and ``results.json`` under ``out_dir``; return the table."""
    table = format_table(runs, errors)
    versions = package_versions()
    suites = {
        run.suite.name: {
            "metric": run.suite.metric,
            "scores": run.scores,
            "items": len(run.items),
            "samples": len(run.records),
            "complete": run.complete,
            "error": run.error,
            "interrupted": run.interrupted,
            "stopped": run.stopped,
            "abandoned_in_flight": run.abandoned,
            "scorer_timeouts": run.scorer_timeouts,
            "inference_errors": run.inference_errors,
            "failures": run.failures[:50],
            "failed_samples": len(run.failures),
            "resumed_samples": run.resumed,
            "set_aside_samples": run.set_aside,
            "replayed_refusals": run.replayed_refusals,
            "protocol": run.protocol,
            "protocol_sha256": fingerprint(run.protocol) if run.protocol else None,
            "sampling": run.sampling.to_dict(),
            "data_sha256": run.suite.checksums(),
            "provenance": run.suite.provenance,
        }
        for run in runs
    }
    payload = {"created": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "settings": settings, "versions": versions,
               "suites": suites, "not_run": errors or {}}  # fmt: skip
    (out_dir / "results.json").write_text(json.dumps(payload, indent=2, default=str) + "\n", encoding="utf-8")
    meta = "\n".join(f"- {k}: {v}" for k, v in {**settings, **versions}.items())
    (out_dir / "results.md").write_text(f"# spade-eval results\n\n{table}\n\n{meta}\n", encoding="utf-8")
    return table
