"""Admitted code nested deeper than Python-level AST walks recurse must not crash the host (issue 39, eighth stop).

A 600-term ``1+1+...`` compiles and passes validation in a worker, but ``ast.NodeVisitor`` and ``ast.unparse``
recurse once per term. The env pool's memory hashes every admitted env (``MemoryRecord``), so the env-pool actor
raised ``RecursionError`` out of ``register_design`` and the designer loop with it. An adversary pass found the same
in the hint writer's view of the code (``without_comments``; the loop now writes no hint for such code).
"""

from __future__ import annotations

import json

from test_designer_redteam import CORPUS, HONEST, HONEST_HINT, SECRET, scripted

from spade_envs.cli.main import main
from spade_envs.curriculum import Curriculum, CurriculumConfig, seed_memory
from spade_envs.design.ast_hash import normalized_ast_hash
from spade_envs.design.memory import EnvMemory, MemoryConfig
from spade_envs.envs.skills import SKILLS

DEEP = "class DeepEnv:\n    WEIGHT = " + " + ".join(["1"] * 600) + "\n    max_turns = 3\n"


def test_deep_code_has_a_stable_hash_of_its_text():
    first = normalized_ast_hash(DEEP)
    assert first == normalized_ast_hash(DEEP)
    assert first != normalized_ast_hash(DEEP.replace("WEIGHT", "HEFT"))  # the text's identity: no cosmetic merging
    assert normalized_ast_hash("\n\n" + DEEP + "\n\n") == first  # blank lines aside, as for unparsable text


def test_the_curriculum_admits_deep_code_into_memory():
    config = CurriculumConfig(setting="games", seed=0, regen_every=2, envs_per_regen=2, skills=tuple(SKILLS["games"]),
                              active_per_regen=None, memory_replay_fraction=0.0, use_memory=True, lp_fast_ema=0.98,
                              lp_slow_ema=0.85)  # fmt: skip
    cur = Curriculum(config, seed_memory(EnvMemory(MemoryConfig(capacity=50)), []), None, clock=lambda: 0.0)
    env_id = cur.register_design(0, {"valid": True, "skill": cur.design_skill(0, 0), "source": DEEP, "doc_id": None,
                                     "code": None, "win_rate": 0.5, "raw_regret": 0.0, "seeds": [1, 2],
                                     "regret": 0.0, "hint_failure": None})  # fmt: skip
    assert env_id in cur.memory and cur.memory.get(env_id).spec.source == DEEP


def test_spade_envs_generate_admits_deep_code_without_a_hint(tmp_path, stub_openai):
    deep = HONEST + "\n\n_WEIGHT = " + " + ".join(["1"] * 600) + "\n"
    server = stub_openai(scripted(deep, HONEST_HINT))
    out = tmp_path / "pool"
    args = ["generate", "--base-url", server.base_url, "--model", "stub", "--corpus", CORPUS, "--n", "1",
            "--max-attempts", "1", "--plays", "2", "--out", str(out), "--seed-secret", SECRET]  # fmt: skip
    assert main(args) == 0
    (line,) = [json.loads(x) for x in (out / "manifest.jsonl").read_text().splitlines()]
    assert line["valid"] and line["hint_failure"] == "hint_failed" and line["regret"] == 0.0, line
