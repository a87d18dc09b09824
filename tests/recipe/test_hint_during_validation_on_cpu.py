"""The designer loop asks for its hint while validation runs (issue 39, eighth stop).

Validation is CPU work in the sandbox and the hint is the policy's generation: written one after the other they
added up on every design's critical path. The hint is now requested once the env has loaded, and dropped when
validation rejects the env later. The harness (tiny tokenizer, scripted server, local env pool, real sandbox and
validation) is ``test_failure_rule_on_cpu.py``'s.
"""

import threading

import pytest
from test_failure_rule_on_cpu import GAME, LocalPool, Server, design, run_loop, spade_config
from transformers import AutoTokenizer

import recipe.spade.agent_loops as loops
import spade_envs.design.validate as validate
from recipe.spade.cpu.tiny_model import build_tiny_qwen3

#: Loads as a games env, then fails validation: its solution never wins.
LOSES = """
class NeverWinsEnv:
    max_turns = 3

    def reset(self, seed=None):
        return "Type any word.", {}

    def step(self, action):
        return "Nothing happens.", 0.0, True, False, {}

    def solution(self):
        return ["wait"]
"""


@pytest.fixture(scope="module")
def tokenizer(tmp_path_factory):
    return AutoTokenizer.from_pretrained(build_tiny_qwen3(tmp_path_factory.mktemp("tiny") / "model"))


class HintWatch(Server):
    """The scripted server, noting when the hint writer's prompt arrives."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.hint_asked = threading.Event()

    async def generate(self, request_id, *, prompt_ids, sampling_params, **kw):
        if "Reply with the hint text only" in self.tokenizer.decode(prompt_ids[-300:]):
            self.hint_asked.set()
        return await super().generate(request_id, prompt_ids=prompt_ids, sampling_params=sampling_params, **kw)


def _pause_checks(monkeypatch, server: HintWatch) -> list[bool]:
    """Hold validation's checks after the load until the hint is asked for (10 s at most); returns what it saw."""
    seen: list[bool] = []
    original = validate._check_resets

    def held(*args, **kwargs):
        seen.append(server.hint_asked.wait(10))
        return original(*args, **kwargs)

    monkeypatch.setattr(validate, "_check_resets", held)
    return seen


def test_the_hint_is_asked_for_while_validation_still_runs(tmp_path, tokenizer, monkeypatch):
    server = HintWatch(tokenizer, design(GAME), ["\\boxed{reveal}"])
    seen = _pause_checks(monkeypatch, server)
    pool = LocalPool(GAME, "games")
    out = run_loop(loops.SpadeDesignerLoop, spade_config(tmp_path), tokenizer, server, pool, monkeypatch, "designer")
    assert seen == [True]  # written one after the other, validation would have waited out its 10 s here
    (outcome,) = pool.designs
    assert outcome["valid"], outcome
    (entry,) = pool.records
    assert entry["hint_text"] == "Work one step at a time."  # the hint asked for early is the one measured
    assert len(out.extra_fields["spade_measure"]["hint"]) == 2


def test_a_hint_for_an_env_that_validation_rejects_after_loading_is_dropped(tmp_path, tokenizer, monkeypatch):
    server = HintWatch(tokenizer, design(LOSES), ["\\boxed{reveal}"])
    seen = _pause_checks(monkeypatch, server)
    pool = LocalPool(GAME, "games")
    out = run_loop(loops.SpadeDesignerLoop, spade_config(tmp_path), tokenizer, server, pool, monkeypatch, "designer")
    assert seen == [True]
    assert out.extra_fields["spade_valid"] is False
    assert out.extra_fields["spade_failure"] == "solution_does_not_win"  # validation's code, not the hint's
    (entry,) = pool.records
    assert entry["hint_text"] is None and entry["hint"] is None and entry["arms"] is None


@pytest.mark.parametrize("answer", ["class BrokenEnv(:\n    pass\n", None], ids=["syntax_error", "no_code"])
def test_no_hint_is_asked_for_a_design_that_never_loads(tmp_path, tokenizer, monkeypatch, answer):
    server = HintWatch(tokenizer, design(answer) if answer else "No code here.", ["\\boxed{reveal}"])
    pool = LocalPool(GAME, "games")
    out = run_loop(loops.SpadeDesignerLoop, spade_config(tmp_path), tokenizer, server, pool, monkeypatch, "designer")
    assert out.extra_fields["spade_failure"] == ("syntax_error" if answer else "no_code_block")
    assert not server.hint_asked.is_set()
