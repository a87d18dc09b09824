"""Samples stamped with their protocol: a rerun reuses only its own protocol's samples; compare checks the samples."""

from __future__ import annotations

import json

from eval_oracle import DATA, Oracle

from spade_envs.envs.llm import ChatClient
from spade_envs.evaluation import Sampling, run_suite
from spade_envs.evaluation.cli import main
from spade_envs.evaluation.suites.math import AimeSuite


def _lines(path):
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_a_rerun_under_another_protocol_sets_the_old_samples_aside_instead_of_mixing_them(stub_openai, tmp_path):
    server = stub_openai(Oracle())
    client = ChatClient(server.base_url, "m", max_retries=0)
    smoke = run_suite(AimeSuite(2025), client, tmp_path, data_dir=DATA, sampling=Sampling(n_samples=2, max_tokens=64),
                      progress=None)  # fmt: skip
    assert smoke.complete and len(smoke.records) == 6
    full = Sampling(n_samples=4, max_tokens=32768)
    run = run_suite(AimeSuite(2025), client, tmp_path, data_dir=DATA, sampling=full, progress=None)
    assert run.complete and run.resumed == 0 and run.set_aside == 6 and len(server.requests) == 6 + 12
    stamps = {r["protocol"] for r in _lines(tmp_path / "aime25.jsonl")}
    assert len(_lines(tmp_path / "aime25.jsonl")) == 12 and len(stamps) == 1 and "" not in stamps
    assert {r.protocol for r in run.records} == stamps
    assert len(_lines(tmp_path / "set_aside" / "aime25.jsonl")) == 6  # kept, not lost
    again = run_suite(AimeSuite(2025), client, tmp_path, data_dir=DATA, sampling=full, progress=None)
    assert again.resumed == 12 and again.set_aside == 0 and len(server.requests) == 18
    other_model = ChatClient(server.base_url, "another-checkpoint", max_retries=0)
    moved = run_suite(AimeSuite(2025), other_model, tmp_path, data_dir=DATA, sampling=full, progress=None)
    assert moved.set_aside == 12 and moved.resumed == 0 and moved.protocol["model"] == "another-checkpoint"


def _cli(server, out, *extra):
    return main(["--base-url", server.base_url, "--model", "m", "--suite", "aime25", "--out", str(out),
                 "--data-dir", str(DATA), "--quiet", *extra])  # fmt: skip


def test_the_cli_says_how_many_samples_it_set_aside_and_results_json_names_the_protocol(stub_openai, tmp_path, capsys):
    server = stub_openai(Oracle())
    assert _cli(server, tmp_path, "--samples", "2", "--max-tokens", "64") == 0
    assert _cli(server, tmp_path, "--samples", "2") == 0
    assert "aime25: set aside 6 sample(s) of an earlier run under another protocol" in capsys.readouterr().err
    suite = json.loads((tmp_path / "results.json").read_text())["suites"]["aime25"]
    assert suite["set_aside_samples"] == 6 and suite["resumed_samples"] == 0
    assert suite["protocol"]["model"] == "m" and suite["protocol"]["sampling"]["max_tokens"] == 32768
    assert {r["protocol"] for r in _lines(tmp_path / "aime25.jsonl")} == {suite["protocol_sha256"]}


def test_compare_refuses_samples_made_under_another_protocol_than_their_results_json(stub_openai, tmp_path, capsys):
    server = stub_openai(Oracle())
    base, run = tmp_path / "base", tmp_path / "run"
    assert _cli(server, base, "--samples", "2") == 0 and _cli(server, run, "--samples", "2") == 0
    assert main(["compare", str(base), str(run)]) == 0
    capsys.readouterr()
    lines = _lines(run / "aime25.jsonl")
    lines[0]["protocol"] = "0" * 16  # one sample of a 64-token smoke run left among the full run's
    (run / "aime25.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines))
    assert main(["compare", str(base), str(run)]) == 2
    err = capsys.readouterr().err
    assert "refusing to compare" in err and "1 of 6 samples in the run run's aime25.jsonl" in err
    results = json.loads((base / "results.json").read_text())
    del results["suites"]["aime25"]["protocol_sha256"]  # as an older spade-eval wrote it
    (base / "results.json").write_text(json.dumps(results))
    assert main(["compare", str(base), str(run)]) == 2
    assert "the base run's results.json names no protocol" in capsys.readouterr().err
    assert main(["compare", str(base), str(run), "--allow-mismatch"]) == 0
    assert "- note: protocol differs (compared anyway): aime25: 1 of 6 samples" in capsys.readouterr().out
