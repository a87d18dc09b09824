"""A run always ends with a report: broken tasks, hanging scorers, raising suites and Ctrl-C are marked, not fatal."""

from __future__ import annotations

import json
import math
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from eval_oracle import ACEBENCH, BFCL_IDS, BFCL_LIVE_IDS, BFCL_NON_LIVE_IDS, DATA, RG_TASKS, Oracle

from spade_envs.envs.llm import ChatClient
from spade_envs.evaluation import SUITES, Sampling, answers, run_suite
from spade_envs.evaluation.cli import main
from spade_envs.evaluation.scorer_pool import ScorerPool, ScorerRaised, ScorerTimeout
from spade_envs.evaluation.suites.bfcl import BfclMultiTurnSuite
from spade_envs.evaluation.suites.bfcl_single import BfclLiveSuite, BfclNonLiveSuite
from spade_envs.evaluation.suites.math import AimeSuite
from spade_envs.evaluation.suites.reasoning_gym import ReasoningGymSuite

ROOT = Path(__file__).resolve().parents[3]
HANG = r"\boxed{70^{70^{70}}}"  # math-verify would compute a number with ~10^129 digits


def test_pool_kills_a_call_that_holds_the_gil_and_keeps_serving():
    pool = ScorerPool(size=1)
    try:
        with pytest.raises(ScorerTimeout):
            pool.call(pow, 10, 10**12, timeout_s=1.0)  # a huge power in C: no signal can interrupt it
        with pytest.raises(ScorerTimeout):
            pool.call(time.sleep, 60, timeout_s=0.5)
        assert pool.call(math.factorial, 5, timeout_s=30.0) == 120  # a fresh process took over
        with pytest.raises(ScorerRaised, match="ValueError"):
            pool.call(math.factorial, -1, timeout_s=30.0)
        assert pool.timeouts == 2
    finally:
        pool.shutdown()


@pytest.fixture
def broken_registry(monkeypatch):
    """The small test suites, with a Reasoning-Gym task that generates at no curriculum level (knight_swap in 0.1.25).

    knight_swap builds with its paper config, so the suites use the ``modules`` split (curriculum levels) here.
    """
    for group, tasks in RG_TASKS.items():
        extra = ["knight_swap"] if group == "rg_cognition" else []
        monkeypatch.setitem(SUITES, group, lambda _options, g=group, t=tasks + extra: ReasoningGymSuite(g, tasks=t,
                            split="modules"))  # fmt: skip
    monkeypatch.setitem(SUITES, "bfcl_multi_turn", lambda _options: BfclMultiTurnSuite(BFCL_IDS))
    monkeypatch.setitem(SUITES, "bfcl_non_live", lambda _options: BfclNonLiveSuite(BFCL_NON_LIVE_IDS))
    monkeypatch.setitem(SUITES, "bfcl_live", lambda _options: BfclLiveSuite(BFCL_LIVE_IDS))
    monkeypatch.setattr(answers, "MATH_TIMEOUT_S", 2.0)  # below math-verify's own 5 s alarms: the kill path


class HangingOracle(Oracle):
    """The oracle, except that the first AIME-25 problem gets an answer whose scoring never ends."""

    def __init__(self, hang_prompt: str) -> None:
        super().__init__(rg_samples=2)
        self.hang_prompt = hang_prompt

    def __call__(self, body):
        if body["messages"][0]["content"] == self.hang_prompt:
            return {"content": f"After long work: {HANG}"}
        if "knight" in body["messages"][0]["content"].lower():
            raise AssertionError("knight_swap never generates, so it is never asked")
        return super().__call__(body)


