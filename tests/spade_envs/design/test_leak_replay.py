"""The leak check that replays, scored on hints paired with the env they are vetted on (games and tool use).

``data/leak_replay_cases.json`` holds env sources and hints: constants handed over (a passphrase for a middle move, an
answer among distractors, a recipient, id or amount listed in a tool's interface), numbers in words, and honest
hints that name only approach ("read the inbox first", "inspect clues 1, 2, 3 and 4"). Every case is vetted as the
pipeline vets a hint (:func:`spade_envs.design.measure.vet_hint_on_seeds`: token rules, then replay in the sandbox). The
``dev`` split was used while writing the tool-use replay (its ``dev2`` and ``dev3`` cases were earlier held-out
splits, each scored once before a later change of the check; ``dev4`` holds honest hints on built-ins); ``heldout``
was written after the last fix and scored once.
``docs/designer.md`` reports the numbers (checked here). Print the table: ``.venv/bin/python
tests/spade_envs/design/test_leak_replay.py``.
"""

from __future__ import annotations

import json
import unicodedata
from pathlib import Path
from typing import Any

import pytest

from spade_envs.design.leak_replay import MAX_REPLAYS, replay_leak, replay_tool_leak
from spade_envs.design.leaks import hint_leaks, leak_check_scores
from spade_envs.design.measure import vet_hint_on_seeds
from spade_envs.envs.tooluse import parse_agent_text
from spade_envs.sandbox import SandboxConfig, WorkerPool

ROOT = Path(__file__).resolve().parents[3]
DATA = json.loads((Path(__file__).parents[1] / "data" / "leak_replay_cases.json").read_text())
ENVS, CASES = DATA["envs"], DATA["cases"]

