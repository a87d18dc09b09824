"""Sandboxed validation of real env programs: valid ones pass, each kind of broken one gets its own code."""

import pytest

from spade_envs.builtin import BUILTINS, builtin_source
from spade_envs.design.validate import ValidationConfig, validate_source
from spade_envs.envs.failures import FAILURE_CODES
from spade_envs.sandbox import SandboxConfig, WorkerPool

GOOD = '''
import random

class CounterEnv:
    """Reach the hidden target by adding the right amounts: three exact additions win."""

    max_turns = 6

    def reset(self, seed=None):
        self.rng = random.Random(seed)
        self.steps = [self.rng.randint(100, 999) for _ in range(3)]
        self.total = 0
        self.done = 0
        return f"Add the amounts you are told. First: {self.steps[0]}", {"difficulty": 1}

    def step(self, action):
        text = action.strip()
        if not text.lstrip("-").isdigit():
            return "Send a number.", 0.0, False, False, {}
        if int(text) != self.steps[self.done]:
            return "Wrong amount.", 0.0, True, False, {}
        self.done += 1
        if self.done == len(self.steps):
            return "Done!", 1.0, True, False, {}
        return f"Next: {self.steps[self.done]}", 0.0, False, False, {}

    def solution(self):
        return [str(x) for x in self.steps]
'''


def variant(old: str, new: str) -> str:
    assert old in GOOD
    return GOOD.replace(old, new)


CASES = {
    "syntax_error": variant("def step(self, action):", "def step(self, action)"),
    "exec_error": "import nonexistent_module_xyz\n" + GOOD,
    "no_env_class": GOOD.replace("class CounterEnv", "class Counter"),
    "several_env_classes": GOOD + "\nclass OtherEnv(CounterEnv):\n    pass\n",
    "missing_method": variant("def solution(self):", "def answer(self):"),
    "construct_failed": variant(
        "max_turns = 6", "max_turns = 6\n\n    def __init__(self, size):\n        self.size = size"
    ),
    "reset_raised": variant("self.total = 0", "self.total = 0 if seed < 1000 else 1 / 0"),  # honest on small seeds
    "reset_bad_types": variant('{"difficulty": 1}', '["not a dict"]'),
    "nondeterministic": variant("self.rng = random.Random(seed)", "self.rng = random.Random()"),
    "step_raised": variant('return "Send a number."', 'return {}["crash"]'),
    "step_bad_types": variant('return "Wrong amount.", 0.0, True, False, {}', 'return "Wrong amount.", "0", True'),
    "nonfinite_reward": variant('return "Send a number.", 0.0,', 'return "Send a number.", float("nan"),'),
    "no_solution": variant("return [str(x) for x in self.steps]", "return []"),
    "solution_does_not_win": variant("return [str(x) for x in self.steps]", "return [str(x + 1) for x in self.steps]"),
    "do_nothing_wins": variant(
        'return "Send a number.", 0.0, False, False, {}', 'return "Free win.", 1.0, True, False, {}'
    ),
    "random_wins": variant('return "Wrong amount.", 0.0, True, False, {}', 'return "Fine.", 1.0, True, False, {}'),
    "timeout": variant("text = action.strip()", 'text = action.strip()\n        while text == "42":\n            pass'),
    "crashed": variant(
        "text = action.strip()", 'text = action.strip()\n        if text == "test":\n            import os; os._exit(3)'
    ),
    "output_too_large": variant('return "Send a number."', 'return "x" * 10_000_000'),
}


@pytest.fixture(scope="module")
def pool():
    with WorkerPool(SandboxConfig(call_timeout_s=3.0, soft_timeout_s=1.0, pool_size=2)) as p:
        yield p


def test_a_valid_environment_passes(pool):
    report = validate_source(GOOD, pool, setting="games")
    assert report.ok and report.code is None, report
    assert report.class_name == "CounterEnv" and report.solution_turns == [3, 3, 3]
    assert report.checks == [
        "loaded",
        "reset",
        "deterministic",
        "probes",
        "solution",
        "do_nothing",
        "random",
        "cross_worker",
        "first_episode",
    ]


@pytest.mark.parametrize("code", sorted(CASES))
def test_each_defect_gets_its_own_failure_code(pool, code):
    # random_wins: the random agent wins only if it sends the observation's number, which 2 episodes on each of 3
    # fresh seeds missed in ~1 run of 8 (CI flake, issue 39's fifth stop); 10 episodes per seed make a miss ~1e-4
    config = ValidationConfig(random_episodes=10) if code == "random_wins" else None
    report = validate_source(CASES[code], pool, config)
    assert not report.ok
    assert report.code == code, f"{report.code}: {report.reason}"
    assert code in FAILURE_CODES and report.reason


def test_setting_mismatch_is_rejected(pool):
    report = validate_source(GOOD, pool, setting="tool_use")
    assert report.code == "wrong_setting"


@pytest.mark.parametrize("name", [e.name for e in BUILTINS])
def test_every_builtin_is_admissible(pool, name):
    entry = next(e for e in BUILTINS if e.name == name)
    report = validate_source(builtin_source(name), pool, setting=entry.setting)
    assert report.ok, f"{report.code}: {report.reason}"


def test_audit_hook_rejects_and_a_broken_audit_accepts(pool):
    source = builtin_source("CrmReportEnv")
    assert validate_source(source, pool, audit=lambda _src: False).code == "audit_rejected"

    def broken(_src: str) -> bool:
        raise ConnectionError("judge offline")

    report = validate_source(source, pool, audit=broken)
    assert report.ok and any("audit errored" in c for c in report.checks)


def test_config_rejects_unknown_keys():
    with pytest.raises(ValueError, match="unknown validation option"):
        ValidationConfig.from_dict({"seedz": [1]})
    assert ValidationConfig.from_dict({"seeds": [5, 6]}).seeds == (5, 6)


def test_a_busy_or_broken_pool_is_a_machine_fault_inside_the_budget(monkeypatch):
    """Issue 24, finding 8: the slot wait ran outside budget_s, and no worker was scored ``crashed`` (-1)."""
    import time

    from spade_envs.design.designer import admit
    from spade_envs.sandbox import SandboxUnavailable
    from spade_envs.sandbox import pool as pool_module

    with WorkerPool(SandboxConfig(isolation="none", pool_size=0, max_workers=1, acquire_timeout_s=30)) as busy:
        held = busy.acquire()  # every slot taken by someone else's episode
        try:
            started = time.monotonic()
            report = validate_source(GOOD, busy, ValidationConfig(budget_s=0.5))
            assert report.code == "machine_fault" and time.monotonic() - started < 3, report
        finally:
            busy.release(held)

        def no_spawn(*_args, **_kwargs):
            raise SandboxUnavailable("could not start a worker: [Errno 11] Resource temporarily unavailable",
                                     code="spawn_failed")  # fmt: skip

        monkeypatch.setattr(pool_module, "Worker", no_spawn)
        source, report = admit("```python\n" + builtin_source("VaultCodeEnv") + "\n```", busy, "games")
    assert source is None and report.code == "machine_fault", report
