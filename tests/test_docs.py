"""The worked examples in docs/environments.md are real environments that satisfy the contract."""

import random
import re
from pathlib import Path

import pytest

from spade_envs.envs.episode import do_nothing_policy, play, random_policy, setting_of, solution_policy
from spade_envs.envs.loader import load_env_class

DOC = Path(__file__).resolve().parents[1] / "docs" / "environments.md"
EXAMPLES = dict(re.findall(r"<!-- example: (\w+) -->\n```python\n(.*?)```", DOC.read_text(), re.DOTALL))


def test_both_worked_examples_are_present():
    assert set(EXAMPLES) == {"game", "tool_use"}


@pytest.mark.parametrize("setting", ["game", "tool_use"])
def test_worked_example_satisfies_the_contract(setting):
    cls = load_env_class(EXAMPLES[setting])
    kind = setting_of(cls)
    assert kind == {"game": "games", "tool_use": "tool_use"}[setting]
    env = cls()
    tools = env.tools() if kind == "tool_use" else None
    for seed in range(30):
        env.reset(seed)
        assert play(env, solution_policy(env.solution(), kind), seed).won, f"seed {seed}"
        assert not play(env, do_nothing_policy(kind), seed).won
        assert not play(env, random_policy(random.Random(seed), kind, tools), seed).won
        assert cls().reset(seed) == cls().reset(seed)
