"""The end-of-run report from ``spade_metrics.jsonl``: designs, failures, live envs, plots.

Per step: designs admitted and made, why the others failed, regret and win rates, the designer reward; memory size,
evictions, live envs by age, singleton groups and excluded samples; then the live environments at the end, and PNG
plots when matplotlib is installed.

``curriculum=True`` (the demo) adds a second figure from a few seconds of the curriculum simulator: SPADE's blend
reward against a fixed pool, so that a reader of a short run sees where the loop is meant to go.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from spade_envs.envs.failures import FAILURE_CODES, HINT_FAILURE_CODES

__all__ = ["curriculum_figure", "step_line", "step_summary", "write_report"]

_PLOTS = (
    ("spade/propose/validity_rate", "validity rate"),
    ("spade/propose/regret_mean", "regret (admitted envs)"),
    ("spade/solve/win_rate", "agent win rate (training plays)"),
    ("spade/designer/reward_mean", "designer reward"),
)
_FAILURE = "spade/propose/failure/"
#: The simulator run behind the curriculum figure: small enough for a few seconds on one CPU core.
CURRICULUM_STEPS, CURRICULUM_SEEDS = 150, 2
_CURRICULUM_TEXT = (
    "The curriculum simulator (`spade-envs simulate`: stand-ins for the model, the run's own curriculum state "
    "machine, designer rewards and memory), {steps} steps x {seeds} seeds, SPADE's blend reward against a fixed "
    "pool of envs. Top left: with SPADE the agent's win rate on the envs it trains on settles in the shaded plateau "
    "band (0.4-0.6), where it learns most, while on the fixed pool it climbs toward 1; top right: SPADE's envs keep "
    "pace with the agent's growing ability (difficulty minus ability stays above 0) while the fixed pool falls "
    "behind it (docs/simulator.md explains the model)."
)


def _rows(run_dir: Path) -> list[dict[str, Any]]:
    path = run_dir / "spade_metrics.jsonl"
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def _num(row: Mapping[str, Any], key: str, fmt: str = "{:.2f}") -> str:
    return fmt.format(row[key]) if key in row else "-"


def step_summary(row: Mapping[str, Any]) -> dict[str, str]:
    """One step's SPADE story as cells: designs admitted/made, failure codes, regret, win rates, reward, live envs."""
    failures = {k[len(_FAILURE) :]: int(v) for k, v in row.items() if k.startswith(_FAILURE)}
    made = row.get("spade/designer/samples")
    validity = row.get("spade/propose/validity_rate")
    if made is None and validity is not None:  # rows written before the trainer's role metrics existed
        made = sum(failures.values()) / (1 - validity) if validity < 1 else None
    designs = "-"
    if made:
        designs = f"{round(validity * made) if validity is not None else 0}/{int(made)}"
    return {
        "step": str(int(row["spade/step"])),
        "designs ok/made": designs,
        "failures": ", ".join(f"{code} x{n}" for code, n in sorted(failures.items())) or "-",
        "regret": _num(row, "spade/propose/regret_mean"),
        "design win rate": _num(row, "spade/propose/win_rate_mean"),
        "agent win rate": _num(row, "spade/solve/win_rate"),
        "designer reward": _num(row, "spade/designer/reward_mean", "{:+.2f}"),
        "live envs": str(int(row["spade/live_envs"])) if "spade/live_envs" in row else "-",
    }


def step_line(row: Mapping[str, Any], seconds: float | None = None, header: bool = False) -> str:
    """A fixed-width console line of :func:`step_summary` (``header=True``: the column names)."""
    cells = step_summary(row) if not header else {k: k for k in step_summary({"spade/step": 0})}
    widths = {"step": 4, "designs ok/made": 15, "failures": 22, "regret": 6, "design win rate": 15,
              "agent win rate": 14, "designer reward": 15, "live envs": 9}  # fmt: skip
    text = "  ".join(cells[k].ljust(w)[: max(w, len(cells[k]))] for k, w in widths.items())
    seconds_cell = "seconds" if header else (f"{seconds:.1f}" if seconds is not None else "-")
    return f"{text}  {seconds_cell}"


def _table(rows: Sequence[Mapping[str, Any]]) -> list[str]:
    keys = list(step_summary({"spade/step": 0}))
    lines = ["| " + " | ".join(keys) + " |", "|---" * len(keys) + "|"]
    lines += ["| " + " | ".join(step_summary(row).values()) + " |" for row in rows]
    return lines


def _failure_section(rows: Sequence[Mapping[str, Any]]) -> list[str]:
    totals: dict[str, int] = {}
    for row in rows:
        for key, value in row.items():
            if key.startswith(_FAILURE):
                totals[key[len(_FAILURE) :]] = totals.get(key[len(_FAILURE) :], 0) + int(value)
    if not totals:
        return ["No design was rejected."]
    meanings = {**FAILURE_CODES, **HINT_FAILURE_CODES}
    lines = ["| failure code | designs | meaning |", "|---|---|---|"]
    lines += [f"| {code} | {n} | {meanings.get(code, '')} |" for code, n in sorted(totals.items())]
    return lines


