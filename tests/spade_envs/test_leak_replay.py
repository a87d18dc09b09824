"""The leak check that replays, scored on hints paired with the env they are vetted on (games and tool use).

``data/leak_replay_cases.json`` holds env sources and hints: constants handed over (a passphrase for a middle move, an
answer among distractors, a recipient, id or amount listed in a tool's interface), numbers in words, and honest
hints that name only approach ("read the inbox first", "inspect clues 1, 2, 3 and 4"). Every case is vetted as the
pipeline vets a hint (:func:`spade_envs.measure.vet_hint_on_seeds`: token rules, then replay in the sandbox). The
``dev`` split was used while writing the tool-use replay (its ``dev2`` and ``dev3`` cases were earlier held-out
splits, each scored once before a later change of the check; ``dev4`` holds honest hints on built-ins); ``heldout``
was written after the last fix and scored once.
``docs/designer.md`` reports the numbers (checked here). Print the table: ``.venv/bin/python
tests/spade_envs/test_leak_replay.py``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from spade_envs.leaks import leak_check_scores
from spade_envs.measure import vet_hint_on_seeds
from spade_envs.sandbox import SandboxConfig, WorkerPool

ROOT = Path(__file__).resolve().parents[2]
DATA = json.loads((Path(__file__).parent / "data" / "leak_replay_cases.json").read_text())
ENVS, CASES = DATA["envs"], DATA["cases"]

#: Measured values (docs/designer.md, "replay" table); a change of the check must not go below them.
FLOORS = {
    ("dev", "all"): (0.888, 0.888),
    ("dev", "games"): (0.777, 0.875),
    ("dev", "tool_use"): (1.0, 0.9),
    ("heldout", "all"): (1.0, 0.714),
    ("heldout", "games"): (1.0, 0.5),
    ("heldout", "tool_use"): (1.0, 0.8),
}


def vet(case: dict[str, Any], pool: WorkerPool) -> str | None:
    """Why the pipeline's vetting rejects the case's hint as a leak, or ``None``; any other failure is a bad case."""
    env = ENVS[case["env"]]
    vetting = vet_hint_on_seeds(env["source"], case["hint"], pool, env["setting"], env["seeds"])
    assert vetting.failure in (None, "hint_leak"), (case["id"], vetting.failure, vetting.reason)
    return vetting.reason if vetting.failure else None


@pytest.fixture(scope="module")
def pool():
    with WorkerPool(SandboxConfig(call_timeout_s=5.0, soft_timeout_s=2.0, pool_size=1)) as p:
        yield p


_VERDICTS: dict[str, str | None] = {}
_SCORES: dict[str, dict[str, Any]] = {}


def verdict(case_id: str, pool: WorkerPool) -> str | None:
    """:func:`vet` of one case, once per module run (the scores and the regression tests share it)."""
    if case_id not in _VERDICTS:
        (found,) = [c for c in CASES if c["id"] == case_id]
        _VERDICTS[case_id] = vet(found, pool)
    return _VERDICTS[case_id]


def scores(split: str, pool: WorkerPool) -> dict[str, Any]:
    if split not in _SCORES:
        _SCORES[split] = leak_check_scores([c for c in CASES if c["split"] == split], lambda c: verdict(c["id"], pool))
    return _SCORES[split]


@pytest.mark.parametrize("case_id", ["dev-t_payout-13", "dev-t_payout-14", "dev-t_payout-15", "dev-t_transfer-20"])
def test_a_tool_use_hint_naming_what_the_final_call_needs_is_a_leak(case_id, pool):
    # recipient, invoice id and amount are constants listed in the tool interface (or under 10): the token rules
    # exempt them; the replay swaps each and the payment no longer goes through
    why = verdict(case_id, pool)
    assert why is not None and "no longer wins" in why, why


@pytest.mark.parametrize(
    "case_id", ["dev-t_payout-16", "dev-t_payout-17", "dev-t_transfer-21", "dev2-t_ship-14", "dev4-t_smarthome-0"]
)
def test_an_honest_tool_use_hint_saying_what_to_inspect_first_is_no_leak(case_id, pool):
    # dev2-t_ship-14 says "bay", a word of the needed ``bay="Bay 14"``: the value's kind, not the value;
    # dev4-t_smarthome-0 (a built-in) says "state", an enum value the solution needs: interface vocabulary, no name
    assert verdict(case_id, pool) is None


def test_the_set_has_both_settings_both_labels_and_a_source_per_case():
    assert len(CASES) >= 30 and len({c["id"] for c in CASES}) == len(CASES)
    for setting in ("games", "tool_use"):
        for split in ("dev", "heldout"):
            mine = [c for c in CASES if ENVS[c["env"]]["setting"] == setting and c["split"] == split]
            assert any(c["leak"] for c in mine) and any(not c["leak"] for c in mine), (setting, split)
    assert all(c["why"] and c["setting"] == ENVS[c["env"]]["setting"] for c in CASES)


@pytest.mark.parametrize("split", ["dev", "heldout"])
def test_precision_and_recall_do_not_regress_and_the_doc_reports_them(split, pool):
    doc = (ROOT / "docs" / "designer.md").read_text()
    measured = scores(split, pool)
    for (floor_split, setting), (precision, recall) in FLOORS.items():
        if floor_split == split:
            t = measured[setting]
            assert t["precision"] >= precision and t["recall"] >= recall, (setting, t)
    for setting, t in measured.items():
        row = (f"| {split} (replay) | {setting} | {t['cases']} | {t['tp'] + t['fn']} | {t['precision']:.2f} | "
               f"{t['recall']:.2f} |")  # fmt: skip
        assert row in doc, row


if __name__ == "__main__":
    with WorkerPool(SandboxConfig(call_timeout_s=5.0, soft_timeout_s=2.0, pool_size=1)) as main_pool:
        for name in ("dev", "heldout"):
            for setting, t in scores(name, main_pool).items():
                print(
                    f"| {name} (replay) | {setting} | {t['cases']} | {t['tp'] + t['fn']} | {t['precision']:.2f} | "
                    f"{t['recall']:.2f} | missed {t['missed']} false alarms {t['false_alarms']}"
                )
