"""The recipe's design-time measurement (``SpadeDesignerLoop``), with the real sandbox, validation and hint vetting.

The harness (tiny tokenizer, scripted server, local env pool, loop runner) is ``test_failure_rule_on_cpu.py``'s.
Regression tests for issue 26 (the designer cannot game its reward): the placebo arm, hashed measurement seeds and
the regret memory stores.
"""

import pytest
from test_failure_rule_on_cpu import GAME, LocalPool, Server, design, run_loop, spade_config
from transformers import AutoTokenizer

import recipe.spade.agent_loops as loops
from recipe.spade.cpu.tiny_model import build_tiny_qwen3
from recipe.spade.reward_manager import designer_reward_config, score_sample
from spade_envs.design.measure import measurement_seeds


@pytest.fixture(scope="module")
def tokenizer(tmp_path_factory):
    return AutoTokenizer.from_pretrained(build_tiny_qwen3(tmp_path_factory.mktemp("tiny") / "model"))


def test_a_design_is_measured_in_three_arms_on_seeds_with_no_shared_residue(tmp_path, tokenizer, monkeypatch):
    cfg = spade_config(tmp_path, "games", "spade.plays_per_arm=4")
    pool = LocalPool(GAME, "games")
    out = run_loop(loops.SpadeDesignerLoop, cfg, tokenizer, Server(tokenizer, design(GAME), ["\\boxed{reveal}"]),
                   pool, monkeypatch, "designer")  # fmt: skip
    (outcome,) = pool.designs
    assert outcome["valid"], outcome
    measure = out.extra_fields["spade_measure"]
    assert len(measure["no_hint"]) == len(measure["hint"]) == 4
    assert len(measure["placebo"]) == 4  # spade.hint.placebo is on by default
    # the seeds used to be (k x 100000 + i) x 7 + 1: all 1 mod 7, so `seed % 7` variants were never measured
    assert len({s % 7 for s in measure["seeds"]}) > 1 and len(set(measure["seeds"])) == 4
    # keyed by the pool's seed secret (SpadeEnvPool.seed_secret): spade.seed, public, and the key alone do not give them
    assert measure["seeds"] == measurement_seeds(0, "step 0 design 0", 4, secret=pool._seed_secret())
    assert outcome["regret"] == 0.0  # this agent never wins: the credited (gated) regret memory stores
    assert score_sample(designer_reward_config(cfg), out.extra_fields)[0] >= 0.0
    (entry,) = pool.records  # the run record's entry (spade.record, issue 30): what the page of this design shows
    assert entry["kind"] == "design" and entry["verdict"] == "admitted" and entry["source"] == GAME
    assert entry["seeds"] == measure["seeds"] and entry["arms"]["placebo"] == measure["placebo"]
    assert entry["hint_text"] and entry["hint"] and entry["hint_failure"] is None
    assert sorted(entry["transcripts"]) == ["hint", "no_hint", "placebo"]
    played = entry["transcripts"]["hint"][0]
    assert len(entry["transcripts"]["hint"]) == 2 and played["seed"] == measure["seeds"][0]  # transcripts_per_arm
    roles = [turn["role"] for turn in played["turns"]]
    assert roles[:3] == ["prompt", "agent", "env"] and "\\boxed{reveal}" in played["turns"][1]["text"]
    assert entry["hint"] in played["turns"][0]["text"]  # the hinted arm's prompt carries the hint
    agent_turns = [turn for turn in played["turns"] if turn["role"] == "agent"]
    assert len(played["rewards"]) == played["agent_turns"] == len(agent_turns)  # the env's reward for each turn
    assert [turn["reward"] for turn in agent_turns] == played["rewards"]
