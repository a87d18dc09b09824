"""Validation verdicts that must hold in training: the turn cap, unseen seeds, cross-worker pairing, bounded cost.

Each environment here was admitted (or crashed the host, or wrongly rejected) by validation before these checks.
"""

import pytest

from spade_envs.design.validate import ValidationConfig, validate_source
from spade_envs.sandbox import SandboxConfig, WorkerPool

GUESS = """
import random{extra_import}

class GuessEnv:
    max_turns = {max_turns}

    def reset(self, seed=None):
        self.rng = random.Random({rng_seed})
        self.secret = self.rng.randint(100, 999)
        return "Guess the 3-digit number. Reply guess N.", {{}}

    def step(self, action):{step_prefix}
        parts = action.split()
        if len(parts) == 2 and parts[0] == "guess" and parts[1].isdigit():
            if int(parts[1]) == self.secret:
                return "Correct!", 1.0, True, False, {{}}
            return {wrong}, 0.0, False, False, {{}}
        return "Say guess N.", 0.0, False, False, {{}}

    def solution(self):
        return [f"guess {{self.secret}}"]
"""


def guess(max_turns="6", rng_seed="seed", wrong='"No."', step_prefix="", extra_import=""):
    return GUESS.format(max_turns=max_turns, rng_seed=rng_seed, wrong=wrong, step_prefix=step_prefix,
                        extra_import=extra_import)  # fmt: skip


CORRIDOR = """
class CorridorEnv:
    max_turns = {max_turns}

    def reset(self, seed=None):
        self.pos = 0
        return "Walk to cell 30: reply walk.", {{}}

    def step(self, action):
        if action.strip() == "walk":
            self.pos += 1
            if self.pos >= 30:
                return "Out!", 1.0, True, False, {{}}
            return f"Cell {{self.pos}}.", 0.0, False, False, {{}}
        return "Nothing happens.", 0.0, False, False, {{}}

    def solution(self):
        return ["walk"] * 30
"""


@pytest.fixture(scope="module")
def pool():
    with WorkerPool(SandboxConfig(call_timeout_s=3.0, soft_timeout_s=1.0, pool_size=2)) as p:
        yield p


def test_a_valid_env_is_replayed_in_a_second_worker_on_drawn_seeds(pool):
    pinned = ValidationConfig(secret=bytes(range(32)))  # a run's seed secret: its seeds are reproducible
    report = validate_source(guess(), pool, pinned, key="step 3 slot 1")
    assert report.ok, report
    assert report.checks[-2:] == ["cross_worker", "first_episode"]
    assert len(report.seeds) == 3 and len(report.probe_seeds) == 2 and not set(report.seeds) & {0, 1, 2}
    again = validate_source(guess(), pool, pinned, key="step 3 slot 1")
    other = validate_source(guess(), pool, ValidationConfig(seed=7, secret=pinned.secret), key="step 3 slot 1")
    assert again.seeds == report.seeds and other.seeds != report.seeds
    assert (other.run_seed, other.key) == (7, "step 3 slot 1")
    # no secret: a fresh one per validation, so the same run seed and key draw other seeds (none to recompute)
    fresh = validate_source(guess(), pool, key="step 3 slot 1")
    assert fresh.ok and fresh.seeds != report.seeds and "secret" not in fresh.to_dict()


def test_worker_dependent_instances_are_nondeterministic(pool):
    # deterministic inside one worker (the salt is fixed at import), different in the next worker
    salted = guess(rng_seed="seed * 1000 + SALT", extra_import="\nimport time\nSALT = time.perf_counter_ns()")
    report = validate_source(salted, pool)
    assert report.code == "nondeterministic" and "second worker" in report.reason


def test_global_rng_on_wrong_moves_is_nondeterministic(pool):
    noisy = guess(wrong='random.choice(["higher", "lower"])')
    report = validate_source(noisy, pool)
    assert report.code == "nondeterministic", report


def test_the_solution_must_fit_the_training_turn_cap(pool):
    report = validate_source(CORRIDOR.format(max_turns=40), pool)
    assert report.code == "solution_too_long" and "cap=25" in report.reason
    roomy = validate_source(CORRIDOR.format(max_turns=40), pool, ValidationConfig(max_turns=40))
    assert roomy.ok and roomy.max_turns == 40 and roomy.solution_turns == [30, 30, 30]


@pytest.mark.parametrize("declared", ["2**63", "10**12"])
def test_huge_declared_max_turns_are_clamped(pool, declared):
    report = validate_source(guess(max_turns=declared), pool)
    assert report.ok, report
    assert report.max_turns == 25 and report.declared_max_turns > 25


def test_a_float_max_turns_is_a_typed_failure(pool):
    assert validate_source(guess(max_turns="1e12"), pool).code == "construct_failed"


