"""Red team, reward shapes: partial credit and seed tells must earn no more than an honest frontier env.

Issue 37 (review 3), findings 1-3. The designer reward, its regret and its feasibility gate count *wins* (the env's
own verdict: an outcome of 1), so partial credit below 1 buys nothing; the memory labels an env by its wins too.
Training plays draw their seeds from the same keyed hash as the measurement plays, so an env cannot be a frontier
where it is measured and trivial where it is trained; ``generate`` measures on those hashed seeds as well.

The real-path tests go through ``spade-envs generate`` (extraction, sandboxed validation, hint vetting, the
no-hint, hint and placebo arms, reward, memory) with only the model scripted, as ``test_designer_redteam.py`` does:
the scripted agent solves the keypad when its first number is even, or when its prompt states the rule.
"""

from __future__ import annotations

import json
import re

import numpy as np
import pytest

from spade_envs.cli.main import main
from spade_envs.curriculum import Curriculum, CurriculumConfig
from spade_envs.design.measure import MEASUREMENT_SEED_LOW, measurement_seeds, training_seed
from spade_envs.design.memory import EnvMemory
from spade_envs.design.memory_record import MemoryRecord
from spade_envs.design.rewards import VARIANTS, RewardConfig, SkillEMA, WindowStats, credited_regret, designer_reward
from spade_envs.envs.spec import EnvSpec
from spade_envs.sandbox import RemoteEnv, SandboxConfig, WorkerPool

CORPUS = "examples/data/sample_corpus.jsonl"
#: The seed secret these runs pin (``--seed-secret``, ``CurriculumConfig.seed_secret``): the same seeds in every run,
#: so each exploit is compared with the honest env on the same seeds (an unpinned run draws its own secret).
SECRET = "ab1e" * 16

#: The red-team keypad (key = last digit of a + b + c), with {cond} restricting instances, {partial} the reward of a
#: well-formed wrong key, {info} the info of that step and {extra} more observation text (reset's ``seed`` is usable).
KEYPAD = """
import random
import re

class {name}Env:
    max_turns = 3

    def reset(self, seed=None):
        seed = seed or 0
        rng = random.Random(seed)
        while True:
            self.a, self.b, self.c = rng.randint(11, 89), rng.randint(11, 89), rng.randint(11, 89)
            self.key = (self.a + self.b + self.c) % 10
            if self.key not in ((self.a * self.b) % 10, 0){cond}:
                break
        self.done = False
        return (f"Panel: the numbers {{self.a}}, {{self.b}} and {{self.c}} glow on the door.{extra} "
                "Unlock it with \\\\boxed{{key N}} where N is one digit. One try only."), {{}}

    def step(self, action):
        if self.done:
            return "The door is closed for good.", 0.0, True, False, {{}}
        self.done = True
        if action.strip().lower() == "key %d" % self.key:
            return "The door opens.", 1.0, True, False, {{"success": True}}
        if re.fullmatch(r"key [0-9]", action.strip().lower()):
            return "Wrong key. The door seals.", {partial}, True, False, {info}
        return "Wrong key. The door seals.", 0.0, True, False, {{}}

    def solution(self):
        return ["key %d" % self.key]
"""
HINT = "The key is the last digit of the sum of the three numbers shown; answer with key and that digit."
#: Where the observation states the key outright, the scripted agent copies it (an instance made trivial).
SHOWN = "{' The key is %d.' % self.key if TELL else ''}"


def keypad(name: str, cond: str = "", partial: str = "0.0", info: str = "{}", extra: str = "") -> str:
    return KEYPAD.format(name=name, cond=cond, partial=partial, info=info, extra=extra)


HONEST = keypad("Keypad")


def agent_reply(prompt: str) -> str:
    """The scripted agent: copies a key the observation states, else solves when a is even or the rule is known."""
    numbers = re.search(r"numbers (\d+), (\d+) and (\d+) glow", prompt)
    if numbers is None:
        return "\\boxed{wait}"
    shown = re.search(r"The key is (\d)\.", prompt)
    if shown:
        return f"\\boxed{{key {shown.group(1)}}}"
    a, b, c = map(int, numbers.groups())
    key = (a + b + c) % 10 if "last digit of the sum" in prompt or a % 2 == 0 else (a * b) % 10
    return f"\\boxed{{key {key}}}"


def scripted(source: str):
    def respond(body):
        system, user = body["messages"][0]["content"], body["messages"][1]["content"]
        if system.startswith("You design"):
            return {"content": f"```python\n{source}```"}
        if system.startswith("You write short privileged hints"):
            return {"content": HINT}
        return {"content": agent_reply(user)}

    return respond


def generate(tmp_path, stub_openai, source: str, n: int = 1) -> tuple[list[dict], EnvMemory]:
    server = stub_openai(scripted(source))
    out = tmp_path / "pool"
    args = ["generate", "--base-url", server.base_url, "--model", "stub", "--corpus", CORPUS, "--n", str(n),
            "--max-attempts", "1", "--plays", "4", "--out", str(out), "--seed-secret", SECRET]  # fmt: skip
    assert main(args) == 0
    lines = [json.loads(x) for x in (out / "manifest.jsonl").read_text().splitlines()]
    assert all(line["valid"] and line["measured"] and line["hint_failure"] is None for line in lines), lines
    return lines, EnvMemory.load(out / "memory.jsonl")


