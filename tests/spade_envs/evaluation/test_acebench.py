"""ACEBench-Agent on a hand-written stand-in checkout: both metrics, the user simulator, the checker's rules."""

from __future__ import annotations

import json
import re
import shutil

import pytest
from eval_oracle import ACEBENCH, Oracle

from spade_envs.envs.llm import ChatClient
from spade_envs.evaluation import MissingEvalData, Sampling, run_suite
from spade_envs.evaluation.cli import main
from spade_envs.evaluation.suites.acebench import AceBenchAgentSuite
from spade_envs.evaluation.suites.acebench_env import check_end_to_end, process_accuracy, required_paths

SAMPLING = Sampling(n_samples=2, temperature=0.0, top_p=1.0, max_tokens=64)


def _run(stub_openai, tmp_path, corrupt=False, user=None):
    server = stub_openai(Oracle(corrupt=corrupt))
    suite = AceBenchAgentSuite(ACEBENCH, user)
    run = run_suite(suite, ChatClient(server.base_url, "m", max_retries=0), tmp_path, sampling=SAMPLING,
                    concurrency=4, progress=None)  # fmt: skip
    return run, server


@pytest.mark.parametrize("corrupt", [False, True], ids=["oracle", "corrupted"])
def test_end_to_end_and_process_accuracy(stub_openai, tmp_path, corrupt):
    run, _ = _run(stub_openai, tmp_path, corrupt)
    assert run.complete and not run.failures and len(run.records) == 6
    process = {r.item_id: r.detail["process"] for r in run.records}
    if not corrupt:
        assert run.scores == {"score": 1.0, "process": 1.0, "multi_step": 1.0, "multi_turn": 1.0,
                              "multi_step_process": 1.0, "multi_turn_process": 1.0}  # fmt: skip
        assert {r.detail["ended"] for r in run.records} == {"agent finished", "user finished"}
        return
    # The last state-changing call gets a wrong argument: every final state is off, one milestone in two is missed.
    assert [r.score for r in run.records] == [0.0] * 6
    assert process == {"agent_multi_step_0": 0.5, "agent_multi_step_1": 0.5, "agent_multi_turn_0": 0.0}
    assert run.scores["score"] == 0.0 and run.scores["process"] == 0.25
    assert "NotesApi.notes['2']" in run.records[0].detail["errors"][0]


def test_multi_turn_user_is_simulated_on_its_own_endpoint(stub_openai, tmp_path):
    user_server = stub_openai(Oracle())
    run, agent_server = _run(stub_openai, tmp_path, user=ChatClient(user_server.base_url, "sim", max_retries=0))
    assert run.scores["multi_turn"] == 1.0
    # Two user lines per multi-turn sample (the request, then the close), none from the agent's endpoint.
    assert len(user_server.requests) == 2 * SAMPLING.n_samples
    assert all(not r.get("tools") and r["model"] == "sim" for r in user_server.requests)
    assert all(r.get("tools") for r in agent_server.requests)
    first = user_server.requests[0]["messages"]
    assert "Instruction: You are Eve." in first[0]["content"] and first[1]["role"] == "user"
    transcript = next(r for r in run.records if r.item_id == "agent_multi_turn_0").response
    assert transcript.startswith("[user] Hi. You are Eve.")
    assert transcript.endswith("[user] Thanks! finish conversation")
    assert run.suite.provenance["user_simulator"] == {"model": "sim", "model_under_test": False}
    assert run.suite.provenance["user_simulator_endpoint"] == user_server.base_url


def test_agent_gets_the_items_functions_and_the_domain_rules(stub_openai, tmp_path):
    _, server = _run(stub_openai, tmp_path)
    turn = next(r for r in server.requests if "Call mom" in r["messages"][1]["content"])
    assert [t["function"]["name"] for t in turn["tools"]] == ["turn_on_wifi", "login_device", "add_note",
                                                               "find_note", "append_to_note"]  # fmt: skip
    assert turn["tools"][4]["function"]["parameters"]["type"] == "object"  # ACEBench's "dict" type mapped
    assert "You are a phone assistant" in turn["messages"][0]["content"]  # BASE_PROMPT_EN, read from the checkout


def test_missing_or_incomplete_checkout_says_what_and_where(tmp_path):
    with pytest.raises(MissingEvalData, match=r"needs an ACEBench checkout.*git clone https://github\.com/ACEBench/"
                       r"ACEBench && git -C ACEBench checkout e6db74b.*--acebench-root.*ACEBENCH_ROOT"):  # fmt: skip
        AceBenchAgentSuite(None).load(None)
    partial = tmp_path / "ACEBench"
    shutil.copytree(ACEBENCH, partial)
    (partial / "data_all" / "data_en" / "possible_answer" / "data_agent_multi_turn.json").unlink()
    lacks = re.escape(str(partial / "data_all/data_en/possible_answer/data_agent_multi_turn.json"))
    with pytest.raises(MissingEvalData, match=f"checkout {re.escape(str(partial))} lacks {lacks}\\. Get it with"):
        AceBenchAgentSuite(partial).load(None)
    assert all(p.exists() for p in required_paths(ACEBENCH))


