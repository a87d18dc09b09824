"""Run a candidate program against test cases inside the project sandbox (no network, time and memory limits).

The sandbox worker only loads environment classes, so the runner *is* one: :data:`RUNNER_SOURCE` defines
``ProgramTestEnv``, whose ``step(action)`` takes one JSON request (program, test input, optional function name),
runs the program in a fresh namespace with stdin/stdout redirected, and returns a JSON report as its observation.
The worker's in-process alarm bounds each test (``soft_timeout_s``); the host deadline kills a program that
blocks the alarm. The sandbox files are untouched: this module only adds a new kind of "environment".
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from typing import Any

from spade_envs.sandbox import RemoteEnv, SandboxConfig, SandboxError, WorkerPool

__all__ = ["CODE_SANDBOX", "RUNNER_SOURCE", "ProgramTest", "outputs_match", "run_program"]

#: Limits for judging programs: a 6 s alarm per test (LiveCodeBench's), 2 GiB, large inputs and outputs.
CODE_SANDBOX = SandboxConfig(
    call_timeout_s=12.0, soft_timeout_s=6.0, memory_mb=2048, episode_cpu_s=900, max_request_bytes=256 << 20,
    max_response_bytes=256 << 20, max_observation_chars=128 << 20, pool_size=2, preload_numpy=False,
)  # fmt: skip

RUNNER_SOURCE = r'''
import builtins
import io
import json
import sys


class ProgramTestEnv:
    """Runs one test of a program per step: {"program", "input", "fn_name"} -> {"status", "output", "error"}."""

    max_turns = 1_000_000

    def reset(self, seed=None):
        return "ready", {}

    def solution(self):
        return []

    def step(self, action):
        request = json.loads(action)
        stdin = io.TextIOWrapper(io.BytesIO(request["input"].encode()), encoding="utf-8")
        raw_out = io.BytesIO()
        stdout = io.TextIOWrapper(raw_out, encoding="utf-8", write_through=True)
        saved = sys.stdin, sys.stdout, sys.stderr
        sys.stdin, sys.stdout, sys.stderr = stdin, stdout, io.StringIO()
        report = {"status": "ok", "output": "", "error": ""}
        try:
            namespace = {"__name__": "__main__" if not request.get("fn_name") else "solution", "__builtins__": builtins}
            exec(compile(request["program"], "<program>", "exec"), namespace)
            if request.get("fn_name"):
                args = [json.loads(line) for line in request["input"].split("\n") if line.strip()]
                target = namespace["Solution"]() if "Solution" in namespace else None
                function = getattr(target, request["fn_name"]) if target is not None else namespace[request["fn_name"]]
                report["output"] = json.dumps(function(*args))
        except SystemExit:
            pass
        except Exception as exc:
            report = {"status": "error", "output": "", "error": f"{type(exc).__name__}: {exc}"[:2000]}
        finally:
            sys.stdin, sys.stdout, sys.stderr = saved
        if not request.get("fn_name") and report["status"] == "ok":
            stdout.flush()
            report["output"] = raw_out.getvalue().decode("utf-8", "replace")
        return json.dumps(report), 0.0, False, False, {}
'''


@dataclass(frozen=True)
class ProgramTest:
    """One test: stdin text and expected stdout, or (``fn_name`` set) one JSON argument per line and a JSON result."""

    input: str
    output: str


def outputs_match(got: str, expected: str) -> bool:
    """LiveCodeBench's stdout rule: equal stripped lines, or, line by line, tokens equal as decimals."""
    got_lines = [line.strip() for line in got.strip().splitlines()]
    want_lines = [line.strip() for line in expected.strip().splitlines()]
    if got_lines == want_lines:
        return True
    if len(got_lines) != len(want_lines):
        return False
    for a, b in zip(got_lines, want_lines):
        if a == b:
            continue
        ta, tb = a.split(), b.split()
        if len(ta) != len(tb):
            return False
        try:
            if any(Decimal(x) != Decimal(y) for x, y in zip(ta, tb)):
                return False
        except InvalidOperation:
            return False
    return True


def _functional_match(got: str, expected: str) -> bool:
    try:
        value: Any = json.loads(got)
        want: Any = json.loads(expected)
    except json.JSONDecodeError:
        return False
    return value == want or (isinstance(value, tuple | list) and list(value) == want)


def run_program(
    program: str, tests: list[ProgramTest], pool: WorkerPool, fn_name: str | None = None
) -> tuple[bool, str]:
    """Run ``program`` on every test in one sandbox worker, stopping at the first failure.

    Returns ``(all passed, a short reason)``. A timeout, crash or memory blow-up fails the test; none raises.
    """
    if not program.strip():
        return False, "no program"
    env = RemoteEnv(RUNNER_SOURCE, pool, filename="<program-runner>")
    try:
        env.reset(0)
        for index, test in enumerate(tests):
            request = json.dumps({"program": program, "input": test.input, "fn_name": fn_name})
            try:
                observation = env.step(request)[0]
            except SandboxError as exc:
                return False, f"test {index}: {exc.kind}: {str(exc)[:200]}"
            report = json.loads(observation)
            if report["status"] != "ok":
                return False, f"test {index}: {report['error'][:300]}"
            match = _functional_match if fn_name else outputs_match
            if not match(report["output"], test.output):
                return False, f"test {index}: wrong output"
        return True, f"passed {len(tests)} tests"
    finally:
        env.close()
