"""Adversarial generated envs against the one rule for failures: nothing an env does raises out of a SPADE loop.

Each case is a plain env source an LLM could write, fed as the agent's env (via the pool) and as the designer's
design; the loop must return a sample verl can store, masked and tagged (agent) or with a failure code and a
penalty (designer). The harness (tiny tokenizer, scripted server, local env pool, loop runner) is
``test_failure_rule_on_cpu.py``'s, with short sandbox timeouts.
"""

import pytest
from test_failure_rule_on_cpu import LocalPool, Server, run_loop
from test_failure_rule_on_cpu import spade_config as _spade_config
from transformers import AutoTokenizer

import recipe.spade.agent_loops as loops
from recipe.spade.cpu.tiny_model import build_tiny_qwen3
from recipe.spade.reward_manager import designer_reward_config, score_sample

FAST = ("spade.sandbox.soft_timeout_s=1", "spade.sandbox.call_timeout_s=3")


@pytest.fixture(scope="module")
def tokenizer(tmp_path_factory):
    return AutoTokenizer.from_pretrained(build_tiny_qwen3(tmp_path_factory.mktemp("tiny") / "model"))


def spade_config(tmp_path, setting="games", *extra):
    return _spade_config(tmp_path, setting, *FAST, *extra)


def env(reset="return 'Say go.', {}", step="return 'ok', 1.0, True, False, {}", head="", init="pass",
        max_turns="3"):  # fmt: skip
    return (f'"""A tiny game: say go."""\n\nimport os\nimport time\n\n{head}\n\n'
            f"class GoEnv:\n    max_turns = {max_turns}\n\n"
            f"    def __init__(self):\n        {init}\n\n"
            f"    def reset(self, seed=None):\n        {reset}\n\n"
            f"    def step(self, action):\n        {step}\n\n"
            f"    def solution(self):\n        return ['go']\n")  # fmt: skip


CASES = {
    "reset_non_str_obs": env(reset="return 12345, {}"),
    "reset_returns_none": env(reset="return None"),
    "step_4_tuple": env(step="return 'ok', 1.0, True, {}"),
    "step_nan_reward": env(step="return 'ok', float('nan'), True, False, {}"),
    "step_inf_reward": env(step="return 'ok', float('inf'), True, False, {}"),
    "step_str_reward": env(step="return 'ok', 'one', True, False, {}"),
    "max_turns_huge": env(max_turns="2**63"),
    "max_turns_float": env(max_turns="2.5"),
    "max_turns_str": env(max_turns="'3'"),
    "obs_10mb": env(step="return 'x' * 10_000_000, 1.0, True, False, {}"),
    "reset_obs_10mb": env(reset="return 'y' * 10_000_000, {}"),
    "step_sleeps": env(step="time.sleep(30)\n        return 'ok', 1.0, True, False, {}"),
    "step_os_exit": env(step="os._exit(3)"),
    "init_infinite_loop": env(init="while True:\n            pass"),
    "step_recursion": env(step="return self.step(action)"),
    "step_deep_info": env(
        head="def nest(n):\n    d = {}\n    for _ in range(n):\n        d = {'a': d}\n    return d",
        step="return 'ok', 1.0, True, False, nest(100000)",
    ),
    "str_subclass_obs": env(
        head="class S(str):\n    def __len__(self):\n        raise RuntimeError('no len')",
        step="return S('ok'), 1.0, True, False, {}",
    ),
    "step_system_exit": env(step="raise SystemExit(0)"),
    "step_keyboard_interrupt": env(step="raise KeyboardInterrupt"),
    "step_returns_generator": env(step="return (x for x in ('ok', 1.0, True, False, {}))"),
    "step_bytes_obs": env(step="return b'ok', 1.0, True, False, {}"),
    "del_os_exit": env(
        head="class Bomb:\n    def __del__(self):\n        os._exit(4)",
        step="Bomb()\n        return 'ok', 1.0, True, False, {}",
    ),
    "module_level_exit": env(head="raise SystemExit('bye')"),
    "reset_ignores_sigterm": env(
        head="import signal", reset="signal.signal(signal.SIGTERM, signal.SIG_IGN)\n        time.sleep(60)"
    ),
    "step_closes_stdio": env(step="os.close(0)\n        os.close(1)\n        return 'ok', 1.0, True, False, {}"),
}


BENIGN = {"max_turns_huge", "step_closes_stdio"}  # the step itself returns a valid tuple


@pytest.mark.parametrize("case", sorted(CASES))
def test_agent_adversary(tmp_path, tokenizer, monkeypatch, case):
    pool = LocalPool(CASES[case], "games")
    out = run_loop(loops.SpadeEnvAgentLoop, spade_config(tmp_path), tokenizer, Server(tokenizer, "", ["go"]), pool,
                   monkeypatch, "agent")  # fmt: skip
    extra = out.extra_fields
    if case in BENIGN:  # odd but playable: min(config, env) bounds the turns
        return
    assert extra["spade_env_fault"] and extra["spade_excluded"] is True
    assert set(out.response_mask) == {0}


def design(source: str) -> str:
    return f"Here it is.\n```python\n{source}```"


@pytest.mark.parametrize("case", sorted(CASES))
def test_designer_adversary(tmp_path, tokenizer, monkeypatch, case):
    cfg = spade_config(tmp_path)
    out = run_loop(loops.SpadeDesignerLoop, cfg, tokenizer, Server(tokenizer, design(CASES[case]), ["go"]),
                   LocalPool(CASES[case], "games"), monkeypatch, "designer")  # fmt: skip
    extra = out.extra_fields
    assert extra["spade_failure"]
    assert score_sample(designer_reward_config(cfg), extra)[0] < 0