def test_suite_all_with_a_broken_task_and_a_hanging_scorer_ends_with_a_report(stub_openai, broken_registry,
                                                                              tmp_path, capsys):  # fmt: skip
    hang_prompt = AimeSuite(2025).load(DATA)[0].prompt
    server = stub_openai(HangingOracle(hang_prompt))
    out = tmp_path / "all"
    argv = ["--base-url", server.base_url, "--model", "m", "--suite", "all", "--out", str(out), "--data-dir",
            str(DATA), "--acebench-root", str(ACEBENCH), "--samples", "2", "--quiet"]  # fmt: skip
    assert main(argv) == 1  # a task failed: not a clean run, but a finished one
    table = capsys.readouterr().out
    results = json.loads((out / "results.json").read_text())
    assert set(results["suites"]) == set(SUITES) and not results["not_run"]
    cognition = results["suites"]["rg_cognition"]
    assert not cognition["complete"] and cognition["failed_samples"] == 2
    assert all("knight_swap" in f and "generates at no curriculum level" in f for f in cognition["failures"])
    assert cognition["scores"]["score"] == 1.0 and cognition["samples"] == 4  # the other tasks still ran
    assert "knight_swap" in cognition["provenance"]["failed_tasks"]
    aime = results["suites"]["aime25"]
    assert aime["complete"] and aime["scorer_timeouts"] == 2 and aime["samples"] == 6
    assert aime["scores"]["score"] == pytest.approx(4 / 6)  # the hanging answers count as wrong
    hung = [json.loads(line) for line in (out / "aime25.jsonl").read_text().splitlines()]
    assert sorted(r["detail"].get("scorer_timeout", 0) for r in hung) == [0, 0, 0, 0, 1, 1]
    others = [name for name in SUITES if name not in ("rg_cognition", "aime25")]
    assert all(results["suites"][name]["complete"] for name in others)
    assert "| rg_cognition " in table and "incomplete (2 failed)" in table and "ok (2 scorer timeouts)" in table
    assert (out / "results.md").read_text().startswith("# spade-eval results")


class ExplodingSuite(AimeSuite):
    """An AIME suite whose scoring code has a bug on one item: that item fails, the others are scored."""

    def run_sample(self, client, item, sample, sampling):
        if item.id.endswith("-1"):
            raise KeyError("a bug in the suite")
        return super().run_sample(client, item, sample, sampling)


def test_a_raising_sample_is_a_failure_of_that_item_only(stub_openai, tmp_path):
    client = ChatClient(stub_openai(Oracle()).base_url, "m", max_retries=0)
    run = run_suite(ExplodingSuite(2025), client, tmp_path, data_dir=DATA,
                    sampling=Sampling(n_samples=2, max_tokens=64), progress=None)  # fmt: skip
    assert not run.complete and len(run.failures) == 2 and all("KeyError" in f for f in run.failures)
    assert len(run.records) == 4 and run.scores["score"] == 1.0


def test_a_suite_that_cannot_load_is_reported_not_raised(stub_openai, tmp_path):
    client = ChatClient(stub_openai(Oracle()).base_url, "m", max_retries=0)
    run = run_suite(AimeSuite(2025), client, tmp_path, data_dir=tmp_path, progress=None)
    assert run.error is not None and "aime25.jsonl" in run.error and not run.complete and run.records == []


class HoldAfter:
    """The oracle for the first ``answered`` requests; every later one is held until ``release`` is set.

    ``on_held(n)`` runs in the server thread when the ``n``-th request is held, so a test can act once a known set
    of samples is in flight, without any timing.
    """

    def __init__(self, answered: int, on_held=None) -> None:
        self.oracle, self.answered, self.on_held = Oracle(), answered, on_held
        self.release, self.lock, self.seen = threading.Event(), threading.Lock(), 0

    def __call__(self, body):
        with self.lock:
            self.seen += 1
            n = self.seen
        if n <= self.answered:
            return self.oracle(body)
        if self.on_held is not None:
            self.on_held(n - self.answered)
        self.release.wait(30)
        return self.oracle(body)


