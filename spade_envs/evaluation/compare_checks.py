"""What ``compare`` checks before it trusts two runs: the same protocol, and each suite measured completely.

Comparing runs under different protocols would report a difference that training did not make: differing sampling,
data checksums, Reasoning-Gym split or other protocol provenance, and samples whose stamp is not the protocol their
``results.json`` reports, are listed by :func:`protocol_differences` and :func:`record_differences` (``compare``
refuses them unless asked). A suite that stopped on a refused request, was interrupted or has failed samples is not
a measurement of the model on the whole benchmark, so :func:`run_health` flags it (its row is marked and the notes say
why); samples scored wrong because the endpoint refused them as over its context, or whose scorer timed out, are
counted in the notes.
"""

from __future__ import annotations

import json
from typing import Any

from spade_envs.evaluation.protocol import RUN_KEYS, VERSION_KEYS
from spade_envs.evaluation.records import SampleRecord

__all__ = ["protocol_differences", "record_differences", "run_health"]


def record_differences(side: str, results: dict[str, Any], records: dict[str, dict[tuple[str, int], SampleRecord]]
                       ) -> list[str]:  # fmt: skip
    """Where a run's samples were not made under the protocol its ``results.json`` reports for them."""
    found: list[str] = []
    for name, suite in results.get("suites", {}).items():
        expected = suite.get("protocol_sha256")
        mine = records.get(name, {}).values()
        if not mine:
            continue
        if not expected:
            found.append(f"{name}: the {side} run's results.json names no protocol (written before samples were "
                         "stamped), so its samples cannot be checked")  # fmt: skip
            continue
        other = sum(r.protocol != expected for r in mine)
        if other:
            found.append(f"{name}: {other} of {len(mine)} samples in the {side} run's {name}.jsonl were made under "
                         "another protocol than its results.json reports")  # fmt: skip
    return found


def protocol_differences(base: dict[str, Any], run: dict[str, Any]) -> tuple[list[str], list[str]]:
    """``(protocol differences, other notes)`` between two ``results.json`` payloads, per shared suite."""
    refuse: list[str] = []
    notes: list[str] = []
    shared = [name for name in base["suites"] if name in run["suites"]]
    for name in shared:
        b, r = base["suites"][name], run["suites"][name]
        if b.get("sampling") != r.get("sampling"):
            refuse.append(f"{name}: sampling differs (base {b.get('sampling')}, run {r.get('sampling')})")
        if sorted(b.get("data_sha256", {}).values()) != sorted(r.get("data_sha256", {}).values()):
            refuse.append(f"{name}: data checksums differ")
        bp, rp = b.get("provenance", {}), r.get("provenance", {})
        own = [
            side for side, p in (("base", bp), ("run", rp)) if (p.get("user_simulator") or {}).get("model_under_test")
        ]
        if own:
            refuse.append(f"{name}: the {' and the '.join(own)} run's user simulator was the model under test, so the "
                          "two runs played against different users; rerun both with one fixed --user-base-url/"
                          "--user-model")  # fmt: skip
        for key in sorted(set(bp) | set(rp)):
            if key in RUN_KEYS or bp.get(key) == rp.get(key):
                continue
            what = f"{name}: {key} differs (base {_short(bp.get(key))}, run {_short(rp.get(key))})"
            (notes if key in VERSION_KEYS else refuse).append(what)
    for only, side in (
        (set(base["suites"]) - set(run["suites"]), "base"),
        (set(run["suites"]) - set(base["suites"]), "run"),
    ):
        if only:
            notes.append(f"only the {side} run has {', '.join(sorted(only))}")
    b_limit, r_limit = base.get("settings", {}).get("limit"), run.get("settings", {}).get("limit")
    if b_limit != r_limit:
        refuse.append(f"--limit differs (base {b_limit}, run {r_limit})")
    elif b_limit is not None:
        notes.append(f"both runs used --limit {b_limit}: only the first {b_limit} items of each suite were scored")
    bv, rv = base.get("versions", {}), run.get("versions", {})
    for key in sorted(k for k in set(bv) | set(rv) if bv.get(k) != rv.get(k)):
        notes.append(f"version of {key} differs (base {bv.get(key)}, run {rv.get(key)})")
    return refuse, notes


def _short(value: Any, limit: int = 80) -> str:
    text = json.dumps(value, default=str) if not isinstance(value, str) else value
    return text if len(text) <= limit else text[: limit - 3] + "..."


def run_health(side: str, results: dict[str, Any], labels: dict[str, str]) -> tuple[set[str], list[str]]:
    """``(suites to flag as incomplete, notes)`` for one run's ``results.json``; ``side`` is ``base`` or ``run``."""
    flagged: set[str] = set()
    notes: list[str] = []
    for name, suite in results.get("suites", {}).items():
        label = labels.get(name, name)
        scored = int(suite.get("samples", 0))
        planned = int(suite.get("items", 0)) * int((suite.get("sampling") or {}).get("n_samples", 1))
        why = [f"stopped: {_short(suite['stopped'], 160)}"] if suite.get("stopped") else []
        why += [f"interrupted by {suite['interrupted']}"] if suite.get("interrupted") else []
        if not suite.get("complete", True) or scored < planned:
            why.append(f"{scored} of {planned} samples scored")
        failed = int(suite.get("failed_samples", 0))
        why += [f"{failed} failed (rerun to retry them)"] if failed else []
        if why:
            flagged.add(name)
            notes.append(f"{label}: {side} is incomplete: {', '.join(why)}")
        refused, timeouts = int(suite.get("inference_errors", 0)), int(suite.get("scorer_timeouts", 0))
        if refused:
            notes.append(f"{label}: {side} has {refused} of {scored} samples the endpoint refused (over the context "
                         "length), scored wrong")  # fmt: skip
        if timeouts:
            notes.append(f"{label}: {side} has {timeouts} of {scored} samples whose scorer timed out, scored wrong")
    return flagged, notes
