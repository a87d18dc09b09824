"""``spade-eval compare BASE_DIR RUN_DIR``: the paper's base-vs-trained table, with how sure each delta is.

Rows as the paper reports them: the eight held-out games benchmarks and their average, BFCL-v4 (BFCL's overall
accuracy, the paper's column, when a run has all three BFCL suites), BFCL-v4 multi-turn and ACEBench-Agent (then BFCL
non-live and live when present). Base and run are the scores their ``results.json`` report;
the delta's 95% interval is a paired, studentized bootstrap over the items both runs scored
(:mod:`~spade_envs.evaluation.bootstrap`): items are drawn with replacement (within each BFCL / ACEBench category,
weighted as the suite's own ``aggregate`` weighs them, so the headline formula keeps its parts), the same draw for
both runs. The average's interval uses the mean of the eight suites' deltas (and standard errors) in each draw.
Seeded, so a table is reproducible.

Comparing runs under different protocols would report a difference that training did not make, so differing
sampling, data checksums, Reasoning-Gym split or other protocol provenance is refused (:class:`CompareError`)
unless ``allow_mismatch``; then, and for differing package versions, the table carries a note. The samples are
checked too, not only the headers: each carries its protocol's fingerprint, and a sample whose stamp is not the one
its ``results.json`` reports (or a run written before samples were stamped) is refused the same way
(:mod:`~spade_envs.evaluation.compare_checks`). A suite that either run did not measure completely (it stopped on a
refused request, was interrupted, or has failed samples) is marked ``(incomplete)`` in its row and in the average's,
and the notes say why; refused and timed-out samples (scored wrong) are counted there.

Each row's interval is a 95% interval for that row alone. A table of twelve rows shows, with no real difference,
some row that excludes zero in about 44% of tables, so a last column gives each row's bootstrap p-value of "no
difference", Holm-adjusted over every row that has an interval: below 0.05 means a difference at a family-wise 5%.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

from spade_envs.envs.errors import SpadeEnvError
from spade_envs.evaluation.bfcl_overall import PARTS, overall_aggregate, overall_from_scores
from spade_envs.evaluation.bootstrap import Bootstrap, holm, mean_of, stratified_bootstrap
from spade_envs.evaluation.compare_checks import protocol_differences, record_differences, run_health
from spade_envs.evaluation.records import SampleRecord

__all__ = ["EIGHT", "CompareError", "Comparison", "Row", "compare_runs", "format_comparison", "paired_bootstrap"]

#: The paper's BFCL-v4 column: BFCL's overall accuracy over the three BFCL suites (:mod:`..bfcl_overall`).
OVERALL = "bfcl_v4_overall"
#: The paper's games columns, in its order, with their labels.
EIGHT = {"aime25": "AIME-25", "aime26": "AIME-26", "gpqa_diamond": "GPQA-Diamond", "livecodebench_v6": "LCB v6",
         "rg_math": "RG-Math", "rg_algorithmic": "RG-Algorithmic", "rg_cognition": "RG-Cognition",
         "rg_logic": "RG-Logic"}  # fmt: skip
TOOL = {OVERALL: "BFCL-v4", "bfcl_multi_turn": "BFCL-v4 MT", "acebench_agent": "ACEBench-Agent",
        "bfcl_non_live": "BFCL-v4 non-live", "bfcl_live": "BFCL-v4 live"}  # fmt: skip
AVERAGE = "Average (8)"


class CompareError(SpadeEnvError):
    """The two runs cannot be compared as asked (a missing results file, or different protocols)."""


@dataclass
class Row:
    """One table row; scores and deltas in [0, 1] (``None`` where a run lacks the suite)."""

    label: str
    base: float | None
    run: float | None
    low: float | None = None
    high: float | None = None
    common_items: int = 0
    common_delta: float | None = None
    #: A run did not measure this suite (or, for the average, one of its suites) completely: see the notes.
    incomplete: bool = False
    #: The bootstrap p-value of "no difference", and the same Holm-adjusted over the table's rows with an interval.
    p: float | None = None
    p_holm: float | None = None

    @property
    def delta(self) -> float | None:
        return None if self.base is None or self.run is None else self.run - self.base


@dataclass
class Comparison:
    """The rows in table order and the notes under the table."""

    rows: list[Row]
    notes: list[str] = field(default_factory=list)


def _read_run(path: Path) -> tuple[dict[str, Any], dict[str, dict[tuple[str, int], SampleRecord]]]:
    results_path = path / "results.json"
    if not results_path.is_file():
        raise CompareError(f"{results_path} does not exist: give a directory that spade-eval wrote")
    results = json.loads(results_path.read_text(encoding="utf-8"))
    records: dict[str, dict[tuple[str, int], SampleRecord]] = {}
    for name in results.get("suites", {}):
        lines = path / f"{name}.jsonl"
        found: dict[tuple[str, int], SampleRecord] = {}
        if lines.is_file():
            for line in lines.read_text(encoding="utf-8").splitlines():
                try:
                    record = SampleRecord.from_json(json.loads(line))
                except (json.JSONDecodeError, KeyError, TypeError):
                    continue  # a half-written last line of a killed run
                found[record.key] = record
        records[name] = found
    return results, records


def _item_records(records: dict[tuple[str, int], SampleRecord], keys: set[tuple[str, int]]) -> dict[str, SampleRecord]:
    """One record per item over ``keys``: the mean of its samples, with the first sample's detail (its category)."""
    by_item: dict[str, list[SampleRecord]] = {}
    for key in sorted(keys):
        by_item.setdefault(key[0], []).append(records[key])
    return {item: SampleRecord(rs[0].suite, item, 0, sum(r.score for r in rs) / len(rs), detail=rs[0].detail)
            for item, rs in by_item.items()}  # fmt: skip


