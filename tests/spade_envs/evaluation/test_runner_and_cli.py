"""Runner and CLI: resume after a kill, ordering under concurrency, failures retried, reports written."""

from __future__ import annotations

import hashlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from eval_oracle import ACEBENCH, BFCL_IDS, BFCL_LIVE_IDS, BFCL_NON_LIVE_IDS, DATA, RG_TASKS, Oracle

from spade_envs.envs.llm import ChatClient
from spade_envs.evaluation import SUITES, ResultStore, Sampling, run_suite
from spade_envs.evaluation.cli import main
from spade_envs.evaluation.suites.bfcl import BfclMultiTurnSuite
from spade_envs.evaluation.suites.bfcl_single import BfclLiveSuite, BfclNonLiveSuite
from spade_envs.evaluation.suites.math import AimeSuite
from spade_envs.evaluation.suites.reasoning_gym import ReasoningGymSuite

ROOT = Path(__file__).resolve().parents[3]


def _lines(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_concurrency_does_not_reorder_or_lose_results(stub_openai, tmp_path):
    server = stub_openai(Oracle())
    client = ChatClient(server.base_url, "m", max_retries=0)
    sampling = Sampling(n_samples=6, temperature=0.0, max_tokens=64)
    one = run_suite(AimeSuite(2025), client, tmp_path / "a", data_dir=DATA, sampling=sampling, concurrency=1,
                    progress=None)  # fmt: skip
    many = run_suite(AimeSuite(2025), client, tmp_path / "b", data_dir=DATA, sampling=sampling, concurrency=16,
                     progress=None)  # fmt: skip
    for run in (one, many):  # a sample lost to the transport is a failure, not a silent loss: say which it was
        assert not run.failures and run.interrupted is None, (run.failures, run.interrupted)
    assert [(r.item_id, r.sample) for r in many.records] == [(r.item_id, r.sample) for r in one.records]
    assert len(many.records) == 18 and many.records == one.records
    assert len(_lines(tmp_path / "b" / "aime25.jsonl")) == 18


def test_failed_calls_are_not_recorded_and_a_rerun_retries_them(stub_openai, tmp_path):
    good = Oracle()
    calls = {"n": 0}

    def flaky(body):
        calls["n"] += 1
        return (503, "overloaded") if calls["n"] % 3 == 0 else good(body)

    client = ChatClient(stub_openai(flaky).base_url, "m", max_retries=0)
    sampling = Sampling(n_samples=4, temperature=0.0, max_tokens=64)
    first = run_suite(AimeSuite(2025), client, tmp_path, data_dir=DATA, sampling=sampling, progress=None)
    assert first.failures and not first.complete
    client = ChatClient(stub_openai(good).base_url, "m", max_retries=0)
    second = run_suite(AimeSuite(2025), client, tmp_path, data_dir=DATA, sampling=sampling, progress=None)
    assert second.complete and second.resumed == len(first.records) and second.scores["score"] == 1.0


def test_store_drops_a_half_written_last_line(tmp_path):
    path = tmp_path / "s.jsonl"
    record = {"suite": "s", "item_id": "a", "sample": 0, "score": 1.0}
    path.write_text(json.dumps(record) + "\n" + '{"suite": "s", "item_')
    store = ResultStore(path)
    assert list(store.records) == [("a", 0)] and store.dropped_lines == 1
    assert path.read_text().endswith("}\n")


def test_resume_after_kill_gives_no_duplicates_and_same_totals(stub_openai, tmp_path):
    server = stub_openai(Oracle(delay=0.05))
    out = tmp_path / "run"
    argv = ["--base-url", server.base_url, "--model", "m", "--suite", "aime25,aime26", "--out", str(out),
            "--data-dir", str(DATA), "--samples", "10", "--concurrency", "2", "--quiet"]  # fmt: skip
    code = f"import sys; from spade_envs.evaluation.cli import main; sys.exit(main({argv!r}))"
    proc = subprocess.Popen([sys.executable, "-c", code], cwd=ROOT, start_new_session=True)
    log = out / "aime25.jsonl"
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline and (not log.exists() or len(log.read_text().splitlines()) < 6):
        time.sleep(0.02)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    done_before = len(log.read_text().splitlines())
    assert 6 <= done_before < 30 and not (out / "results.json").exists()
    assert main(argv) == 0
    records = _lines(log) + _lines(out / "aime26.jsonl")
    keys = [(r["item_id"], r["sample"]) for r in records]
    assert len(keys) == len(set(keys)) == 30 + 20
    results = json.loads((out / "results.json").read_text())
    assert results["suites"]["aime25"]["resumed_samples"] == done_before
    assert results["suites"]["aime25"]["scores"]["score"] == 1.0 and results["suites"]["aime25"]["samples"] == 30


@pytest.fixture
def small_registry(monkeypatch):
    for group, tasks in RG_TASKS.items():
        monkeypatch.setitem(SUITES, group, lambda _options, g=group, t=tasks: ReasoningGymSuite(g, tasks=t))
    monkeypatch.setitem(SUITES, "bfcl_multi_turn", lambda _options: BfclMultiTurnSuite(BFCL_IDS))
    monkeypatch.setitem(SUITES, "bfcl_non_live", lambda _options: BfclNonLiveSuite(BFCL_NON_LIVE_IDS))
    monkeypatch.setitem(SUITES, "bfcl_live", lambda _options: BfclLiveSuite(BFCL_LIVE_IDS))


def test_suite_all_against_the_stub_writes_table_and_reports(stub_openai, small_registry, tmp_path, capsys):
    server = stub_openai(Oracle(rg_samples=2))
    out = tmp_path / "all"
    argv = ["--base-url", server.base_url, "--model", "m", "--suite", "all", "--out", str(out), "--data-dir",
            str(DATA), "--acebench-root", str(ACEBENCH), "--samples", "2", "--quiet"]  # fmt: skip
    assert main(argv) == 0
    table = capsys.readouterr().out
    for name in SUITES:
        assert f"| {name} " in table
    assert "| average " in table and "100.0" in table
    results = json.loads((out / "results.json").read_text())
    assert set(results["suites"]) == set(SUITES)
    assert results["versions"]["reasoning-gym"] != "not installed"
    aime = results["suites"]["aime25"]
    assert aime["sampling"] == {"n_samples": 2, "temperature": 1.0, "top_p": 0.95, "max_tokens": 32768}
    assert list(aime["data_sha256"].values()) == [hashlib.sha256((DATA / "aime25.jsonl").read_bytes()).hexdigest()]
    assert len(results["suites"]["bfcl_multi_turn"]["data_sha256"]) >= 8
    assert results["suites"]["acebench_agent"]["scores"]["process"] == 1.0 and "| process 100.0 |" in table
    assert results["settings"]["user_simulator"] == {
        "base_url": server.base_url,
        "model": "m",
        "model_under_test": True,
    }
    assert (out / "results.md").read_text().startswith("# spade-eval results")


def test_cli_reports_missing_data_and_bad_arguments(stub_openai, tmp_path, capsys):
    server = stub_openai(Oracle())
    argv = ["--base-url", server.base_url, "--model", "m", "--out", str(tmp_path)]
    assert main([*argv, "--suite", "nope"]) == 2
    assert "unknown suite 'nope'" in capsys.readouterr().err
    assert main([*argv, "--serve-checkpoint", str(tmp_path)]) == 2
    assert "exactly one of --base-url and --serve-checkpoint" in capsys.readouterr().err
    assert main(["--out", str(tmp_path)]) == 2
    assert main([*argv, "--user-base-url", server.base_url]) == 2
    assert "--user-model is required" in capsys.readouterr().err
    assert main([*argv, "--suite", "gpqa_diamond", "--data-dir", str(tmp_path)]) == 1
    captured = capsys.readouterr()
    assert "gpqa_diamond.jsonl" in captured.err and "not run" in captured.out


OVERFLOW = ("This model's maximum context length is 100 tokens. However, you requested {total} tokens ({prompt} in the "
            "messages, {cap} in the completion). Please reduce the length of the messages or completion.")  # fmt: skip


def test_a_refused_request_is_a_wrong_answer_with_its_reason_not_a_dropped_sample(stub_openai, tmp_path, capsys):
    """A context-length 400 fails the same way on every rerun: scored 0 (BFCL's rule), its category kept."""
    good = Oracle()
    first_bfcl = BfclNonLiveSuite(["simple_python_0"]).load(None)[0].meta["entry"]["question"][0][0]["content"]

    def overflow(body):
        users = [m["content"] for m in body["messages"] if m["role"] == "user"]
        if users[0] == first_bfcl:
            return 400, json.dumps({"message": OVERFLOW.format(total=164, prompt=100, cap=64)})
        return good(body)

    client = ChatClient(stub_openai(overflow).base_url, "m", max_retries=0)
    suite = BfclNonLiveSuite(["simple_python_0", "multiple_0"])
    run = run_suite(suite, client, tmp_path, sampling=Sampling(n_samples=1, temperature=0.0, max_tokens=64),
                    progress=None)  # fmt: skip
    assert run.complete and not run.failures and run.inference_errors == 1
    refused = next(r for r in run.records if r.item_id == "simple_python_0")
    assert refused.score == 0.0 and "maximum context length" in refused.detail["inference_error"]
    assert refused.detail["category"] == "simple_python"
    assert run.scores["score"] == pytest.approx(0.5)  # BFCL: simple 0 and multiple 1; not 1.0 over multiple alone
    rerun = run_suite(BfclNonLiveSuite(["simple_python_0", "multiple_0"]), client, tmp_path,
                      sampling=Sampling(n_samples=1, temperature=0.0, max_tokens=64), progress=None)  # fmt: skip
    assert rerun.resumed == 2 and rerun.scores == run.scores


def test_a_context_length_refusal_is_retried_once_with_max_tokens_shrunk_to_the_room_left(stub_openai):
    caps = []

    def room_for_ten(body):
        caps.append(body["max_tokens"])
        if body["max_tokens"] > 10:
            return 400, json.dumps({"message": OVERFLOW.format(total=90 + body["max_tokens"], prompt=90,
                                                               cap=body["max_tokens"])})  # fmt: skip
        return {"content": "short"}

    client = ChatClient(stub_openai(room_for_ten).base_url, "m", max_retries=0)
    assert client.complete([{"role": "user", "content": "hi"}], max_tokens=64).text == "short"
    assert caps == [64, 10]