#: Measured values (docs/designer.md, "replay" table); a change of the check must not go below them.
FLOORS = {
    ("dev", "all"): (0.894, 0.944),
    ("dev", "games"): (0.789, 0.937),
    ("dev", "tool_use"): (1.0, 0.95),
    ("heldout", "all"): (1.0, 0.857),
    ("heldout", "games"): (1.0, 1.0),
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


class _CountingEnv:
    """An in-process stand-in for a sandboxed tool-use env: wins when ``won(action)``, never ends otherwise."""

    def __init__(self, won, max_turns: int = 10**12) -> None:
        self.won, self.max_turns, self.episodes, self.steps = won, max_turns, 0, 0

    def reset(self, seed):
        self.episodes += 1
        return "request", {}

    def tools(self):
        return []

    def step(self, action):
        self.steps += 1
        assert self.steps < 10_000, "the replay does not end"
        win = self.won(action)
        return "ok", 1.0 if win else 0.0, win, False, {}


def test_a_replay_ends_with_the_solution_even_if_the_env_never_ends_the_episode():
    # a hostile env declares max_turns 10**12 and never terminates after a wrong value: the host must not loop
    env = _CountingEnv(lambda a: '"code": 4821' in a)
    turn = '<tool_call>{"name": "open", "arguments": {"code": 4821}}</tool_call>'
    why = replay_tool_leak(env, "the code is 4821", 0, [turn], None)
    assert why is not None and "no longer wins" in why and env.steps <= 3
    env = _CountingEnv(lambda a: "4821" in a)
    assert replay_leak(env, "the code is 4821", 0, ["enter 4821"], None) is not None and env.steps <= 3


def test_a_hint_naming_thousands_of_carried_values_is_flagged_without_thousands_of_replays():
    # every replay wins (the values are decoys), so without a budget each of 30,000 named digits costs an episode
    env = _CountingEnv(lambda a: True, max_turns=30)
    turn = f"<tool_call>{json.dumps({'name': 'f', 'arguments': {'xs': [1] * 3000}})}</tool_call>"
    why = replay_tool_leak(env, "1", 0, [turn] * 10, None)
    assert why is not None and "more than" in why and env.episodes <= MAX_REPLAYS
    env = _CountingEnv(lambda a: True, max_turns=30)
    why = replay_leak(env, "use 17", 0, ["press 17"] * 3000, None)
    assert why is not None and "more than" in why and env.episodes <= MAX_REPLAYS


@pytest.mark.parametrize(
    ("arguments", "hint"),
    [
        ({"a": 48, "b": 21}, "the code is 4821"),  # one value split over two arguments
        ({"digits": [4, 8, 2, 1]}, "the code is 4821"),  # digit by digit, each under 10 (exempt by the token rules)
        ({"pin": ["48", "21"]}, "the pin is four eight two one"),
        ({"amount_cents": 1250}, "pay $12.50"),  # cents named as dollars
    ],
)
def test_a_value_the_hint_names_in_another_form_than_the_call_carries_is_still_replayed(arguments, hint):
    turn = f"<tool_call>{json.dumps({'name': 'pay', 'arguments': arguments})}</tool_call>"
    env = _CountingEnv(lambda a: a == turn, max_turns=5)
    why = replay_tool_leak(env, hint, 0, [turn], None)
    assert why is not None and "no longer wins" in why


def test_numbers_of_a_call_the_hint_does_not_name_whole_are_not_replayed():
    turn = f"<tool_call>{json.dumps({'name': 'pay', 'arguments': {'a': 48, 'b': 21, 'cents': 1200}})}</tool_call>"
    env = _CountingEnv(lambda a: a == turn, max_turns=5)
    assert replay_tool_leak(env, "the code is 2148; pay 12 dollars", 0, [turn], None) is None
    assert env.episodes == 0


def test_a_call_hidden_inside_an_answer_is_replayed_as_the_env_parses_it():
    # the env's parser finds calls and answers apart; the replay read "<answer>...</answer>" as one block and swapped
    # only its text, where the JSON escape \u0042ravo shows no capitalised "Bravo"
    call = '<tool_call>{"name": "pay", "arguments": {"to": "\\u0042ravo"}}</tool_call>'
    turn = f"<answer>sent</tool_call>{call}</answer>"

    def won(action: str) -> bool:
        return any(arguments.get("to") == "Bravo" for _name, arguments in parse_agent_text(action)[0])

    why = replay_tool_leak(_CountingEnv(won, max_turns=5), "send it to Bravo", 0, [turn], None)
    assert why is not None and "no longer wins" in why


def test_digits_of_another_script_are_the_same_number():
    # int() reads fullwidth and Arabic-Indic digits, so an env may take "４８２１" for 4821; the hint may write either
    ascii_call = '<tool_call>{"name": "open", "arguments": {"code": 4821}}</tool_call>'
    wide_call = '<tool_call>{"name": "open", "arguments": {"code": "\uff14\uff18\uff12\uff11"}}</tool_call>'

    def won(action: str) -> bool:
        return any(int(arguments["code"]) == 4821 for _name, arguments in parse_agent_text(action)[0])

    for hint, turn in [("the code is 4821", wide_call), ("the code is \uff14\uff18\uff12\uff11", ascii_call),
                       ("the code is \u0664\u0668\u0662\u0661", ascii_call)]:  # fmt: skip
        assert hint_leaks(hint, "tool_use", solution_actions=[turn], visible_text="[]") is not None, hint
        why = replay_tool_leak(_CountingEnv(won, max_turns=5), hint, 0, [turn], None)
        assert why is not None and "no longer wins" in why, hint


def test_a_name_in_fullwidth_letters_is_the_name():
    # an env that reads NFKC takes "Ｂｒａｖｏ" for "Bravo": a hint naming it in either form names it
    wide = "\uff22\uff52\uff41\uff56\uff4f"
    call = f'<tool_call>{{"name": "pay", "arguments": {{"to": "{wide}"}}}}</tool_call>'

    def won(action: str) -> bool:
        calls = parse_agent_text(action)[0]
        return any(unicodedata.normalize("NFKC", arguments["to"]) == "Bravo" for _name, arguments in calls)

    why = replay_tool_leak(_CountingEnv(won, max_turns=5), "send it to Bravo", 0, [call], None)
    assert why is not None and "no longer wins" in why
    assert hint_leaks(f"send it to {wide}", "tool_use", solution_actions=[call.replace(wide, "Bravo")]) is not None


if __name__ == "__main__":
    with WorkerPool(SandboxConfig(call_timeout_s=5.0, soft_timeout_s=2.0, pool_size=1)) as main_pool:
        for name in ("dev", "heldout"):
            for setting, t in scores(name, main_pool).items():
                print(
                    f"| {name} (replay) | {setting} | {t['cases']} | {t['tp'] + t['fn']} | {t['precision']:.2f} | "
                    f"{t['recall']:.2f} | missed {t['missed']} false alarms {t['false_alarms']}"
                )
