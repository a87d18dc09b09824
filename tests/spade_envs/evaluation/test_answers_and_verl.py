"""Answer extraction, the sandboxed program runner, and the verl validation rows + reward function."""

from __future__ import annotations

import pyarrow.parquet as pq
import pytest
from eval_oracle import DATA

from spade_envs.evaluation.answers import choice_letter, last_boxed, math_equal
from spade_envs.evaluation.code_runner import CODE_SANDBOX, ProgramTest, outputs_match, run_program
from spade_envs.evaluation.suites.livecodebench import decode_tests
from spade_envs.evaluation.verl_data import compute_score, val_rows, write_val_parquet
from spade_envs.sandbox import WorkerPool


def test_math_equal_uses_math_verify():
    assert math_equal(r"so $\boxed{\frac{1}{2}}$", "0.5")[0]
    assert math_equal(r"\boxed{204}", "204") == (True, "204")
    assert not math_equal(r"\boxed{205}", "204")[0]
    assert not math_equal("no answer here", "204")[0]
    assert last_boxed(r"\boxed{a} then \boxed{f(x)={1,2}}") == "f(x)={1,2}"


def test_choice_letter_reads_only_the_offered_letters():
    assert choice_letter(r"\boxed{D}") == "D"
    assert choice_letter("Answer: E") == ""
    assert choice_letter("Answer: E", "ABCDE") == "E"


def test_outputs_match_follows_livecodebench():
    assert outputs_match("1 2\n3  \n\n", "1 2\n3")
    assert outputs_match("1.50", "1.5")
    assert not outputs_match("1 2", "1 3") and not outputs_match("1", "1\n2")


def test_decode_tests_refuses_pickled_globals():
    import base64
    import pickle
    import zlib

    evil = base64.b64encode(zlib.compress(pickle.dumps(print))).decode()
    with pytest.raises(pickle.UnpicklingError, match="refusing to load global"):
        decode_tests(evil)


def test_programs_run_in_the_sandbox_with_limits():
    tests = [ProgramTest("3 4\n", "7\n")]
    config = CODE_SANDBOX.from_dict({**CODE_SANDBOX.to_dict(), "soft_timeout_s": 1.0, "call_timeout_s": 3.0})
    with WorkerPool(config) as pool:
        assert run_program("import sys\na, b = map(int, sys.stdin.read().split())\nprint(a + b)", tests, pool)[0]
        timed_out = (False, "test 0: env_timeout: step: step exceeded 1.0 s")
        assert run_program("while True:\n    pass", tests, pool) == timed_out
        passed, why = run_program("import socket\nsocket.create_connection(('127.0.0.1', 9))", tests, pool)
        assert not passed and "Error" in why
        assert run_program("raise SystemExit(0)", tests, pool) == (False, "test 0: wrong output")


def test_verl_rows_and_compute_score(tmp_path):
    rows = val_rows("aime25", DATA)
    assert rows[0]["reward_model"] == {"style": "rule", "ground_truth": "19"}
    assert rows[0]["prompt"][0]["role"] == "user" and rows[0]["data_source"] == "spade_eval/aime25"
    assert compute_score("spade_eval/aime25", r"\boxed{19}", "19") == 1.0
    assert compute_score("spade_eval/aime25", r"\boxed{18}", "19") == 0.0
    gpqa = val_rows("gpqa_diamond", DATA)[0]
    letter = gpqa["reward_model"]["ground_truth"]
    assert compute_score("spade_eval/gpqa_diamond", f"Answer: {letter}", letter) == 1.0
    assert write_val_parquet("aime26", DATA, tmp_path / "aime26.parquet") == 2
    assert pq.read_table(tmp_path / "aime26.parquet").to_pylist()[1]["reward_model"]["ground_truth"] == "24"
    with pytest.raises(ValueError, match="does not know data_source 'x'"):
        compute_score("x", "", "")