_HONEST: list[list[dict]] = []


@pytest.fixture
def honest(tmp_path_factory, stub_openai) -> list[dict]:
    """The honest frontier keypad's designer samples over 4 slots (generated once per module)."""
    if not _HONEST:
        lines, _ = generate(tmp_path_factory.mktemp("honest"), stub_openai, HONEST, n=4)
        assert all(line["hinted"] == [1.0] * 4 for line in lines)
        assert any(0.0 < line["win_rate"] < 1.0 and line["regret"] > 0 for line in lines)
        _HONEST.append(lines)
    return _HONEST[0]


def _config(seed: int, secret: bytes | None = None) -> CurriculumConfig:
    return CurriculumConfig(setting="games", seed=seed, regen_every=4, envs_per_regen=24, skills=("logical_deduction",),
                            active_per_regen=None, memory_replay_fraction=0.0, use_memory=True, lp_fast_ema=0.98,
                            lp_slow_ema=0.85, seed_secret=secret)  # fmt: skip


# ----- finding 1: partial credit ---------------------------------------------------------------------------------
def _window(no_hint, hint, placebo):
    seeds = tuple(range(len(no_hint)))
    return WindowStats("logical_deduction", no_hint, no_hint, hint, seeds, seeds, paired_placebo=placebo)


@pytest.mark.parametrize("variant", VARIANTS)
@pytest.mark.parametrize("credit", [0.5, 0.99])
def test_partial_credit_below_a_win_does_not_change_any_designer_reward(variant, credit):
    # no-hint wins 1 of 4, the hint wins 3 of 4, the placebo 1 of 4; every loss is paid `credit` or 0
    def arms(loss):
        return (1.0, loss, loss, loss), (1.0, 1.0, 1.0, loss), (loss, 1.0, loss, loss)

    cfg, ema = RewardConfig(variant=variant), SkillEMA(0.1, {"logical_deduction": 0.3})
    paid, plain = _window(*arms(credit)), _window(*arms(0.0))
    assert designer_reward(cfg, paid, ema) == pytest.approx(designer_reward(cfg, plain, ema))
    assert credited_regret(cfg, paid) == pytest.approx(credited_regret(cfg, plain)) == pytest.approx(0.5)
    assert paid.win_rate == plain.win_rate == 0.25


def test_a_hint_that_only_raises_partial_credit_earns_no_regret_even_without_the_feasibility_gate():
    partial = _window((0.0, 0.0), (0.9, 0.9), ())  # the hinted arm never wins
    assert credited_regret(RewardConfig(require_feasible=False), partial) == 0.0


def test_memory_labels_a_partial_credit_env_by_its_training_wins():
    memory = EnvMemory()
    spec = EnvSpec("games-logical_deduction-partial", "games", "logical_deduction", HONEST)
    memory.add(MemoryRecord(spec=spec, win_rate=0.0, plays=4, last_played_step=0))
    curriculum = Curriculum(_config(0), memory, None)
    curriculum.record_plays(spec.env_id, 1, [0.5] * 8, [None] * 8, 0)  # 8 losses, each paid 0.5
    curriculum.record_plays(spec.env_id, 1, [0.5] * 7 + [1.0], [None] * 8, 1)  # and one win in 8
    assert memory.get(spec.env_id).win_rate == pytest.approx(1 / 16)
    shown = memory.exemplars("logical_deduction", "games", np.random.default_rng(0))
    assert not shown.positives and [e.reason for e in shown.negatives] == ["too hard: win rate 0.06"]


@pytest.mark.parametrize(
    ("partial", "info"),
    [("0.5", "{}"), ("0.99", "{'success': True, 'won': True}")],
    ids=["half_credit", "0.99_with_a_lying_success_flag"],
)
def test_partial_credit_on_hint_only_instances_earns_less_than_an_honest_env(
    tmp_path, stub_openai, honest, partial, info
):
    # every instance is one the agent cannot solve without the rule; any well-formed wrong key is paid `partial`
    exploit = keypad("Partial", cond=" and self.a % 2 == 1", partial=partial, info=info)
    (line,), memory = generate(tmp_path, stub_openai, exploit)
    assert line["no_hint"] == line["placebo"] == [float(partial)] * 4 and line["hinted"] == [1.0] * 4
    assert line["win_rate"] == 0.0 and line["regret"] == 1.0  # the hint teaches: it turns losses into wins
    best_honest = max(o["designer_reward"] for o in honest)
    mean_honest = sum(o["designer_reward"] for o in honest) / len(honest)
    assert line["designer_reward"] == pytest.approx(0.4)  # the regret term only: no plateau at a win rate of 0
    assert line["designer_reward"] < mean_honest <= best_honest
    (record,) = list(memory)
    assert record.win_rate == 0.0  # memory: too hard, never a "learnable" exemplar
    shown = memory.exemplars(record.skill, "games", np.random.default_rng(0))
    assert not shown.positives and shown.negatives[0].reason.startswith("too hard")


