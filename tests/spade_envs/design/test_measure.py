"""After validation: whatever an env does while its hint is vetted or while it is measured is a failure code.

The pipeline runs for real (sandbox, validation, vetting, plays) against a scripted OpenAI-compatible endpoint.
"""

import json

import pytest

from spade_envs.design.corpus import Corpus
from spade_envs.design.designer import GenerateConfig, generate
from spade_envs.design.measure import measurement_seeds, unpaired_seeds, vet_hint_on_seeds
from spade_envs.design.memory import EnvMemory
from spade_envs.design.rewards import DEFAULT_PENALTIES
from spade_envs.envs.errors import ContractViolation, InvalidEnvSource
from spade_envs.envs.failures import FAILURE_CODES, fault_code
from spade_envs.envs.llm import ChatClient
from spade_envs.sandbox import SandboxConfig, WorkerPool
from spade_envs.sandbox.errors import EnvCrashed, EnvRaised, EnvTimeout, OutputTooLarge, ProtocolViolation

CORPUS = "examples/data/sample_corpus.jsonl"

# Honest on every seed validation draws; MEASURED are the seeds `generate` measures its first design on (hashed,
# keyed by the SECRET these runs pin).
SECRET = bytes.fromhex("3ea5" * 16)
MEASURED = set(measurement_seeds(0, "slot 0 attempt 0", 2, secret=SECRET))
GUESS = """
import random{imports}

class GuessEnv:
    max_turns = 6

    def reset(self, seed=None):{reset_prefix}
        self.rng = random.Random({rng_seed})
        self.secret = self.rng.randint(100, 999)
        return f"Case {{self.secret * 7919 % 10007}}: guess the 3-digit number. Reply guess N.", {{}}

    def step(self, action):
        if action.strip() == f"guess {{self.secret}}":
            return "Correct!", 1.0, True, False, {{}}
        return "No.", 0.0, False, False, {{}}

    def solution(self):
        return [f"guess {{self.secret}}"]
"""


def guess(reset_prefix="", rng_seed="seed", imports=""):
    return GUESS.format(reset_prefix=reset_prefix, rng_seed=rng_seed, imports=imports)


def responder(source, agent=lambda body: {"content": "\\boxed{guess 500}"}):
    def respond(body):
        system = body["messages"][0]["content"]
        if system.startswith("You design"):
            return {"content": f"Here it is:\n```python\n{source}```"}
        if system.startswith("You write short privileged hints"):
            return {"content": "Use the feedback to narrow the range."}
        return agent(body)

    return respond


@pytest.fixture(scope="module")
def pool():
    with WorkerPool(SandboxConfig(call_timeout_s=3.0, soft_timeout_s=1.0, pool_size=2)) as p:
        yield p


def run_generate(stub_openai, tmp_path, pool, respond, **config):
    server = stub_openai(respond)
    client = ChatClient(server.base_url, "stub", max_retries=0)
    out = tmp_path / "pool"
    cfg = GenerateConfig(n_envs=1, max_attempts=1, plays_per_arm=2, secret=SECRET, **config)
    outcomes = generate(client, Corpus.load(CORPUS), pool, cfg, out, progress=lambda _line: None)
    manifest = [json.loads(line) for line in (out / "manifest.jsonl").read_text().splitlines()]
    return outcomes, manifest, EnvMemory.load(out / "memory.jsonl")


def test_an_env_raising_on_a_measurement_seed_during_hint_vetting_is_a_failure_code(stub_openai, tmp_path, pool):
    picky = guess(reset_prefix=f"\n        if seed in {MEASURED}:\n            raise RuntimeError('not these seeds')")
    (outcome,), manifest, memory = run_generate(stub_openai, tmp_path, pool, responder(picky))
    assert not outcome.valid and outcome.failure == "reset_raised" and "hint vetting" in outcome.reason
    assert outcome.designer_reward == DEFAULT_PENALTIES["reset_raised"]
    assert manifest[0]["failure"] == "reset_raised"
    (record,) = list(memory)
    assert record.status == "reset_raised" and record.plays == 0 and not record.playable


def test_a_failing_agent_endpoint_leaves_the_env_admitted_but_unmeasured(stub_openai, tmp_path, pool):
    (outcome,), manifest, memory = run_generate(
        stub_openai, tmp_path, pool, responder(guess(), agent=lambda body: (400, "model overloaded"))
    )
    assert outcome.valid and not outcome.measured and "agent call failed" in outcome.reason
    assert outcome.designer_reward == 0.0 and len(memory) == 0
    assert manifest[0]["measured"] is False


def test_arms_that_see_different_instances_are_unpaired(stub_openai, tmp_path, pool):
    # a per-worker salt on the measurement seeds only: validation (other seeds, two workers) cannot see it
    salted = guess(rng_seed=f"seed if seed not in {MEASURED} else seed * 1000 + SALT",
                   imports="\nimport time\nSALT = time.perf_counter_ns()")  # fmt: skip
    (outcome,), _, memory = run_generate(stub_openai, tmp_path, pool, responder(salted))
    assert outcome.failure == "unpaired" and outcome.designer_reward == DEFAULT_PENALTIES["unpaired"]
    assert list(memory)[0].status == "unpaired"


def test_a_paired_measurement_is_scored(stub_openai, tmp_path, pool):
    (outcome,), manifest, memory = run_generate(stub_openai, tmp_path, pool, responder(guess()))
    assert outcome.valid and outcome.measured and outcome.failure is None
    assert outcome.no_hint == [0.0, 0.0] and outcome.hinted == [0.0, 0.0] and outcome.regret == 0.0
    assert len(outcome.validation_seeds) == 5 and not set(outcome.validation_seeds) & set(outcome.seeds)
    assert list(memory)[0].status == "ok"


