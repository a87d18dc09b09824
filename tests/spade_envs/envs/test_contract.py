import math

import numpy as np
import pytest

from spade_envs.envs.contract import (
    ExecutableEnv,
    check_reset_output,
    check_step_output,
    extract_command,
    is_win,
    outcome_reward,
)
from spade_envs.envs.errors import ContractViolation


@pytest.mark.parametrize(
    ("text", "command"),
    [
        ("I think \\boxed{inspect 2}", "inspect 2"),
        ("first \\boxed{a} then \\boxed{ b }", "b"),
        ("nested \\boxed{f(x)={1,2}} done", "f(x)={1,2}"),
        ("spaced \\boxed {go north}", "go north"),
        ("  plain text command \n", "plain text command"),
        ("unclosed \\boxed{never ends", "unclosed \\boxed{never ends"),
        ("closed \\boxed{x} then unclosed \\boxed{y", "x"),
        ("\\boxed{}", ""),
    ],
)
def test_extract_command(text, command):
    assert extract_command(text) == command


@pytest.mark.parametrize(
    ("reward", "terminated", "truncated", "outcome"),
    [(1.0, True, False, 1.0), (7.0, True, False, 1.0), (-3.0, True, False, 0.0), (0.4, True, False, 0.4),
     (1.0, False, True, 0.0), (1.0, True, True, 0.0), (1.0, False, False, 0.0)],
)  # fmt: skip
def test_outcome_reward(reward, terminated, truncated, outcome):
    assert outcome_reward(reward, terminated, truncated) == outcome


def test_outcome_rejects_non_finite_final_reward():
    with pytest.raises(ContractViolation, match="finite"):
        outcome_reward(math.nan, True, False)


def test_is_win_only_at_one():
    assert is_win(1.0) and not is_win(0.99)


def test_check_step_output_normalises_numpy_values():
    obs, reward, term, trunc, info = check_step_output(("o", np.float32(0.5), np.bool_(True), False, {}))
    assert (obs, reward, term, trunc, info) == ("o", 0.5, True, False, {})
    assert type(reward) is float and type(term) is bool


@pytest.mark.parametrize(
    ("result", "message"),
    [
        (("o", 0.0, False, False), "5-tuple"),
        ([("o", 0.0, False, False, {})], "5-tuple"),
        ((1, 0.0, False, False, {}), "observation must be str"),
        (("o", "1", False, False, {}), "reward must be a number"),
        (("o", True, False, False, {}), "reward must be a number"),
        (("o", math.inf, False, False, {}), "finite"),
        (("o", 0.0, 1, False, {}), "terminated must be bool"),
        (("o", 0.0, False, None, {}), "truncated must be bool"),
        (("o", 0.0, False, False, []), "info must be dict"),
    ],
)
def test_check_step_output_rejects(result, message):
    with pytest.raises(ContractViolation, match=message):
        check_step_output(result)


@pytest.mark.parametrize(
    ("result", "message"),
    [("o", "observation, info"), (("", {}), "empty"), ((b"o", {}), "must be str"), (("o", None), "info must be dict")],
)
def test_check_reset_output_rejects(result, message):
    with pytest.raises(ContractViolation, match=message):
        check_reset_output(result)


def test_protocol_is_structural():
    class CountEnv:
        max_turns = 3

        def reset(self, seed=None):
            return "start", {}

        def step(self, action):
            return "ok", 1.0, True, False, {}

        def solution(self):
            return ["x"]

    assert isinstance(CountEnv(), ExecutableEnv)
    assert not isinstance(object(), ExecutableEnv)
