"""Case table: which calls count as "a call was made" and which run, as in ACEBench's two runners.

ACEBench's multi-turn runner keeps the classes' state only after a step whose calls all ran without error (a step
stops at its first error); its multi-step runner runs every call of a step and keeps the state whenever a step
ran, errors included. An episode without a kept state fails, whatever the ground truth says.
"""

from __future__ import annotations

import pytest
from eval_oracle import ACEBENCH, Oracle

from spade_envs.envs.llm import ChatClient
from spade_envs.evaluation import Sampling, run_suite
from spade_envs.evaluation.suites.acebench import AceBenchAgentSuite
from spade_envs.evaluation.suites.acebench_env import Scenario, check_end_to_end, load_classes

CONFIG = {"BaseApi": {"wifi": True, "logged_in": True}}
GOOD = ("add_note", {"title": "Call mom", "text": "Sunday"})
BAD = ("append_to_note", {"note_id": 99, "text": "x"})  # raises KeyError in the scenario class
UNKNOWN = ("delete_everything", {})
AFTER = ("add_note", {"title": "After", "text": "x"})

CASES = [  # kind, steps (one list of calls per reply), state kept, note titles after the episode
    ("multi_turn", [[BAD]], False, ["Shopping"]),
    ("multi_turn", [[UNKNOWN]], False, ["Shopping"]),
    ("multi_turn", [[GOOD, BAD, AFTER]], False, ["Shopping", "Call mom"]),  # stops at BAD; AFTER never runs
    ("multi_turn", [[GOOD, BAD], [AFTER]], True, ["Shopping", "Call mom", "After"]),
    ("multi_turn", [[GOOD]], True, ["Shopping", "Call mom"]),
    ("multi_step", [[BAD]], True, ["Shopping"]),  # multi-step keeps the state of a step that raised
    ("multi_step", [[GOOD, BAD, AFTER]], True, ["Shopping", "Call mom", "After"]),  # every call runs
    ("multi_step", [], False, ["Shopping"]),
]


@pytest.mark.parametrize(("kind", "steps", "kept", "titles"), CASES)
def test_which_calls_count_and_run(kind, steps, kept, titles):
    classes = load_classes(ACEBENCH, kind, ["BaseApi", "NotesApi"])
    scenario = Scenario(classes, ["BaseApi", "NotesApi"], CONFIG)
    for calls in steps:
        outputs = scenario.run_step(calls, multi_turn=kind == "multi_turn")
        assert len(outputs) == len(calls)
    assert [n["title"] for n in scenario.instances["NotesApi"].notes.values()] == titles
    states = scenario.states()
    assert (states is not None) is kept
    # a ground truth that the untouched note meets: only a kept state can pass it (extra notes go unnoticed, as
    # ACEBench compares a dict attribute on the ground truth's keys only)
    untouched = {"BaseApi": {"wifi": True}}, {"NotesApi": {"notes": {"1": {"title": "Shopping", "text": "milk"}}}}
    passed = check_end_to_end(states, list(untouched))[0]
    assert passed is kept


def test_a_step_that_stops_reports_the_calls_it_did_not_run():
    scenario = Scenario(load_classes(ACEBENCH, "multi_turn", ["BaseApi", "NotesApi"]), ["BaseApi", "NotesApi"], CONFIG)
    outputs = scenario.run_step([GOOD, BAD, AFTER], multi_turn=True)
    assert "added" in outputs[0] and "KeyError" in outputs[1] and "not run" in outputs[2]


class SlowStarter(Oracle):
    """Chats twice before it calls anything in a multi-step item, then plays the gold steps."""

    def __call__(self, body):
        messages = body["messages"]
        multi_step = body.get("tools") and messages[0]["content"].startswith("You complete the user's task alone")
        if multi_step and sum(m["role"] == "assistant" for m in messages) < 2:
            return {"content": "Let me think about what to do first."}
        return super().__call__(body)


def test_multi_step_nudges_after_every_reply_without_calls(stub_openai, tmp_path):
    """ACEBench's multi-step runner answers each call-less reply and goes on until its 40-message cap."""
    server = stub_openai(SlowStarter())
    run = run_suite(AceBenchAgentSuite(ACEBENCH), ChatClient(server.base_url, "m", max_retries=0), tmp_path,
                    sampling=Sampling(n_samples=1, temperature=0.0, max_tokens=64), progress=None)  # fmt: skip
    steps = [r for r in run.records if r.detail["kind"] == "multi_step"]
    assert steps and all(r.score == 1.0 and r.detail["ended"] == "agent finished" for r in steps)
    assert all(r.response.count("Nobody can answer questions here") == 2 for r in steps)
