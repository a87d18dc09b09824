"""Every suite against a stub OpenAI server: oracle answers score 1, corrupted answers 0 (real scorers)."""

from __future__ import annotations

from pathlib import Path

import pytest
from eval_oracle import ACEBENCH, BFCL_IDS, BFCL_LIVE_IDS, BFCL_NON_LIVE_IDS, DATA, Oracle, rg_suites

from spade_envs.envs.llm import ChatClient
from spade_envs.evaluation import MissingEvalData, Sampling, run_suite
from spade_envs.evaluation.suites.acebench import AceBenchAgentSuite
from spade_envs.evaluation.suites.bfcl import BfclMultiTurnSuite
from spade_envs.evaluation.suites.bfcl_single import BfclLiveSuite, BfclNonLiveSuite
from spade_envs.evaluation.suites.livecodebench import LiveCodeBenchSuite
from spade_envs.evaluation.suites.math import AimeSuite, GpqaDiamondSuite


@pytest.fixture(scope="module")
def oracles() -> dict[bool, Oracle]:
    return {False: Oracle(rg_samples=2), True: Oracle(corrupt=True, rg_samples=2)}


def _run(stub_openai, oracle, suite, tmp_path: Path, n: int = 2):
    server = stub_openai(oracle)
    client = ChatClient(server.base_url, "m", max_retries=0)
    sampling = Sampling(n_samples=n, temperature=0.0, top_p=1.0, max_tokens=64)
    return run_suite(suite, client, tmp_path, data_dir=DATA, sampling=sampling, concurrency=4, progress=None)


def _suites():
    return [AimeSuite(2025), AimeSuite(2026), GpqaDiamondSuite(), LiveCodeBenchSuite(), BfclMultiTurnSuite(BFCL_IDS),
            BfclNonLiveSuite(BFCL_NON_LIVE_IDS), BfclLiveSuite(BFCL_LIVE_IDS), AceBenchAgentSuite(ACEBENCH),
            *rg_suites().values()]  # fmt: skip


@pytest.mark.parametrize("corrupt", [False, True], ids=["oracle", "corrupted"])
@pytest.mark.parametrize("suite", _suites(), ids=lambda s: s.name)
def test_oracle_scores_one_and_corrupted_zero(stub_openai, oracles, suite, corrupt, tmp_path):
    run = _run(stub_openai, oracles[corrupt], suite, tmp_path)
    assert run.complete and not run.failures
    assert [r.score for r in run.records] == [0.0 if corrupt else 1.0] * len(run.records)
    assert run.scores["score"] == (0.0 if corrupt else 1.0)


def test_gpqa_shuffles_options_per_sample_but_reproducibly():
    suite = GpqaDiamondSuite()
    item = suite.load(DATA)[0]
    orders = [suite.shuffled(item, k)[0] for k in range(8)]
    assert len({tuple(o) for o in orders}) > 1
    assert orders == [GpqaDiamondSuite().shuffled(item, k)[0] for k in range(8)]


def test_bfcl_reports_the_unweighted_mean_of_categories(stub_openai, oracles, tmp_path):
    run = _run(stub_openai, oracles[False], BfclMultiTurnSuite(BFCL_IDS), tmp_path, n=1)
    assert set(run.scores) == {"score", "multi_turn_base", "multi_turn_miss_func", "multi_turn_miss_param",
                               "multi_turn_long_context"}  # fmt: skip


def test_missing_data_file_names_the_file_and_where_to_get_it(tmp_path):
    with pytest.raises(MissingEvalData, match=r"aime26\.jsonl .*MathArena/aime_2026"):
        AimeSuite(2026).load(tmp_path)
    with pytest.raises(MissingEvalData, match=r"gpqa_diamond\.jsonl .*Idavidrein/gpqa"):
        GpqaDiamondSuite().load(None)


@pytest.mark.parametrize(("reply", "won"), [
    ("Simulating the board: generation 1, generation 2, ... it looks like it will", False),  # cut off: no box
    ("<think>It halts, so \\boxed{True}? Let me check again.</think>\nThe board keeps", False),  # box in the draft
    ("\\boxed{False", False),  # an unclosed box is no answer
    ("It halts.\n\\boxed{False}", True),  # any boxed answer wins: the task's own scorer quirk, kept
])  # fmt: skip
def test_reasoning_gym_without_a_complete_visible_box_has_no_answer_and_scores_zero(stub_openai, tmp_path, reply, won):
    from spade_envs.evaluation.suites.reasoning_gym import ReasoningGymSuite

    suite = ReasoningGymSuite("rg_algorithmic", tasks=["game_of_life_halting"], turns=1)
    run = _run(stub_openai, lambda body: {"content": reply}, suite, tmp_path, n=1)
    (record,) = run.records
    assert record.score == float(won) and record.pred == ("False" if won else "")