def test_ctrl_c_reports_at_once_and_abandons_the_samples_in_flight(stub_openai, tmp_path: Path):
    """Deterministic: 2 samples answered, then 4 in flight (all held by the server) when Ctrl-C arrives."""

    def interrupt_when_all_four_are_held(held: int) -> None:
        if held == 4:  # the two finished workers took new samples: every worker now waits on the server
            os.kill(os.getpid(), signal.SIGINT)

    script = HoldAfter(2, interrupt_when_all_four_are_held)
    try:
        client = ChatClient(stub_openai(script).base_url, "m", max_retries=0)
        run = run_suite(AimeSuite(2025), client, tmp_path, data_dir=DATA,
                        sampling=Sampling(n_samples=4, max_tokens=64), concurrency=4, progress=None)  # fmt: skip
        assert run.interrupted == "KeyboardInterrupt" and not run.complete
        assert len(run.records) == 2 and run.abandoned == 4 and not run.failures
    finally:
        script.release.set()  # the held calls now finish: their samples must not be stored
    for thread in [t for t in threading.enumerate() if t.name.startswith("eval-aime25")]:
        thread.join()
    assert len((tmp_path / "aime25.jsonl").read_text().splitlines()) == 2
    rerun = run_suite(AimeSuite(2025), client, tmp_path, data_dir=DATA, sampling=Sampling(n_samples=4, max_tokens=64),
                      concurrency=4, progress=None)  # fmt: skip
    assert rerun.complete and rerun.resumed == 2 and len(rerun.records) == 12 and rerun.scores["score"] == 1.0


def test_sigterm_without_a_served_checkpoint_writes_the_report_and_exits_143(stub_openai, tmp_path: Path):
    """SLURM's time limit, ``timeout``, ``docker stop``: a report at once, the calls in flight abandoned."""
    script = HoldAfter(3)
    out = tmp_path / "run"
    argv = ["--base-url", stub_openai(script).base_url, "--model", "m", "--suite", "aime25", "--out", str(out),
            "--data-dir", str(DATA), "--samples", "10", "--concurrency", "2", "--quiet"]  # fmt: skip
    code = f"import sys; from spade_envs.evaluation.cli import main; sys.exit(main({argv!r}))"
    proc = subprocess.Popen([sys.executable, "-c", code], cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)  # fmt: skip
    try:
        while script.seen < 5:  # 3 samples answered, then both workers held: nothing more can finish
            assert proc.poll() is None, proc.communicate()
            time.sleep(0.05)
        proc.send_signal(signal.SIGTERM)
        stdout, stderr = proc.communicate(timeout=60)
    finally:
        script.release.set()
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 143, stderr
    results = json.loads((out / "results.json").read_text())["suites"]["aime25"]
    assert (
        results["samples"] == 3 and results["abandoned_in_flight"] == 2 and results["interrupted"] == "SystemExit(143)"
    )
    assert "2 abandoned in flight" in stdout and "interrupted" in stderr
    assert len((out / "aime25.jsonl").read_text().splitlines()) == 3


def test_a_reasoning_gym_scorer_that_runs_away_is_killed_and_counted_wrong(stub_openai, tmp_path):
    """simple_integration's scorer expands ``10**10**10`` for minutes; the episode scores 0 and says why."""
    suite = ReasoningGymSuite("rg_math", tasks=["simple_integration"], turns=1)
    suite.score_timeout_s = 2.0
    entry = suite.instance(suite.load(None)[0], 0, 1)[1]
    assert suite.score("simple_integration", str(entry["answer"]), entry) == (1.0, False)
    client = ChatClient(stub_openai(lambda body: {"content": r"\boxed{10**10**10}"}).base_url, "m", max_retries=0)
    run = run_suite(suite, client, tmp_path, sampling=Sampling(n_samples=1, max_tokens=64), progress=None)
    (record,) = run.records
    assert run.complete and record.score == 0.0 and record.detail["scorer_timeout"] == 1


def test_the_shared_pool_size_is_configurable(monkeypatch):
    from spade_envs.evaluation import scorer_pool

    monkeypatch.setenv(scorer_pool.SIZE_VARIABLE, "3")
    assert scorer_pool._shared_size() == 3
    monkeypatch.setenv(scorer_pool.SIZE_VARIABLE, "0")
    with pytest.raises(ValueError, match="SPADE_EVAL_SCORER_PROCESSES must be a positive integer"):
        scorer_pool._shared_size()
