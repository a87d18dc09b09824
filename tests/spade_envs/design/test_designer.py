"""The designer pipeline end to end against a scripted OpenAI-compatible server (a stand-in at the model boundary).

The stub answers designer prompts with a built-in environment for the requested skill (one broken answer first),
hint prompts with a generic hint, and agent prompts by replaying the solution only when the hint's text is present
(not its placebo, which has the hint's shape but other words), so the hinted arm wins and the unhinted and placebo
arms lose: regret 1, win rate 0. Everything else is real: corpus, prompts,
extraction, sandboxed validation, hint vetting, paired play, rewards, memory, files.
"""

import json
import re
from pathlib import Path

from spade_envs.builtin import BUILTINS, builtin_source, load_builtin
from spade_envs.cli.main import main
from spade_envs.design.measure import measurement_seeds
from spade_envs.design.memory import EnvMemory
from spade_envs.design.rewards import RewardConfig, blend

CORPUS = "examples/data/sample_corpus.jsonl"
#: The seed secret these runs pin (``--seed-secret``), so the scripted model knows the seeds it will be measured on.
SECRET = "de51" * 16


def design_seeds(keys: list[tuple[int, int]], plays: int) -> list[int]:
    """The measurement seeds ``generate`` draws for each (slot, attempt) at run seed 0 (hashed per design)."""
    secret = bytes.fromhex(SECRET)
    return [s for slot, attempt in keys for s in measurement_seeds(0, f"slot {slot} attempt {attempt}", plays,
                                                                    secret=secret)]  # fmt: skip


def scripted_model(setting: str, seeds: list[int], broken_first: bool = True):
    entries = [e for e in BUILTINS if e.setting == setting]
    solutions: dict[str, list[str]] = {}
    for entry in entries:
        env = load_builtin(entry.name)()
        for seed in seeds:
            obs, _ = env.reset(seed)
            solutions[obs] = env.solution()
    state = {"broken_sent": not broken_first}

    def respond(body):
        system, user = body["messages"][0]["content"], body["messages"][1]["content"]
        if system.startswith("You design"):
            if not state["broken_sent"]:
                state["broken_sent"] = True
                return {"content": "Here it is:\n```python\nclass BrokenEnv(:\n    pass\n```"}
            skill = re.search(r"train \*\*(\w+)\*\*", user).group(1)
            name = next(e.name for e in entries if e.skill == skill)
            return {"content": f"<think>draft</think>\nDone.\n```python\n{builtin_source(name)}```"}
        if system.startswith("You write short privileged hints"):
            return {"content": "HINT: Work through the state one step at a time and check each result."}
        turn = sum(m["role"] == "assistant" for m in body["messages"])
        actions = next((a for obs, a in solutions.items() if obs in user), None)
        if actions is None or "Work through the state" not in user or turn >= len(actions):
            return {"content": "\\boxed{wait}" if setting == "games" else "<answer>no idea</answer>"}
        return {"content": f"\\boxed{{{actions[turn]}}}" if setting == "games" else actions[turn]}

    return respond


def test_generate_builds_a_scored_env_pool(tmp_path, stub_openai, capsys):
    server = stub_openai(scripted_model("games", design_seeds([(0, 1), (1, 0)], 2)))
    out = tmp_path / "pool"
    args = ["generate", "--base-url", server.base_url, "--model", "stub", "--corpus", CORPUS, "--setting", "games",
            "--n", "2", "--plays", "2", "--out", str(out), "--seed-secret", SECRET]  # fmt: skip
    assert main(args) == 0
    printed = capsys.readouterr().out
    assert "2/2 envs admitted from 3 designer samples" in printed

    lines = [json.loads(line) for line in (out / "manifest.jsonl").read_text().splitlines()]
    corpus_ids = {json.loads(line)["id"] for line in Path(CORPUS).read_text().splitlines()}
    rejected, *valid = lines
    assert rejected["valid"] is False and rejected["reason"].startswith("syntax_error")
    assert rejected["designer_reward"] < 0
    expected = blend(0.0, 1.0, RewardConfig())
    for line in valid:
        assert line["valid"] and line["hint_failure"] is None
        assert line["no_hint"] == [0.0, 0.0] and line["hinted"] == [1.0, 1.0] and line["placebo"] == [0.0, 0.0]
        assert line["win_rate"] == 0.0 and line["regret"] == 1.0
        assert abs(line["designer_reward"] - expected) < 1e-9
        assert (out / "envs" / f"{line['env_id']}.py").read_text().startswith('"""')
        assert line["doc_id"] in corpus_ids
    assert [line["skill"] for line in valid] == ["mathematical_reasoning", "logical_deduction"]

    memory = EnvMemory.load(out / "memory.jsonl")
    assert len(memory) == 2 and {r.skill for r in memory} == {"mathematical_reasoning", "logical_deduction"}
    assert main(["memory", "stats", str(out / "memory.jsonl")]) == 0
    assert json.loads(capsys.readouterr().out)
    assert main(["memory", "show", str(out / "memory.jsonl")]) == 0
    assert "mathematical_reasoning" in capsys.readouterr().out


def test_generate_tool_use_without_corpus(tmp_path, stub_openai, capsys):
    server = stub_openai(scripted_model("tool_use", design_seeds([(0, 0)], 2), broken_first=False))
    out = tmp_path / "tools"
    args = ["generate", "--base-url", server.base_url, "--model", "stub", "--setting", "tool_use", "--n", "1",
            "--plays", "2", "--out", str(out), "--seed-secret", SECRET]  # fmt: skip
    assert main(args) == 0
    (line,) = [json.loads(x) for x in (out / "manifest.jsonl").read_text().splitlines()]
    assert line["valid"] and line["skill"] == "api_orchestration" and line["domain"] and line["variant"]
    assert line["hinted"] == [1.0, 1.0] and line["no_hint"] == [0.0, 0.0]
    tools_requests = [r for r in server.requests if r.get("tools")]
    assert tools_requests, "agent plays in the tool-use setting must offer the env's tools natively"