# ----- finding 3: generate measures on the hashed measurement seeds ----------------------------------------------
#: Even seeds state the key (trivial), odd seeds are instances the agent cannot solve without the rule.
PARITY = keypad("Parity", cond=" and (seed % 2 == 0 or self.a % 2 == 1)", extra=SHOWN.replace("TELL", "seed % 2 == 0"))


def test_generate_measures_on_hashed_measurement_seeds_so_seed_parity_pins_nothing(tmp_path, stub_openai, honest):
    lines, _ = generate(tmp_path, stub_openai, PARITY, n=4)
    for slot, line in enumerate(lines):
        assert line["seeds"] == measurement_seeds(0, f"slot {slot} attempt 0", 4, secret=bytes.fromhex(SECRET))
        assert line["win_rate"] == sum(s % 2 == 0 for s in line["seeds"]) / 4  # what the tell gives: chance only
    assert [o["seeds"] for o in honest] == [o["seeds"] for o in lines]  # a design's seeds: its key, not its code
    assert {line["win_rate"] for line in lines} != {0.5}  # consecutive seeds pinned w at 0.5 on every slot
    # so it is no longer paid 1.0 on every slot; its reward is chance's, as the honest env's is (which of the two
    # earns more over four designs depends on the seeds: the secret, not the env)


# ----- finding 2: training seeds look like measurement seeds ------------------------------------------------------
def _pool(run_seed: int, name: str = "x") -> Curriculum:
    memory = EnvMemory()
    memory.add(MemoryRecord(spec=EnvSpec(f"games-logical_deduction-{name}", "games", "logical_deduction", HONEST),
                            win_rate=0.5, plays=4))  # fmt: skip
    return Curriculum(_config(run_seed, bytes.fromhex(SECRET)), memory, None)


def _training_seeds(run_seed: int, steps: range, rows: int) -> list[int]:
    curriculum = _pool(run_seed)
    return [curriculum.agent_task(step, slot)["seed"] for step in steps for slot in range(rows)]


#: Arithmetic tells an env could compute from its seed: the old training formula's residue, and the low range.
TELLS = {
    "below_the_measurement_range": lambda s: s < MEASUREMENT_SEED_LOW,
    "old_training_residue": lambda s: s % 10_007 < 32,
    "old_training_residue_run_seed_7": lambda s: (s - 7 * 1_000_003) % 10_007 < 32,
}


@pytest.mark.parametrize("run_seed", [0, 7])
def test_training_seeds_carry_no_tell_that_measurement_seeds_lack(run_seed):
    training = _training_seeds(run_seed, range(0, 400, 8), 24)  # 1,200 agent rows over a 400-step run
    measured = [s for step in range(0, 400, 4) for d in range(3) for s in measurement_seeds(run_seed,
                f"step {step} design {d}", 4, secret=bytes.fromhex(SECRET))]  # fmt: skip
    assert len(set(training)) == len(training)
    assert all(MEASUREMENT_SEED_LOW <= s < 2**31 for s in training + measured)
    for name, tell in TELLS.items():  # base rate 32 / 10,007 (0.3%) and 0 for the range: ~4 rows at most either way
        assert sum(map(tell, training)) <= 12 and sum(map(tell, measured)) <= 12, name


def test_training_seeds_are_a_pure_function_of_run_seed_step_and_slot():
    first = _training_seeds(0, range(3), 5)
    again = _pool(0, "y")  # another pool (other env, nothing played before step 2), as a resumed run's is
    assert (
        [again.agent_task(2, slot)["seed"] for slot in range(5)]
        == first[10:]
        == [training_seed(0, 2, slot, secret=bytes.fromhex(SECRET)) for slot in range(5)]
    )
    assert _training_seeds(1, range(3), 5) != first  # the run key decides them


#: Frontier where measured, trivial where trained: the key is shown on any seed the old training formula makes.
SEED_TELL = keypad("Tell", extra=SHOWN.replace("TELL", "seed < 100000 or seed % 10007 < 32"))


def test_an_env_trivial_on_training_seeds_is_what_it_measured_in_training(tmp_path, stub_openai, honest):
    lines, _ = generate(tmp_path, stub_openai, SEED_TELL)
    assert lines[0]["designer_reward"] == honest[0]["designer_reward"]  # measured, the tell never fires
    pool = WorkerPool(SandboxConfig(pool_size=1))
    try:
        env = RemoteEnv(SEED_TELL, pool)
        try:
            seeds = _training_seeds(0, range(12), 2)  # the first steps' rows, whose seeds were below 100,000
            observations = [env.reset(seed)[0] for seed in seeds]
        finally:
            env.close()
    finally:
        pool.shutdown()
    trivial = sum("The key is" in obs for obs in observations)
    # the old formula's seeds all fired the tell (24 of 24); a hashed seed fires `seed % 10007 < 32` by chance
    # (0.3%: 1 of these 24 under SECRET), as often as a measurement seed does
    assert trivial <= 2, f"{trivial} of {len(seeds)} training instances state their key"
