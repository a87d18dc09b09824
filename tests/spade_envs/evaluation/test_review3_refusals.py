"""Review 3: which HTTP refusals are a scored sample, which a failure retried on rerun, and which stop the run.

Only a context-length 400 is a scored (wrong) sample. A 401/403/404 (a wrong key, URL or ``--model``) stops the run
with a message and exit status 1; 408 is retried like a 5xx; any other 4xx is a failure that is not recorded, so a
rerun plays it again. The ACEBench user simulator's refusals are never the agent's answer.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from eval_oracle import ACEBENCH, DATA, Oracle

from spade_envs.envs.llm import ChatClient
from spade_envs.evaluation import ResultStore, Sampling, run_suite
from spade_envs.evaluation.cli import main
from spade_envs.evaluation.suites.acebench import AceBenchAgentSuite
from spade_envs.evaluation.suites.math import GpqaDiamondSuite

NOT_FOUND = json.dumps({"error": {"message": "The model `spade` does not exist.", "code": 404}})


def _gpqa(tmp_path: Path, base_url: str, out: str, *extra: str) -> tuple[int, dict, str]:
    code = main(["--base-url", base_url, "--model", "spade", "--suite", "gpqa_diamond", "--data-dir", str(DATA),
                 "--out", str(tmp_path / out), "--quiet", "--retries", "0", "--samples", "2", *extra])  # fmt: skip
    suite = json.loads((tmp_path / out / "results.json").read_text())["suites"]["gpqa_diamond"]
    row = next(line for line in (tmp_path / out / "results.md").read_text().splitlines() if line.startswith("| gpqa"))
    return code, suite, row.split("|")[-2].strip()


@pytest.mark.parametrize("status", [401, 403, 404])
def test_a_wrong_key_url_or_model_stops_the_run_nonzero_and_a_rerun_scores_every_sample(stub_openai, tmp_path,
                                                                                        capsys, status):  # fmt: skip
    broken = {"on": True}
    good = Oracle()
    server = stub_openai(lambda body: (status, NOT_FOUND) if broken["on"] else good(body))
    code, suite, row_status = _gpqa(tmp_path, server.base_url, "run", "--concurrency", "1")
    err = capsys.readouterr().err
    assert code == 1 and not suite["complete"] and not row_status.startswith("ok")
    assert suite["samples"] == 0 and suite["inference_errors"] == 0 and f"HTTP {status}" in suite["stopped"]
    assert f"HTTP {status}" in err and "stopped" in err and "--model" in err
    assert len(server.requests) == 1  # the run stopped at the first refusal
    broken["on"] = False
    code, suite, row_status = _gpqa(tmp_path, server.base_url, "run")
    assert code == 0 and row_status == "ok" and suite["scores"]["score"] == 1.0 and suite["resumed_samples"] == 0


def test_a_408_is_retried_and_then_a_failure_a_rerun_plays(stub_openai, tmp_path):
    answers = iter([(408, "timeout")] * 3)
    good = Oracle()
    server = stub_openai(lambda body: next(answers, None) or good(body))
    code, suite, row_status = _gpqa(tmp_path, server.base_url, "run", "--concurrency", "1")
    assert code == 1 and suite["failed_samples"] == 3 and suite["samples"] == 3 and suite["inference_errors"] == 0
    assert row_status.startswith("incomplete") and "408" in suite["failures"][0]
    code, suite, row_status = _gpqa(tmp_path, server.base_url, "run")
    assert code == 0 and suite["scores"]["score"] == 1.0 and row_status == "ok"


@pytest.mark.parametrize(("status", "body"), [
    (400, json.dumps({"error": {"message": "The response was filtered (content management policy)."}})),
    (413, "Request Entity Too Large"),
    (422, json.dumps({"detail": "unprocessable"})),
])  # fmt: skip
def test_a_4xx_that_is_no_context_length_refusal_is_a_failure_not_a_wrong_answer(stub_openai, tmp_path, status, body):
    good = Oracle()
    refuse = {"on": True}
    server = stub_openai(lambda b: (status, body) if refuse["on"] else good(b))
    client = ChatClient(server.base_url, "m", max_retries=0)
    sampling = Sampling(n_samples=2, temperature=0.0, max_tokens=64)
    run = run_suite(GpqaDiamondSuite(), client, tmp_path, data_dir=DATA, sampling=sampling, progress=None)
    assert not run.records and len(run.failures) == 6 and not run.complete and run.stopped is None
    assert f"HTTP {status}" in run.failures[0]
    refuse["on"] = False
    rerun = run_suite(GpqaDiamondSuite(), client, tmp_path, data_dir=DATA, sampling=sampling, progress=None)
    assert rerun.complete and rerun.resumed == 0 and rerun.scores["score"] == 1.0


def test_refusals_an_earlier_version_stored_as_wrong_answers_are_played_again(tmp_path):
    """Before review 3 a 404 was stored as a wrong answer; such a line is dropped on resume, a context one kept."""
    refused = {
        "suite": "gpqa_diamond",
        "item_id": "q",
        "score": 0.0,
        "protocol": "p",
        "detail": {"inference_error": "http://h/v1/chat/completions refused the request: HTTP 404: nope"},
    }
    overflow = {
        **refused,
        "item_id": "r",
        "detail": {
            "inference_error": "http://h/v1/chat/completions refused the "
            "request: HTTP 400: This model's maximum context length is 10"
        },
    }
    answered = {**refused, "item_id": "s", "score": 1.0, "detail": {}}
    path = tmp_path / "gpqa_diamond.jsonl"
    path.write_text("".join(json.dumps({**r, "sample": 0}) + "\n" for r in (refused, overflow, answered)))
    store = ResultStore(path, "p")
    assert sorted(k[0] for k in store.records) == ["r", "s"] and store.replayed_refusals == 1
    assert len(path.read_text().splitlines()) == 2


def _acebench(stub_openai, tmp_path, user_answer):
    user_server = stub_openai(user_answer)
    agent_server = stub_openai(Oracle())
    suite = AceBenchAgentSuite(ACEBENCH, ChatClient(user_server.base_url, "gpt-4o", max_retries=0))
    return run_suite(suite, ChatClient(agent_server.base_url, "m", max_retries=0), tmp_path,
                     sampling=Sampling(n_samples=1, temperature=0.0, top_p=1.0, max_tokens=64), concurrency=1,
                     progress=None)  # fmt: skip


def test_a_user_simulator_refusal_is_a_failure_of_the_sample_not_the_agents_answer(stub_openai, tmp_path):
    filtered = json.dumps({"error": {"message": "The response was filtered (content management policy)."}})
    run = _acebench(stub_openai, tmp_path, lambda _body: (400, filtered))
    assert all(r.detail["kind"] == "multi_step" for r in run.records) and run.inference_errors == 0
    assert len(run.failures) == 1 and "user simulator" in run.failures[0] and not run.complete
    rerun = _acebench(stub_openai, tmp_path, Oracle())
    assert rerun.complete and rerun.scores["multi_turn"] == 1.0


def test_a_user_simulator_401_stops_the_run_and_names_the_simulator(stub_openai, tmp_path):
    run = _acebench(stub_openai, tmp_path, lambda _body: (401, '{"error": {"message": "Incorrect API key"}}'))
    assert run.stopped is not None and "user simulator" in run.stopped and "HTTP 401" in run.stopped
    assert not run.complete and all(r.detail["kind"] == "multi_step" for r in run.records)
