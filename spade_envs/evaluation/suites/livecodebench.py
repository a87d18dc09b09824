"""LiveCodeBench v6, pass@1: generated Python programs run in the project sandbox against the hidden tests.

The protocol is the reference harness's: LiveCodeBench's cumulative ``release_v6`` (every problem of
``test.jsonl`` to ``test6.jsonl``), one sample at T 0.2, top-p 0.95, 16,384 tokens.

Reads the user's copy of ``livecodebench/code_generation_lite`` rows (``question_content``, ``starter_code``,
``public_test_cases``, ``private_test_cases``, ``metadata`` with ``func_name`` for LeetCode-style problems). The
private tests of the public copy are base64 + zlib + pickle of a JSON string; they are unpickled with every
global refused, so a crafted file cannot run code here.
"""

from __future__ import annotations

import base64
import io
import json
import pickle
import threading
import zlib
from pathlib import Path
from typing import Any

from spade_envs.envs.llm import ChatClient
from spade_envs.evaluation.answers import extract_code
from spade_envs.evaluation.code_runner import CODE_SANDBOX, ProgramTest, run_program
from spade_envs.evaluation.records import Item, SampleRecord, Sampling
from spade_envs.evaluation.suite import Suite
from spade_envs.evaluation.suites.files import find_data_file, pick, read_rows
from spade_envs.sandbox import SandboxConfig, WorkerPool

__all__ = ["LiveCodeBenchSuite", "decode_tests", "lcb_prompt"]

SYSTEM = (
    "You are an expert Python programmer. Given a programming problem, write a correct and efficient Python 3 "
    "program that passes all of its tests."
)


class _NoGlobals(pickle.Unpickler):
    def find_class(self, module: str, name: str) -> Any:
        raise pickle.UnpicklingError(f"refusing to load global {module}.{name} from a test file")


def decode_tests(value: Any) -> list[dict[str, Any]]:
    """Test cases from a list, a JSON string, or LiveCodeBench's base64(zlib(pickle(json))) string."""
    if isinstance(value, list):
        return value
    if not isinstance(value, str) or not value.strip():
        return []
    try:
        return json.loads(value)
    except json.JSONDecodeError:
        inner = _NoGlobals(io.BytesIO(zlib.decompress(base64.b64decode(value)))).load()
        return json.loads(inner) if isinstance(inner, str) else inner


def lcb_prompt(question: str, starter_code: str) -> str:
    """The user turn: the problem, then either the starter code to complete or the stdin/stdout instruction."""
    if starter_code.strip():
        form = (
            "Complete the following starter code; return the whole solution in one ```python code block.\n"
            f"```python\n{starter_code}\n```"
        )
    else:
        form = (
            "Read the input from standard input and write the answer to standard output. Return the whole program "
            "in one ```python code block."
        )
    return f"### Problem\n{question.strip()}\n\n### Format\n{form}"


class LiveCodeBenchSuite(Suite):
    """LiveCodeBench code generation, one sample at T 0.2; a sample passes when every test passes."""

    name = "livecodebench_v6"
    metric = "pass@1"
    #: The reference harness's protocol (``spade-rl/spade`` ``eval_offline/configs/games.yaml``).
    default_sampling = Sampling(n_samples=1, temperature=0.2, top_p=0.95, max_tokens=16384)
    where = (
        "the Hugging Face dataset livecodebench/code_generation_lite, release_v6 as LiveCodeBench's loader reads it: "
        "test.jsonl, test2.jsonl, ..., test6.jsonl concatenated into one JSONL file (test6.jsonl alone holds only "
        "the v6 additions)"
    )

    def __init__(self, sandbox: SandboxConfig = CODE_SANDBOX) -> None:
        super().__init__()
        self.sandbox = sandbox
        self._pool: WorkerPool | None = None
        self._lock = threading.Lock()

    def load(self, data_dir: Path | None) -> list[Item]:
        path = find_data_file(data_dir, self.name, self.name, self.where)
        self.data_files = [path]
        items = []
        for i, row in enumerate(read_rows(path)):
            question = str(pick(row, ("question_content", "question"), path, i))
            starter = str(row.get("starter_code") or "")
            meta = row.get("metadata") or {}
            meta = json.loads(meta) if isinstance(meta, str) and meta.strip() else meta or {}
            tests = decode_tests(row.get("public_test_cases")) + decode_tests(row.get("private_test_cases"))
            if not tests:
                raise ValueError(f"{path}: row {i} has no public_test_cases or private_test_cases")
            functional = any(t.get("testtype") == "functional" for t in tests)
            ident = str(row.get("question_id") or i)
            items.append(Item(f"lcb-{ident}", lcb_prompt(question, starter),
                              [ProgramTest(str(t["input"]), str(t["output"])) for t in tests],
                              {"fn_name": meta.get("func_name") if functional else None,
                               "date": str(row.get("contest_date", ""))}))  # fmt: skip
        return items

    def pool(self) -> WorkerPool:
        """The sandbox pool, started on first use and shared by the suite's threads."""
        with self._lock:
            if self._pool is None:
                self._pool = WorkerPool(self.sandbox)
            return self._pool

    def run_sample(self, client: ChatClient, item: Item, sample: int, sampling: Sampling) -> SampleRecord:
        text = client.complete(
            [{"role": "system", "content": SYSTEM}, {"role": "user", "content": item.prompt}],
            temperature=sampling.temperature, top_p=sampling.top_p, max_tokens=sampling.max_tokens,
        ).text  # fmt: skip
        program = extract_code(text)
        passed, why = run_program(program, item.answer, self.pool(), item.meta.get("fn_name"))
        return self.record(item, sample, float(passed), program[:2000], text, reason=why)

    def close(self) -> None:
        """Shut the sandbox pool down."""
        with self._lock:
            if self._pool is not None:
                self._pool.shutdown()
                self._pool = None