def test_slow_steps_hit_the_validation_budget(pool):
    slow = guess(max_turns="10**12", step_prefix="\n        import time; time.sleep(0.05)")
    report = validate_source(slow, pool, ValidationConfig(budget_s=0.5))
    assert report.code == "validation_budget", report


def test_an_env_honest_only_on_the_configured_seeds_is_caught_on_unseen_ones(pool):
    cheat = guess(step_prefix="\n        if self.seed > 3:\n            return 'You win.', 1.0, True, False, {}")
    cheat = cheat.replace("self.rng = random.Random(seed)", "self.seed = seed\n        self.rng = random.Random(seed)")
    report = validate_source(cheat, pool, ValidationConfig(seeds=(0, 1, 2)))
    assert report.code == "do_nothing_wins" and str(report.probe_seeds[0]) in report.reason


def test_an_action_with_a_closing_brace_is_replayed_as_the_agent_could_send_it(pool):
    brace = guess().replace('return [f"guess {self.secret}"]', 'return ["guess " + str(self.secret) + "}"]')
    brace = brace.replace("int(parts[1]) == self.secret", "parts[1] == str(self.secret) + '}'")
    brace = brace.replace("parts[1].isdigit()", "parts[1][:-1].isdigit()")
    report = validate_source(brace, pool)
    assert report.ok, report


def test_rewards_summed_in_floats_still_win(pool):
    tenths = guess().replace('return "Correct!", 1.0,', 'return "Correct!", sum([0.1] * 10),')
    assert sum([0.1] * 10) < 1.0
    report = validate_source(tenths, pool)
    assert report.ok, report


def test_an_over_long_solution_action_is_no_solution(pool):
    long_action = guess().replace('return [f"guess {self.secret}"]', 'return ["x" * 20000]')
    report = validate_source(long_action, pool)
    assert report.code == "no_solution" and "cap" in report.reason


TOOLS = '''
from spade_envs.envs.tooluse import Instruction, ToolUseEnv, tool_call


class SafeEnv(ToolUseEnv):
    max_turns = 6
    domain = "smart_home"

    def setup(self):
        self.code, self.open = self.rng.randint(1000, 9999), False
        return Instruction(text="Open the safe.", state=lambda: self.open)

    def tool_read_note(self) -> str:
        """Read the note on the fridge."""
        return f"The safe code is {{self.code}}."

    def tool_unlock(self, code: int) -> str:
        """Try a code on the safe.

        Args:
            code: the four-digit code.
        """
        self.open = self.open or code == self.code
        return "open" if self.open else "wrong code"

    def solution(self):
        return [tool_call("read_note"), tool_call("unlock", code=self.code), "<answer>done</answer>"]
{override}'''


BAD_TOOLS = """
    def reset(self, seed=None):
        self._resetting = True
        try:
            return super().reset(seed)
        finally:
            self._resetting = False

    def tools(self):  # well formed while reset lists them, malformed when the host asks
        return super().tools() if getattr(self, "_resetting", False) else {bad}
"""


@pytest.mark.parametrize(
    "bad",
    [
        '["not a schema"]',
        '[{"type": "function", "function": {"name": "unlock", "parameters": {"properties": {"code": {"enum": []}}}}}]',
        '[{"type": "function", "function": {"name": "unlock", "parameters": {"properties": ["code"]}}}]',
        "{}",
    ],
)
def test_malformed_tool_schemas_are_a_typed_failure(pool, bad):
    assert validate_source(TOOLS.format(override=""), pool, setting="tool_use").ok
    report = validate_source(TOOLS.format(override=BAD_TOOLS.format(bad=bad)), pool, setting="tool_use")
    assert report.code == "bad_tools", report


# Issue 26, finding 4: envs honest under validation (many episodes per worker, solution() first) that play differently
# as training plays them (the first episode of a fresh worker: load, reset, steps).
COUNTER = guess(
    step_prefix="\n        GuessEnv.episodes = getattr(GuessEnv, 'episodes', 0) + 1\n"
    "        if GuessEnv.episodes == 1:\n"
    "            return 'Free win.', 1.0, True, False, {}"
)  # a class-level counter
CALL_ORDER = guess(
    step_prefix="\n        if not getattr(self, 'asked', False) and action.startswith('guess'):\n"
    "            return 'Free win.', 1.0, True, False, {}"
).replace(
    "    def solution(self):\n", "    def solution(self):\n        self.asked = True\n"
)  # any guess wins in training


@pytest.mark.parametrize("source", [COUNTER, CALL_ORDER], ids=["class_counter", "call_order"])
def test_an_env_that_plays_differently_as_a_first_episode_is_rejected(pool, source):
    report = validate_source(source, pool, setting="games")
    assert report.code == "first_episode_differs", report
    assert "played first in a fresh worker" in report.reason
    assert validate_source(source, pool, ValidationConfig(first_episode_seeds=0), setting="games").ok  # as on main
