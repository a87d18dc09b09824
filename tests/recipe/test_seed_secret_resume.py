"""The run's seed secret (``spade.seed_secret``) on the real env pool: drawn fresh, kept by checkpoints, pinnable.

Issue 37, finding 2 (the red-team half is ``tests/spade_envs/design/test_redteam_seed_secret.py``): every seed is keyed
by a
per-run secret env code never sees. A fresh start draws its own (two runs with the same ``spade.seed`` play other
seeds), a resume restores the checkpoint's (it replays the crashed run's seeds), a pin reproduces a run exactly, and a
checkpoint written before the secret existed resumes only with a pin, never silently on public seeds.
"""

import copy
import functools
import json
import stat
from pathlib import Path

import pytest
from omegaconf import OmegaConf
from test_run_semantics_on_cpu import checkpoint_of, compose_spade, good_outcome, prepared

from recipe.spade.env_pool import SpadeEnvPool
from spade_envs.builtin import builtin_source
from spade_envs.curriculum import CurriculumConfig

CORPUS = Path(__file__).resolve().parents[2] / "examples" / "data" / "sample_corpus.jsonl"
PIN = "c0ffee" * 6


@functools.cache
def composed(*overrides: str) -> dict:
    return OmegaConf.to_container(compose_spade(f"spade.corpus={CORPUS}", *overrides).spade, resolve=True)


def spade_block(run_dir: Path, *overrides: str) -> dict:
    return {**copy.deepcopy(composed(*overrides)), "run_dir": str(run_dir)}


def seeds(pool: SpadeEnvPool, steps: range, rows: int = 3) -> list[int]:
    return [pool.agent_task(step, slot)["seed"] for step in steps for slot in range(rows)]


def run_to_checkpoint(spade: dict, ckpt: Path) -> tuple[SpadeEnvPool, list[int]]:
    """Steps 0-2 (a design admitted at step 0), a checkpoint after step 2; then steps 3-5: their seeds."""
    pool = SpadeEnvPool(spade)
    seeds(pool, range(1))
    pool.register_design(0, good_outcome(builtin_source("VaultCodeEnv") + "\n\nVaultCodeEnv.variant = 1\n"))
    seeds(pool, range(1, 3))
    checkpoint_of(pool, ckpt)
    return pool, seeds(pool, range(3, 6))


def test_a_resume_replays_the_checkpoints_seeds_and_a_fresh_start_draws_other_ones(tmp_path):
    spade = spade_block(tmp_path / "run")
    first, after = run_to_checkpoint(spade, tmp_path / "ckpt")
    resumed = SpadeEnvPool(spade, restore_from=str(tmp_path / "ckpt"))  # the crashed run's dir, as a resume has
    assert resumed.seed_secret() == first.seed_secret() and len(first.seed_secret()) == 32
    assert seeds(resumed, range(3, 6)) == after  # the secret came with the checkpoint: the same seeds again
    fresh = SpadeEnvPool(spade_block(tmp_path / "fresh"))  # the same spade.seed, a fresh start
    assert fresh.seed_secret() != first.seed_secret() and not set(seeds(fresh, range(3, 6))) & set(after)
    for state in (tmp_path / "ckpt" / "pool_state.json", tmp_path / "run" / "pool_state.json"):  # owner-only
        assert stat.S_IMODE(state.stat().st_mode) == 0o600, state
    # never where an env or the designer could read it: tasks (their prompts), memory
    hexed = first.seed_secret().hex()
    shown = [resumed.designer_task(4, 0), resumed.agent_task(4, 0)]
    assert hexed not in json.dumps(shown) and hexed not in (tmp_path / "run" / "memory.jsonl").read_text()


def test_a_pinned_secret_replays_a_fresh_run_exactly_and_must_match_the_checkpoints(tmp_path):
    one, after = run_to_checkpoint(spade_block(tmp_path / "one", f"spade.seed_secret={PIN}"), tmp_path / "ckpt")
    two = SpadeEnvPool(spade_block(tmp_path / "two", f"spade.seed_secret={PIN}"))
    assert one.seed_secret() == two.seed_secret() == bytes.fromhex(PIN)
    assert seeds(two, range(1)) == seeds(one, range(1)) and seeds(two, range(3, 6)) == after
    other = spade_block(tmp_path / "other", "spade.seed_secret=" + "ab" * 16)
    with pytest.raises(ValueError, match="spade.seed_secret differs from the seed secret saved in"):
        SpadeEnvPool(other, restore_from=str(tmp_path / "ckpt"))


def test_a_checkpoint_from_before_the_secret_resumes_only_with_a_pinned_one(tmp_path):
    spade = spade_block(tmp_path / "run")
    run_to_checkpoint(spade, tmp_path / "ckpt")
    state_file = tmp_path / "ckpt" / "pool_state.json"
    state = json.loads(state_file.read_text())
    del state["seed_secret"]  # what a checkpoint written before spade.seed_secret holds
    state_file.write_text(json.dumps(state))
    with pytest.raises(ValueError, match=r"holds no seed secret .* spade.seed_secret=<hex string"):
        SpadeEnvPool(spade, restore_from=str(tmp_path / "ckpt"))
    pinned = {**spade, "seed_secret": PIN}
    assert SpadeEnvPool(pinned, restore_from=str(tmp_path / "ckpt")).seed_secret() == bytes.fromhex(PIN)


@pytest.mark.parametrize(
    ("value", "message"),
    [
        (1234, "must be a hex string, got the number 1234: quote it"),
        ("xyz", "must be a hex string"),
        ("ab" * 15, "must hold at least 16 bytes"),
        (["ab"], "must be a hex string or null"),
    ],
)
def test_a_bad_pinned_secret_is_refused_by_name(tmp_path, value, message):
    with pytest.raises(ValueError, match=f"spade.seed_secret {message}"):
        CurriculumConfig.from_spade({**spade_block(tmp_path), "seed_secret": value})


def test_prepare_refuses_a_bad_pin_before_ray_starts(tmp_path):
    with pytest.raises(ValueError, match="spade.seed_secret must be a hex string, got the number"):
        prepared(tmp_path, "trainer.total_training_steps=2", "spade.seed_secret=" + "12" * 16)