_HEALTH = (("memory", "spade/memory_size", "{:.0f}"), ("evictions", "spade/memory/evictions", "{:.0f}"),
           ("live envs", "spade/live_envs", "{:.0f}"), ("live age mean", "spade/live_envs/age_mean", "{:.1f}"),
           ("live age max", "spade/live_envs/age_max", "{:.0f}"),
           ("singleton groups", "spade/agent/singleton_groups", "{:.0f}"),
           ("excluded samples", "spade/excluded_samples", "{:.0f}"))  # fmt: skip


def _health_section(rows: Sequence[Mapping[str, Any]]) -> list[str]:
    """Per step: memory size and evictions, live envs and their age in steps, groups and samples left untrained."""
    lines = ["| step | " + " | ".join(name for name, _, _ in _HEALTH) + " |", "|---" * (len(_HEALTH) + 1) + "|"]
    for row in rows:
        cells = [_num(row, key, fmt) for _, key, fmt in _HEALTH]
        lines.append(f"| {int(row['spade/step'])} | " + " | ".join(cells) + " |")
    return lines


def _live_section(run_dir: Path) -> list[str]:
    try:
        live = json.loads((run_dir / "pool_state.json").read_text(encoding="utf-8"))["live"]
        lines = (run_dir / "memory.jsonl").read_text(encoding="utf-8").splitlines()[1:]
    except (OSError, KeyError, ValueError):
        return ["(no pool_state.json / memory.jsonl in the run directory)"]
    records = {r["spec"]["env_id"]: r for r in map(json.loads, lines) if r.get("spec")}
    table = ["| env | skill | designed at step | win rate | regret | plays |", "|---|---|---|---|---|---|"]
    for env_id in live:
        r = records.get(env_id)
        if r is None:
            continue
        origin = "built-in" if env_id.startswith("builtin/") else str(r.get("created_step", "-"))
        table.append(f"| {env_id} | {r['spec']['skill']} | {origin} | {r['win_rate']:.2f} | {r['regret']:.2f} | "
                     f"{r['plays']} |")  # fmt: skip
    return table


def _metric_figure(run_dir: Path, rows: Sequence[Mapping[str, Any]]) -> str:
    try:
        from matplotlib.figure import Figure
    except ImportError:
        return "(install matplotlib for report.png)"
    fig = Figure(figsize=(4 * len(_PLOTS), 3), dpi=80)
    for ax, (key, label) in zip(fig.subplots(1, len(_PLOTS)), _PLOTS):
        points = [(row["spade/step"], row[key]) for row in rows if key in row]
        if points:
            ax.plot(*zip(*points), marker="o")
        ax.set_title(label, fontsize=9)
        ax.set_xlabel("step")
    fig.tight_layout()
    fig.savefig(run_dir / "report.png")
    return "![metrics](report.png)"


def curriculum_figure(path: Path, steps: int = CURRICULUM_STEPS, seeds: int = CURRICULUM_SEEDS) -> Path | None:
    """The simulator's blend-vs-fixed-pool comparison as a PNG (``None`` without matplotlib)."""
    from spade_envs.simulate import SimulationConfig, simulate_many
    from spade_envs.simulate.plots import have_matplotlib, plot_compare

    if not have_matplotlib():
        return None
    base = SimulationConfig.from_dict({"steps": steps, "seeds": seeds})
    groups = {"SPADE (blend)": simulate_many(base), "fixed pool": simulate_many(base.with_updates(fixed_pool=True))}
    return plot_compare(groups, path)


def write_report(run_dir: Path, curriculum: bool = False, about: Sequence[str] = ()) -> Path:
    """Write ``report.md`` (and its figures) next to ``spade_metrics.jsonl``; returns the Markdown path.

    ``about``: lines saying what ran (the demo names its scripted designer here); ``curriculum``: add the
    simulator's figure (a few seconds of CPU).
    """
    run_dir = Path(run_dir)
    rows = _rows(run_dir)
    parts = ["# SPADE run report", ""]
    if about:
        parts += ["## What ran", "", *[f"- {line}" for line in about], ""]
    parts += ["## Per step", "", "Designs admitted / made at each regeneration step, why the others failed, the mean "
              "regret and no-hint win rate of the admitted designs (design win rate), the agent's win rate on its "
              "training plays, the mean designer reward and the live environments.", "", *_table(rows), ""]  # fmt: skip
    parts += ["## Memory, live envs and groups", "", "Memory size and evictions (memory keeps its most useful "
              "records; live envs and the designs about to go live are never evicted), the live envs and how many "
              "steps they have been live, agent groups left with one healthy sample (advantage 0) and samples "
              "excluded from training (env faults, the compact filter).", "", *_health_section(rows), ""]  # fmt: skip
    parts += ["## Design failures", "", *_failure_section(rows), ""]
    parts += ["## Live environments at the end", "", *_live_section(run_dir), ""]
    parts += ["## Metrics", "", _metric_figure(run_dir, rows), ""]
    if curriculum:
        figure = curriculum_figure(run_dir / "curriculum.png")
        parts += ["## Where the curriculum goes (simulated)", ""]
        if figure is None:
            parts += ["(install matplotlib for curriculum.png)", ""]
        else:
            parts += ["![curriculum](curriculum.png)", "",
                      _CURRICULUM_TEXT.format(steps=CURRICULUM_STEPS, seeds=CURRICULUM_SEEDS), ""]  # fmt: skip
    path = run_dir / "report.md"
    path.write_text("\n".join(parts), encoding="utf-8")
    return path
