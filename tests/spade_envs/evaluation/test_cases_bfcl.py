"""Case table: BFCL's multi-turn step limit and force-stop rule, played through the real backends and checker.

BFCL's inference loop counts the call-steps of a turn and stops the entry once the count exceeds 20 (after the
21st); its evaluator fails an entry only when its number of turns differs from the ground truth's, so a stop in
the last turn is checked like any other entry.
"""

from __future__ import annotations

import json

import pytest
from eval_oracle import gold_calls

from spade_envs.envs.llm import ChatClient
from spade_envs.evaluation import Sampling, run_suite
from spade_envs.evaluation.suites.bfcl import BfclMultiTurnSuite

ENTRY = "multi_turn_base_1"  # GorillaFileSystem only; four turns


class StepScript:
    """Plays the gold calls of each turn in one step; in turn ``loop_turn`` then calls ``pwd()`` ``extra`` times."""

    def __init__(self, answer: list[list[str]], loop_turn: int, extra: int, gold_first: bool = True) -> None:
        self.answer, self.loop_turn, self.extra, self.gold_first = answer, loop_turn, extra, gold_first
        self.calls_per_turn: dict[int, int] = {}

    def __call__(self, body):
        messages = body["messages"]
        turn = sum(m["role"] == "user" for m in messages) - 1
        since_user = len(messages) - 1 - max(i for i, m in enumerate(messages) if m["role"] == "user")
        steps_done = sum(m["role"] == "assistant" for m in messages[-since_user:]) if since_user else 0
        gold = gold_calls(self.answer[turn], ["GorillaFileSystem"])
        plan = [gold] if self.gold_first else []
        if turn == self.loop_turn:
            plan += [[{"name": "pwd", "arguments": {}}]] * self.extra
        if steps_done >= len(plan):
            return {"content": "Done."}
        self.calls_per_turn[turn] = self.calls_per_turn.get(turn, 0) + 1
        calls = plan[steps_done]
        native = [{"id": f"c{i}", "type": "function", "function": {"name": c["name"],
                   "arguments": json.dumps(c["arguments"])}} for i, c in enumerate(calls)]  # fmt: skip
        return {"content": "", "tool_calls": native}


CASES = [  # turn that loops, pwd() steps after the gold step, expected score, force-stopped, call-steps in that turn
    (0, 19, 1.0, False, 20),  # 20 call-steps: within the limit
    (0, 20, 0.0, True, 21),  # the 21st call-step stops the entry in turn 0: turns missing, force_terminated
    (3, 20, 1.0, True, 21),  # stopped in the last turn: the turn count matches, checked normally (pwd is harmless)
    (3, 40, 1.0, True, 21),  # never more than 21 call-steps in a turn
]


@pytest.mark.parametrize(("loop_turn", "extra", "score", "forced", "steps"), CASES)
def test_bfcl_step_limit_and_force_stop(stub_openai, tmp_path, loop_turn, extra, score, forced, steps):
    suite = BfclMultiTurnSuite([ENTRY])
    answer = suite.load(None)[0].answer
    script = StepScript(answer, loop_turn, extra)
    client = ChatClient(stub_openai(script).base_url, "m", max_retries=0)
    run = run_suite(suite, client, tmp_path, sampling=Sampling(n_samples=1, temperature=0.0, max_tokens=64),
                    progress=None)  # fmt: skip
    (record,) = run.records
    assert record.score == score and record.detail["force_stopped"] is forced
    assert script.calls_per_turn[loop_turn] == steps
    assert (record.detail["error"] == "multi_turn:force_terminated") is (score == 0.0)
    played = sorted(script.calls_per_turn)
    assert played == ([0] if forced and loop_turn == 0 else [0, 1, 2, 3])