def test_cli_records_the_simulator_and_reads_acebench_root(stub_openai, tmp_path, monkeypatch, capsys):
    agent, user = stub_openai(Oracle()), stub_openai(Oracle())
    monkeypatch.setenv("ACEBENCH_ROOT", str(ACEBENCH))
    argv = ["--base-url", agent.base_url, "--model", "m", "--suite", "acebench_agent", "--out", str(tmp_path),
            "--user-base-url", user.base_url, "--user-model", "sim", "--quiet"]  # fmt: skip
    assert main(argv) == 0
    table = capsys.readouterr().out
    assert re.search(r"\| acebench_agent \| e2e acc \| 100\.0 \| process 100\.0 \| 3 +\| 3 +\| ok", table)
    results = json.loads((tmp_path / "results.json").read_text())
    assert results["settings"]["user_simulator"] == {
        "base_url": user.base_url,
        "model": "sim",
        "model_under_test": False,
    }
    suite = results["suites"]["acebench_agent"]
    assert suite["provenance"]["official_user_simulator"] == "gpt-4o" and suite["scores"]["process"] == 1.0
    assert len(suite["data_sha256"]) == 6
    monkeypatch.delenv("ACEBENCH_ROOT")
    assert main([*argv[:8], "--quiet"]) == 1
    assert "needs an ACEBench checkout" in capsys.readouterr().err


def test_end_to_end_follows_acebench_rules():
    truth = [{"BaseApi": {"wifi": True}}, {"ReminderAPI": {"reminder_list": {"1": "x"}}}]  # misspelt, as in ACEBench
    states = {"BaseApi": {"wifi": True}, "ReminderApi": {"reminder_list": {"1": "other"}}}
    assert check_end_to_end(states, truth) == (True, [], ["ReminderAPI"])
    extra = {"BaseApi": {"wifi": True}, "NotesApi": {"notes": {"1": "a", "2": "extra"}}}
    assert check_end_to_end(extra, [{"BaseApi": {"wifi": True}}, {"NotesApi": {"notes": {"1": "a"}}}])[0]
    assert check_end_to_end(None, truth) == (False, ["no function was called"], [])
    assert not check_end_to_end({"BaseApi": {"wifi": True}}, truth)[0]  # class count differs
    assert check_end_to_end({"BaseApi": {"wifi": False}}, {"BaseApi": {"wifi": True}})[1] == [
        "BaseApi.wifi: expected True, got False"
    ]


def test_process_matches_milestones_in_order_as_text():
    # ACEBench writes some milestones as invalid Python; they still match the same call.
    steps = ["[login(user='Eve')]", "[order(shop='Domino's', items=[{'product': 'Pizza', 'quantity': 1}])]"]
    milestones = ['[login(user="Eve")]', "[order(shop='Domino's', items=[{'product':'Pizza', 'quantity': 1}])]"]
    assert process_accuracy(steps, milestones, passed=False) == 1.0
    assert process_accuracy(steps[::-1], milestones, passed=False) == 0.5  # order matters
    assert process_accuracy(steps[1:], milestones, passed=False) == 0.0  # a missed milestone ends the search
    assert process_accuracy([], milestones, passed=True) == 1.0  # a passed item scores 1
    assert process_accuracy(steps[:1], [milestones, milestones[:1]], passed=False) == 1.0  # best alternative
    assert process_accuracy(steps, [], passed=False) == 1.0


def test_compare_refuses_runs_whose_user_simulator_was_the_model_under_test(stub_openai, tmp_path, capsys):
    """Base and trained checkpoints each playing their own user are not one protocol; one fixed simulator is."""
    user = stub_openai(Oracle())
    for tag, model in (("base", "Qwen3-4B-base"), ("run", "Qwen3-4B-spade-step400")):
        agent = stub_openai(Oracle())
        common = ["--base-url", agent.base_url, "--model", model, "--suite", "acebench_agent", "--acebench-root",
                  str(ACEBENCH), "--quiet"]  # fmt: skip
        assert main([*common, "--out", str(tmp_path / "own" / tag)]) == 0
        assert "the model under test also plays the multi-turn user" in capsys.readouterr().err
        assert main([*common, "--out", str(tmp_path / "fixed" / tag), "--user-base-url", user.base_url,
                     "--user-model", "gpt-4o-stand-in"]) == 0  # fmt: skip
        own = json.loads((tmp_path / "own" / tag / "results.json").read_text())["suites"]["acebench_agent"]
        assert own["provenance"]["user_simulator"] == {"model": model, "model_under_test": True}
        assert own["provenance"]["user_simulator_endpoint"] == agent.base_url
    capsys.readouterr()
    assert main(["compare", str(tmp_path / "own" / "base"), str(tmp_path / "own" / "run")]) == 2
    assert (
        "acebench_agent: the base and the run run's user simulator was the model under test" in capsys.readouterr().err
    )
    assert main(["compare", str(tmp_path / "fixed" / "base"), str(tmp_path / "fixed" / "run")]) == 0
