"""The leak check as a measured classifier: precision and recall on a labelled set, kept from regressing.

``data/leak_cases.json`` holds (hint, instance) cases written by hand for both settings: leaks in many answer
formats and honest approach hints. The ``dev`` split was used while writing the rules; the ``heldout`` split was
written afterwards and scored once, untouched since. ``docs/designer.md`` reports the same numbers (checked here).
"""

import json
from pathlib import Path

import pytest

from spade_envs.design.leaks import classify_case, leak_check_scores

ROOT = Path(__file__).resolve().parents[3]
CASES = json.loads((Path(__file__).parents[1] / "data" / "leak_cases.json").read_text())["cases"]
DOC = (ROOT / "docs" / "designer.md").read_text()

#: Measured values (docs/designer.md); a change of the check must not go below them.
FLOORS = {
    ("dev", "all"): (1.0, 0.890),
    ("dev", "games"): (1.0, 0.861),
    ("dev", "tool_use"): (1.0, 0.928),
    ("heldout", "all"): (1.0, 0.833),
    ("heldout", "games"): (1.0, 0.666),
    ("heldout", "tool_use"): (1.0, 1.0),
}


def scores(split):
    return leak_check_scores([c for c in CASES if c["split"] == split])


def test_the_labelled_set_covers_both_settings_and_both_labels():
    assert len(CASES) >= 60 and len({c["id"] for c in CASES}) == len(CASES)
    for setting in ("games", "tool_use"):
        mine = [c for c in CASES if c["setting"] == setting]
        assert sum(c["leak"] for c in mine) >= 15 and sum(not c["leak"] for c in mine) >= 15
    assert all(c["why"] for c in CASES)


@pytest.mark.parametrize(("split", "setting"), sorted(FLOORS))
def test_precision_and_recall_do_not_regress(split, setting):
    measured = scores(split)[setting]
    precision, recall = FLOORS[(split, setting)]
    assert measured["precision"] >= precision and measured["recall"] >= recall, measured


@pytest.mark.parametrize(("split", "setting"), sorted(FLOORS))
def test_the_doc_reports_the_measured_numbers(split, setting):
    t = scores(split)[setting]
    row = (f"| {split} | {setting} | {t['cases']} | {t['tp'] + t['fn']} | {t['precision']:.2f} | "
           f"{t['recall']:.2f} |")  # fmt: skip
    assert row in DOC, row


def test_every_honest_dev_hint_passes_and_every_flag_names_a_value():
    for case in CASES:
        why = classify_case(case)
        if case["split"] == "dev" and not case["leak"]:
            assert why is None, (case["id"], why)
        if why is not None:
            assert "the hint" in why