def _strata(items: dict[str, SampleRecord]) -> dict[Any, list[str]]:
    strata: dict[Any, list[str]] = {}
    for item, record in sorted(items.items()):
        strata.setdefault(record.detail.get("category", record.detail.get("kind")), []).append(item)
    return strata


def _score(aggregate: Callable[[Sequence[SampleRecord]], dict[str, float]], records: list[SampleRecord]) -> float:
    return float(aggregate(records).get("score", 0.0))


def paired_bootstrap(
    base: dict[tuple[str, int], SampleRecord],
    run: dict[tuple[str, int], SampleRecord],
    aggregate: Callable[[Sequence[SampleRecord]], dict[str, float]],
    *,
    draws: int = 1000,
    seed: int = 0,
) -> tuple[float, Bootstrap | None, int]:
    """``(delta on the common items, its bootstrap, number of common items)`` of ``run`` minus ``base``.

    Items (all their common samples together, averaged) are drawn with replacement within strata (a record's
    ``category`` or ``kind``), the same draw for both runs. Each stratum's weight in the suite's score is read off
    its ``aggregate`` (the score of a run that gets that stratum's items right and every other item wrong), so the
    bootstrap follows the suite's own formula; every aggregate of the suites is such a weighted mean.
    """
    common = base.keys() & run.keys()
    b_items, r_items = _item_records(base, common), _item_records(run, common)
    if not b_items:
        return 0.0, None, 0
    strata = _strata(b_items)
    weights = []
    for members in strata.values():
        inside = set(members)
        probe = [replace(r, score=float(i in inside)) for i, r in b_items.items()]
        weights.append(_score(aggregate, probe))
    diffs = [np.array([r_items[i].score - b_items[i].score for i in members]) for members in strata.values()]
    boot = stratified_bootstrap(diffs, weights, draws=draws, seed=seed)
    common_delta = _score(aggregate, list(r_items.values())) - _score(aggregate, list(b_items.values()))
    if abs(float(boot.delta) - common_delta) > 1e-9:
        raise CompareError(f"{next(iter(b_items.values())).suite}: its aggregate is not a weighted mean of its "
                           "categories, so the bootstrap cannot follow it")  # fmt: skip
    return common_delta, boot, len(b_items)


def _interval(boot: Bootstrap | None) -> tuple[float | None, float | None]:
    if boot is None:
        return None, None
    low, high = boot.interval()
    return float(low), float(high)


def _aggregator(name: str) -> Callable[[Sequence[SampleRecord]], dict[str, float]]:
    """The suite's own ``aggregate`` (plain mean when the suite cannot be built here, e.g. a missing package)."""
    from spade_envs.evaluation.registry import SUITES, SuiteOptions

    if name == OVERALL:
        return overall_aggregate
    try:
        return SUITES[name](SuiteOptions()).aggregate
    except Exception:  # noqa: BLE001
        return lambda records: {"score": sum(r.score for r in records) / len(records)} if records else {}


def compare_runs(base_dir: Path, run_dir: Path, *, allow_mismatch: bool = False, draws: int = 1000,
                 seed: int = 0) -> Comparison:  # fmt: skip
    """The comparison table of ``run_dir`` against ``base_dir``; see the module docstring."""
    base, base_records = _read_run(base_dir)
    run, run_records = _read_run(run_dir)
    refuse, notes = protocol_differences(base, run)
    refuse += record_differences("base", base, base_records) + record_differences("run", run, run_records)
    if refuse and not allow_mismatch:
        raise CompareError("the runs used different protocols; refusing to compare them (--allow-mismatch compares "
                           "anyway and notes it):\n  " + "\n  ".join(refuse))  # fmt: skip
    notes = [f"protocol differs (compared anyway): {r}" for r in refuse] + notes
    flagged: set[str] = set()
    for side, results in (("base", base), ("run", run)):
        side_flagged, side_notes = run_health(side, results, {**EIGHT, **TOOL})
        flagged |= side_flagged
        notes += side_notes
    if flagged & set(PARTS):
        flagged.add(OVERALL)
    for side, records in ((base, base_records), (run, run_records)):
        _add_bfcl_overall(side, records, notes)
    rows: list[Row] = []
    eight_draws: list[Bootstrap] = []
    games = any(name in base["suites"] or name in run["suites"] for name in EIGHT)
    for name, label in [*(EIGHT.items() if games else []), *([(AVERAGE, AVERAGE)] if games else []), *TOOL.items()]:
        if name == AVERAGE:
            rows.append(_average(rows, eight_draws, notes))
            continue
        b = base["suites"].get(name, {}).get("scores", {}).get("score")
        r = run["suites"].get(name, {}).get("scores", {}).get("score")
        if b is None and r is None and name not in EIGHT:
            continue
        row = Row(label, b, r, incomplete=name in flagged)
        if b is not None and r is not None:
            common_delta, boot, n = paired_bootstrap(base_records.get(name, {}), run_records.get(name, {}),
                                                     _aggregator(name), draws=draws, seed=seed)  # fmt: skip
            row.low, row.high = _interval(boot)
            row.p = None if boot is None else float(boot.p_value())
            row.common_items, row.common_delta = n, common_delta
            if name in EIGHT and boot is not None:
                eight_draws.append(boot)
            scored = {k[0] for k in base_records.get(name, {})} | {k[0] for k in run_records.get(name, {})}
            if n < len(scored) or n != base["suites"][name].get("items"):
                notes.append(f"{label}: the interval covers the {n} items both runs scored (delta there "
                             f"{100 * common_delta:+.1f}); the reported scores cover more")  # fmt: skip
        rows.append(row)
    family = [row for row in rows if row.p is not None]
    for row, adjusted in zip(family, holm([row.p for row in family])):  # type: ignore[misc]
        row.p_holm = adjusted
    return Comparison(rows, list(dict.fromkeys(notes)))


