"""Red team, recomputable seeds: an env that recomputes a run's seeds must earn no more than an honest frontier env.

Issue 37, finding 2, left open there: measurement, training and validation seeds were a hash of the run seed
(``spade.seed``, public, 0 by default) and a key whose form is in this repository, so generated code could import
``hashlib``, recompute run seed 0's measurement seeds (``slot 0 attempt 0`` in ``generate``, ``step 4 design 2`` in
the recipe) and training seeds (``step 5 row 3``) and behave otherwise on them. Every seed is now keyed by a per-run
secret (``spade.seed_secret``, drawn at a fresh start, kept in the checkpoint, :mod:`spade_envs.design.seed_secret`)
that no
env process can see.

The envs below recompute the seeds as ``measure.measurement_seeds`` drew them before the secret (the code is
inline: nothing of this repository's API is needed) and go through the real ``spade-envs generate`` path (sandboxed
validation, hint vetting, the three arms, reward), with only the model scripted (``test_redteam_reward_shapes.py``'s
keypad and agent: it copies a key the observation states, else solves when the first number is even or when its
prompt states the rule).
"""

from __future__ import annotations

import json

import pytest
from test_redteam_reward_shapes import CORPUS, SECRET, SHOWN, _config, keypad, scripted
from test_redteam_reward_shapes import honest as honest  # noqa: F401  (the fixture: the honest frontier env)

from spade_envs.cli.main import main
from spade_envs.curriculum import Curriculum
from spade_envs.design.memory import EnvMemory
from spade_envs.design.memory_record import MemoryRecord
from spade_envs.envs.spec import EnvSpec
from spade_envs.sandbox import RemoteEnv, SandboxConfig, WorkerPool

#: Run seed 0's seeds as the pre-secret hash drew them, for ``generate``'s keys and the recipe's first steps.
RECOMPUTE = r"""
import hashlib


def _public_seeds(run_seed, key, n):
    seeds, counter = [], 0
    while len(seeds) < n:
        digest = hashlib.sha256(f"{run_seed}\0{key}\0{counter}".encode()).digest()
        seed = 100000 + int.from_bytes(digest[:8], "big") % (2**31 - 100000)
        counter += 1
        if seed not in seeds:
            seeds.append(seed)
    return seeds


_KEYS = [f"slot {s} attempt {a}" for s in range(8) for a in range(5)]
_KEYS += [f"step {t} design {d}" for t in range(0, 16, 4) for d in range(24)]
MEASURED = {seed: i for key in _KEYS for i, seed in enumerate(_public_seeds(0, key, 4))}
TRAINED = {_public_seeds(0, f"step {t} row {r}", 1)[0] for t in range(16) for r in range(24)}
"""

#: Where it recognises a design's measurement seeds: the first two trivial (the key is shown), the others solvable
#: only with the hint, so it sits at w = 0.5 with full regret on every design (reward 1.0); anywhere else, a seed
#: training plays, it is trivial.
MEASURE_SPY = RECOMPUTE + keypad(
    "MeasureSpy",
    cond=" and (MEASURED.get(seed, 0) < 2 or self.a % 2 == 1)",
    extra=SHOWN.replace("TELL", "MEASURED.get(seed, 0) < 2"),
)
#: Where it recognises a training seed it is trivial; elsewhere (measured) it is the honest keypad.
TRAIN_SPY = RECOMPUTE + keypad("TrainSpy", extra=SHOWN.replace("TELL", "seed in TRAINED"))


def generate(tmp_path, stub_openai, source: str, n: int) -> list[dict]:
    """``spade-envs generate`` at run seed 0 (the default) with a secret: its manifest lines.

    The secret is pinned (any secret defeats the recomputation; a fresh one per unpinned run is
    ``test_the_cli_pins_a_secret...``'s) so the validation's random agent draws the same episodes every run: unpinned,
    it now and then typed the key these envs show and got a design rejected (CI, once in ~1,900 tests)."""
    server = stub_openai(scripted(source))
    out = tmp_path / "pool"
    args = ["generate", "--base-url", server.base_url, "--model", "stub", "--corpus", CORPUS, "--n", str(n),
            "--max-attempts", "1", "--plays", "4", "--out", str(out), "--seed-secret", SECRET]  # fmt: skip
    assert main(args) == 0
    lines = [json.loads(x) for x in (out / "manifest.jsonl").read_text().splitlines()]
    assert all(line["valid"] and line["measured"] and line["hint_failure"] is None for line in lines), lines
    return lines


def test_an_env_that_recomputes_the_measurement_seeds_earns_no_more_than_an_honest_env(tmp_path, stub_openai, honest):
    lines = generate(tmp_path, stub_openai, MEASURE_SPY, n=4)
    mean_honest = sum(o["designer_reward"] for o in honest) / len(honest)
    assert [line["designer_reward"] for line in lines] == [0.0] * 4  # before the secret: 1.0 on every design
    # it recognises none of its measurement seeds: every one is what it makes of a seed it does not know (trivial)
    assert [line["no_hint"] for line in lines] == [[1.0] * 4] * 4
    assert max(line["designer_reward"] for line in lines) <= mean_honest


def test_an_env_that_recomputes_the_training_seeds_is_in_training_what_it_measured(tmp_path):
    memory = EnvMemory()
    memory.add(MemoryRecord(spec=EnvSpec("games-logical_deduction-spy", "games", "logical_deduction", TRAIN_SPY),
                            win_rate=0.5, plays=4))  # fmt: skip
    curriculum = Curriculum(_config(0), memory, None)  # spade.seed 0, the default; no secret pinned
    seeds = [curriculum.agent_task(step, slot)["seed"] for step in range(12) for slot in range(2)]
    with WorkerPool(SandboxConfig(pool_size=1)) as pool:
        env = RemoteEnv(TRAIN_SPY, pool)
        try:
            observations = [env.reset(seed)[0] for seed in seeds]
        finally:
            env.close()
    trivial = sum("The key is" in obs for obs in observations)
    assert trivial == 0, f"{trivial} of {len(seeds)} training instances state their key (their seeds were recomputed)"


def test_the_cli_pins_a_secret_to_replay_a_validation_and_refuses_a_bad_one(capsys):
    def seeds(*secret: str) -> list[int]:
        assert main(["validate", "VaultCodeEnv", "--key", "slot 0 attempt 0", "--json", *secret]) == 0
        report = json.loads(capsys.readouterr().out)
        assert "secret" not in json.dumps(report)
        return report["seeds"] + report["probe_seeds"]

    pinned = seeds("--seed-secret", "5eed" * 16)
    assert seeds("--seed-secret", "5eed" * 16) == pinned and seeds() != pinned  # unpinned: a fresh secret per call
    with pytest.raises(SystemExit) as exit_info:
        main(["validate", "VaultCodeEnv", "--seed-secret", "5eed"])
    assert exit_info.value.code == 2 and "--seed-secret must hold at least 16 bytes" in capsys.readouterr().err