BUTTONS = """
from spade_envs.envs.tooluse import Instruction, ToolUseEnv, tool_call

class ButtonEnv(ToolUseEnv):
    max_turns = 8

    def setup(self):
        self.pressed = []
        self.target = [self.rng.choice(["red", "blue"]) for _ in range(3)]
        return Instruction(text="Press the buttons written on the sticker.", state=lambda: self.pressed == self.target)

    def tool_read_sticker(self) -> str:
        \"\"\"Read the sticker.\"\"\"
        return ", ".join(self.target)

    def tool_press_red(self) -> str:
        \"\"\"Press red.\"\"\"
        self.pressed.append("red")
        return "click"

    def tool_press_blue(self) -> str:
        \"\"\"Press blue.\"\"\"
        self.pressed.append("blue")
        return "click"

    def solution(self):
        return [tool_call("read_sticker")] + [tool_call(f"press_{c}") for c in self.target] + ["<answer></answer>"]
"""


def test_a_tool_solution_without_argument_values_vets_cleanly(pool):
    vetting = vet_hint_on_seeds(BUTTONS, "Read the sticker first, then press each button in order.", pool,
                                "tool_use", [0, 1, 2])  # fmt: skip
    assert vetting.failure is None and vetting.hint and len(vetting.first_obs) == 3


@pytest.mark.parametrize(
    ("fault", "phase", "code"),
    [
        (EnvTimeout("slow"), "step", "timeout"),
        (EnvCrashed("dead"), "reset", "crashed"),
        (OutputTooLarge("big"), "step", "output_too_large"),
        (ProtocolViolation("forged"), "step", "protocol_violation"),
        (EnvRaised("boom"), "step", "step_raised"),
        (EnvRaised("boom"), "reset", "reset_raised"),
        (EnvRaised("boom"), "solution", "no_solution"),
        (EnvRaised("types", code="bad_types"), "reset", "reset_bad_types"),
        (EnvRaised("nan", code="nonfinite_reward"), "step", "nonfinite_reward"),
        (EnvRaised("no class", code="no_env_class"), "load", "no_env_class"),
        (InvalidEnvSource("syntax_error", "bad"), "load", "syntax_error"),
        (ContractViolation("types"), "step", "step_bad_types"),
        (ContractViolation("nan", code="nonfinite_reward"), "step", "nonfinite_reward"),
        (RuntimeError("anything else"), "step", "crashed"),
        ("env_timeout", "step", "timeout"),
        ("env_raised", "reset", "reset_raised"),
        ("env_raised", "step", "step_raised"),
        ("env_crashed", "step", "crashed"),
        ("protocol_violation", "step", "protocol_violation"),
        ("episode_deadline", "step", "timeout"),
        ("something new", "nonsense phase", "crashed"),
    ],
)
def test_one_mapping_of_play_faults_to_codes(fault, phase, code):
    assert fault_code(fault, phase) == code and code in FAILURE_CODES


def test_unpaired_seeds_compares_every_arm_seed_by_seed():
    seeds = [5, 6, 7]
    assert unpaired_seeds(seeds, ["a", "b", "c"], ["a", "b", "c"], {5: "a", 6: "b", 7: "c"}) == []
    assert unpaired_seeds(seeds, ["a", "b", "c"], ["a", "x", "c"]) == [6]
    assert unpaired_seeds(seeds, {5: "a"}, ["z", "b", "c"]) == [5]


SET_ENV = """
import random

DOORS = {"amber", "birch", "cedar", "delta", "ember", "flint", "grove", "heron"}


class DoorsEnv:
    max_turns = 3

    def reset(self, seed=None):
        self.rng = random.Random(seed)
        self.order = list(DOORS)  # set iteration order: decided by the string-hash seed of the process
        self.secret = self.rng.choice(self.order)
        return "Doors, left to right: " + ", ".join(self.order) + ". Open one with open NAME.", {}

    def step(self, action):
        if action.strip() == "open " + self.secret:
            return "Treasure!", 1.0, True, False, {}
        return "Empty.", 0.0, True, False, {}

    def solution(self):
        return ["open " + self.secret]
"""


def test_an_env_iterating_a_set_is_the_same_instance_in_every_worker(pool):
    from spade_envs.design.validate import validate_source
    from spade_envs.envs.episode import do_nothing_policy, play
    from spade_envs.sandbox import RemoteEnv

    seen = set()
    for _worker in range(5):
        env = RemoteEnv(SET_ENV, pool)
        try:
            plays = [play(env, do_nothing_policy("games"), seed, setting="games") for seed in range(4)]
            seen.add(tuple((p.first_obs_hash, p.transcript_hash) for p in plays))
        finally:
            env.close()
    assert len(seen) == 1
    report = validate_source(SET_ENV, pool)
    assert report.ok and "cross_worker" in report.checks, report


def test_the_arms_of_a_set_iterating_env_are_paired(stub_openai, tmp_path, pool):
    respond = responder(SET_ENV, agent=lambda body: {"content": "\\boxed{open amber}"})
    (outcome,), _, _ = run_generate(stub_openai, tmp_path, pool, respond)
    assert outcome.measured and outcome.failure is None, outcome.reason
    assert outcome.no_hint == outcome.hinted  # the agent ignores the hint: paired arms agree seed by seed