def _add_bfcl_overall(results: dict[str, Any], records: dict[str, dict[tuple[str, int], SampleRecord]],
                      notes: list[str]) -> None:  # fmt: skip
    """Add BFCL's overall accuracy as a suite of its own when the run has all three BFCL suites."""
    present = [name for name in PARTS if name in results["suites"]]
    if len(present) < len(PARTS):
        if present:
            notes.append(f"BFCL-v4 (BFCL's overall accuracy) needs {', '.join(PARTS)}; a run has only "
                         f"{', '.join(present)}")  # fmt: skip
        return
    scores = [results["suites"][name].get("scores", {}) for name in PARTS]
    results["suites"][OVERALL] = {"scores": {"score": overall_from_scores(*scores)},
                                  "items": sum(results["suites"][name].get("items", 0) for name in PARTS)}  # fmt: skip
    records[OVERALL] = {key: r for name in PARTS for key, r in records.get(name, {}).items()}


def _average(rows: list[Row], draws: list[Bootstrap], notes: list[str]) -> Row:
    present = [row for row in rows if row.delta is not None]
    if not present:
        return Row(AVERAGE, None, None)
    row = Row(AVERAGE, sum(r.base for r in present) / len(present), sum(r.run for r in present) / len(present),  # type: ignore[misc]
              incomplete=any(r.incomplete for r in present))  # fmt: skip
    if len(present) < len(EIGHT):
        row.label = f"Average ({len(present)} of 8)"
        notes.append(f"the average covers the {len(present)} of the eight benchmarks that both runs report")
    if len(draws) == len(present):
        mean = mean_of(draws)
        row.low, row.high = _interval(mean)
        row.p = float(mean.p_value())
    return row


def _pct(value: float | None, signed: bool = False) -> str:
    return "-" if value is None else f"{100 * value:+.1f}" if signed else f"{100 * value:.1f}"


def _p(value: float | None) -> str:
    if value is None:
        return "-"
    return "<0.001" if value < 0.001 else f"{value:.3f}" if value < 0.01 else f"{value:.2f}"


def format_comparison(comparison: Comparison, base_name: str, run_name: str) -> str:
    """The Markdown table (scores x100, one decimal) and its notes."""
    header = ["benchmark", f"base ({base_name})", f"run ({run_name})", "delta", "95% CI", "items", "p (Holm)"]
    lines = [header]
    for row in comparison.rows:
        interval = "-" if row.low is None else f"[{_pct(row.low, True)}, {_pct(row.high, True)}]"
        items = str(row.common_items) if row.common_items else ""
        label = row.label + (" (incomplete)" if row.incomplete else "")
        label = f"**{label}**" if row.label.startswith("Average") else label
        lines.append([label, _pct(row.base), _pct(row.run), _pct(row.delta, True), interval, items, _p(row.p_holm)])
    widths = [max(len(line[i]) for line in lines) for i in range(len(header))]
    fmt = lambda cells: "| " + " | ".join(c.ljust(w) for c, w in zip(cells, widths)) + " |"  # noqa: E731
    out = [fmt(lines[0]), "|" + "|".join("-" * (w + 2) for w in widths) + "|", *map(fmt, lines[1:])]
    out.append("")
    out.append("95% CI: paired studentized bootstrap over the items both runs scored. items: how many.")
    family = sum(row.p_holm is not None for row in comparison.rows)
    out.append(f"Each interval is for its row alone, not adjusted for the {family} rows that have one. p (Holm): "
               "the bootstrap p-value of no difference, Holm-adjusted over those rows; below 0.05, the row differs "
               "at a family-wise 5% level.")  # fmt: skip
    out += [f"- note: {n}" for n in comparison.notes]
    return "\n".join(out) + "\n"
