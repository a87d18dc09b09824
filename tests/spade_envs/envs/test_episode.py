"""The host-side bounds of an episode: turn cap, action and observation caps, linear extraction, float wins."""

import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from spade_envs.envs.contract import extract_command, is_win, outcome_reward
from spade_envs.envs.episode import (
    MAX_ACTION_CHARS,
    check_tools,
    command_text,
    play,
    random_policy,
    solution_policy,
    turn_limit,
)
from spade_envs.envs.errors import ContractViolation


def reference_extract(text: str) -> str:
    """The original (quadratic) definition: the last box whose braces balance."""
    found = None
    i = text.find("\\boxed")
    while i != -1:
        j = i + len("\\boxed")
        while j < len(text) and text[j].isspace():
            j += 1
        if j < len(text) and text[j] == "{":
            depth = 0
            for k in range(j, len(text)):
                depth += {"{": 1, "}": -1}.get(text[k], 0)
                if depth == 0:
                    found = text[j + 1 : k]
                    break
        i = text.find("\\boxed", i + 1)
    return found.strip() if found is not None else text.strip()


@settings(max_examples=400, deadline=None)
@given(st.lists(st.sampled_from(["\\boxed{", "\\boxed {", "{", "}", "a", " ", "\\boxed", "x}"]), max_size=30))
def test_linear_extraction_equals_the_definition(parts):
    text = "".join(parts)
    assert extract_command(text) == reference_extract(text)


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet="ab{} \\boxed", max_size=20))
def test_command_text_round_trips_whenever_it_answers(action):
    text = command_text(action)
    assert text is None or extract_command(text) == action.strip()


def test_command_text_sends_a_closing_brace_unboxed():
    assert command_text("b}") == "b}" and command_text("go north") == "\\boxed{go north}"


class Accumulate:
    """Ten steps of 0.1: the float sum is 0.9999999999999999."""

    max_turns = 10**12

    def reset(self, seed=None):
        self.score, self.n = 0.0, 0
        return "Say ok ten times.", {}

    def step(self, action):
        self.n += 1
        self.score += 0.1
        done = self.n == 10
        return "x" * 1000, (self.score if done else 0.0), done, False, {}

    def solution(self):
        return ["ok"] * 10


def test_float_sums_of_perfect_play_are_a_win():
    assert sum([0.1] * 10) < 1.0 and is_win(sum([0.1] * 10))
    assert outcome_reward(sum([0.1] * 10), True, False) == 1.0 and not is_win(0.99)
    result = play(Accumulate(), solution_policy(["ok"] * 10, "games"), 0)
    assert result.won and result.outcome == 1.0


def test_huge_max_turns_are_capped_and_observations_kept_up_to_a_budget():
    result = play(Accumulate(), lambda _obs, _turn: "\\boxed{no}", 0, max_turns=5, keep_chars=2500)
    assert result.turns == 5 and not result.won
    assert len(result.observations) == 3 and result.observations_cut  # the first + two of 1000 characters
    assert len(result.transcript_hash) == 32 and result.first_obs_hash


@pytest.mark.parametrize("declared", [0, -1, True, "25", float("inf"), float("nan"), None])
def test_turn_limit_refuses_what_is_not_a_positive_number(declared):
    with pytest.raises(ContractViolation):
        turn_limit(declared, 25)


def test_turn_limit_clamps():
    assert turn_limit(2**63, 25) == 25 and turn_limit(9.2e18, 25) == 25 and turn_limit(7, 25) == 7


def test_actions_are_cut_at_the_cap():
    env = Accumulate()
    sent = []
    env.step = lambda action: (sent.append(action), ("obs", 0.0, True, False, {}))[1]
    play(env, lambda _obs, _turn: "\\boxed{" + "y" * (3 * MAX_ACTION_CHARS) + "}", 0)
    assert len(sent[0]) == MAX_ACTION_CHARS


@pytest.mark.parametrize(
    "tools",
    [["not a schema"], {}, [{"function": {"name": "x", "parameters": {"properties": ["a"]}}}],
     [{"function": {"name": "x", "parameters": {"properties": {"a": {"enum": []}}}}}],
     [{"function": {"name": "x", "parameters": {"properties": {}, "required": "a"}}}]],
)  # fmt: skip
def test_malformed_tools_are_named_and_never_called(tools):
    assert check_tools(tools) is not None
    policy = random_policy(random.Random(0), "tool_use", tools)
    for turn in range(20):
        assert policy("obs words", turn).startswith("<answer>")


def test_well_formed_tools_are_called():
    tools = [{"type": "function", "function": {"name": "x", "parameters": {
        "properties": {"a": {"type": "array", "items": {"type": "array", "items": {"type": "array"}}}},
        "required": ["a"]}}}]  # fmt: skip
    assert check_tools(tools) is None
    replies = [random_policy(random.Random(s), "tool_use", tools)("obs", 0) for s in range(20)]
    assert any(r.startswith("<tool_call>") for r in replies)
