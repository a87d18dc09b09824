"""Judge a candidate program on test cases the way LiveCodeBench's grader does, inside the project sandbox.

The sandbox worker only loads environment classes, so the judge *is* one: :data:`RUNNER_SOURCE` defines
``ProgramTestEnv``. Its first step loads the program, later steps run one test each, so state is shared between
tests exactly as in LiveCodeBench (one ``Solution()`` instance; module-level imports run once). LiveCodeBench's
rules, restated:

- every program runs after a preamble that star-imports the common stdlib modules (``inf``, ``Counter``, ``cache``,
  ``gcd``, ``heapq``, ``bisect`` ... need no import) and sets the recursion limit to 50000;
- destructive functions are disabled first (``quit``, ``os.kill``, ``os.remove``, ``subprocess.Popen`` ... are
  ``None``), so a program that calls them fails;
- LeetCode-style problems: ``Solution().<fn>`` (or a module-level function) called with one JSON value per input
  line; the result (a tuple counts as a list) must ``==`` the expected JSON value, which a list of numpy integers
  does;
- stdin problems: a trailing ``if __name__ == '__main__':`` block is inlined, imports stay at module level and the
  rest becomes one function called per test, with ``sys.stdin`` a text buffer of the input (no ``.buffer``), the
  real stdin's ``read``/``readline``/``readlines`` answering from the input, ``sys.stdout`` captured as text (no
  ``.buffer``) and ``SystemExit`` ignored. So ``sys.stdout.buffer.write`` and a module-level ``global`` statement
  fail there and here; output lines are compared after stripping, or token by token as decimals.

Each step has the worker's alarm (``soft_timeout_s``, 6 s as in LiveCodeBench); the host deadline kills a program
that blocks it. Differences from LiveCodeBench are listed in ``docs/evaluation.md``.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation

from spade_envs.sandbox import RemoteEnv, SandboxConfig, SandboxError, WorkerPool

__all__ = [
    "CODE_SANDBOX",
    "JUDGE_START_ATTEMPTS",
    "PREAMBLE",
    "RUNNER_SOURCE",
    "ProgramTest",
    "outputs_match",
    "run_program",
]

#: Limits for judging programs: 6 s per test (LiveCodeBench's), 2 GiB, large inputs and outputs, and a whole
#: program's tests may take up to an hour of wall time (LiveCodeBench limits only each test). A worker may take up to
#: 60 s to start (it preloads numpy): on a loaded machine 20 s was seen to fail a whole sample for the machine.
CODE_SANDBOX = SandboxConfig(
    call_timeout_s=12.0, soft_timeout_s=6.0, memory_mb=2048, episode_cpu_s=1800, episode_wall_s=3600.0,
    start_timeout_s=60.0,
    max_request_bytes=256 << 20, max_response_bytes=256 << 20, max_observation_chars=128 << 20,
    max_episode_reply_bytes=1 << 31, pool_size=2, preload_numpy=True,
)  # fmt: skip

#: Starting the judge runs only our own code, so a failure there (a worker slow to start on a loaded machine, a spawn
#: that failed) is the machine's fault, not the program's: it is tried this many times before the sample fails (a
#: failed sample is not scored; the next run of the suite retries it).
JUDGE_START_ATTEMPTS = 3

log = logging.getLogger(__name__)

_STAR = ("string", "re", "datetime", "collections", "heapq", "bisect", "copy", "math", "random", "statistics",
         "itertools", "functools", "operator", "io", "sys", "json", "builtins", "typing")  # fmt: skip
#: What LiveCodeBench runs before every program: star imports (builtins last), plain imports, a deep recursion limit.
PREAMBLE = (
    "".join(f"from {m} import *\n" for m in _STAR)
    + "".join(f"import {m}\n" for m in _STAR if m not in ("builtins", "typing"))
    + "sys.setrecursionlimit(50000)\n"
)

RUNNER_SOURCE = (
    f"PREAMBLE = {PREAMBLE!r}\n"
    + r'''
import ast
import builtins
import io
import json
import os
import shutil
import subprocess
import sys

try:
    import numpy  # noqa: F401  (LiveCodeBench's grader has it imported before the guard; importing it needs os.*)
except ImportError:
    pass
sys.set_int_max_str_digits(50000)  # as LiveCodeBench's metrics module sets it

_DISABLED = [(builtins, "quit"), (builtins, "help"), (subprocess, "Popen"), (shutil, "rmtree"), (shutil, "move"),
             (shutil, "chown")] + [(os, name) for name in (
    "kill", "system", "putenv", "remove", "removedirs", "rmdir", "fchdir", "setuid", "fork", "forkpty", "killpg",
    "rename", "renames", "truncate", "replace", "unlink", "fchmod", "fchown", "chmod", "chown", "chroot", "lchflags",
    "lchmod", "lchown", "getcwd", "chdir")]
_BLOCKED_MODULES = ("ipdb", "joblib", "resource", "psutil", "tkinter")
_MISSING = object()


class _Guard:
    """Disable what LiveCodeBench disables for the length of one step, then put it back for the worker."""

    def __enter__(self):
        self.saved = [(obj, name, getattr(obj, name, _MISSING)) for obj, name in _DISABLED]
        self.modules = {name: sys.modules.get(name, _MISSING) for name in _BLOCKED_MODULES}
        for obj, name, _ in self.saved:
            setattr(obj, name, None)
        for name in _BLOCKED_MODULES:
            sys.modules[name] = None
        self.recursion = sys.getrecursionlimit()
        return self

    def __exit__(self, *exc):
        for obj, name, value in self.saved:
            if value is _MISSING:
                delattr(obj, name)
            else:
                setattr(obj, name, value)
        for name, module in self.modules.items():
            if module is _MISSING:
                sys.modules.pop(name, None)
            else:
                sys.modules[name] = module
        return False


def _inline_main_guard(tree):
    last = tree.body[-1] if tree.body else None
    if isinstance(last, ast.If) and ast.unparse(last.test).strip() == "__name__ == '__main__'":
        tree.body[-1:] = last.body
    return tree


def _as_function(program):
    """Imports at module level, everything else inside ``wrapped_function`` (program text if it does not parse)."""
    try:
        tree = _inline_main_guard(ast.parse(program))
        imports = [s for s in tree.body if isinstance(s, (ast.Import, ast.ImportFrom))]
        rest = [s for s in tree.body if not isinstance(s, (ast.Import, ast.ImportFrom))]
        function = ast.FunctionDef(name="wrapped_function", args=ast.arguments(posonlyargs=[], args=[], kwonlyargs=[],
                                   kw_defaults=[], defaults=[]), body=rest or [ast.Pass()], decorator_list=[],
                                   returns=None, type_comment=None, lineno=1)
        return PREAMBLE + "\n" + ast.unparse(ast.Module(body=imports, type_ignores=[])) + "\n" + ast.unparse(
            ast.fix_missing_locations(ast.Module(body=[function], type_ignores=[])))
    except Exception:
        return program


class _Input:
    """The stdin patches for one test: a text buffer as sys.stdin, and the real stdin's readers answering too."""

    def __init__(self, text):
        self.text = text
        lines = iter(text.split("\n"))
        self.readers = {"read": lambda *a: text, "readline": lambda *a: next(lines),
                        "readlines": lambda *a: text.split("\n")}

    def __enter__(self):
        self.real = sys.stdin
        self.saved_open = builtins.open
        for name, reader in self.readers.items():
            setattr(self.real, name, reader)
        builtins.open = lambda *a, **k: io.StringIO(self.text)
        sys.stdin = io.StringIO(self.text)
        return self

    def __exit__(self, *exc):
        sys.stdin, builtins.open = self.real, self.saved_open
        for name in self.readers:
            try:
                delattr(self.real, name)
            except AttributeError:
                pass
        return False


class ProgramTestEnv:
    """Step 1: {"program", "fn_name"} loads the program; then {"input", "output"} runs one test -> JSON report."""

    max_turns = 1_000_000

    def reset(self, seed=None):
        self.target = None
        return "ready", {}

    def solution(self):
        return []

    def step(self, action):
        request = json.loads(action)
        try:
            with _Guard():
                report = self._load(request) if "program" in request else self._test(request)
        except Exception as exc:  # the report says why (the worker's alarm is not an Exception: it ends the step)
            report = {"status": "error", "error": f"{type(exc).__name__}: {exc}"[:2000]}
        return json.dumps(report), 0.0, False, False, {}

    def _load(self, request):
        self.fn_name = request.get("fn_name")
        namespace = {"__name__": "tmp_sol", "__builtins__": builtins}
        code = PREAMBLE + "\n\n" + request["program"] if self.fn_name else _as_function(request["program"])
        saved = sys.stdout, sys.stderr
        sys.stdout = sys.stderr = io.StringIO()
        try:
            exec(compile(code, "<program>", "exec"), namespace)
        finally:
            sys.stdout, sys.stderr = saved
        if self.fn_name:
            holder = namespace["Solution"]() if "class Solution" in request["program"] else None
            self.target = getattr(holder, self.fn_name) if holder is not None else namespace[self.fn_name]
        else:
            self.target = namespace["wrapped_function"]
        return {"status": "ok"}

    def _test(self, request):
        if self.target is None:
            return {"status": "error", "error": "the program did not load"}
        if self.fn_name:
            args = [json.loads(line) for line in request["input"].split("\n") if line.strip()]
            expected = json.loads(request["output"])
            got = self.target(*args)
            if isinstance(got, tuple):
                got = list(got)
            passed = bool(got == expected)
            return {"status": "ok", "passed": passed, "output": repr(got)[:300]}
        out = io.StringIO()
        saved = sys.stdout, sys.stderr
        sys.stdout, sys.stderr = out, io.StringIO()
        try:
            with _Input(request["input"]):
                try:
                    self.target()
                except SystemExit:
                    pass
        finally:
            sys.stdout, sys.stderr = saved
        return {"status": "ok", "output": out.getvalue()}
'''
)


@dataclass(frozen=True)
class ProgramTest:
    """One test: stdin text and expected stdout, or (``fn_name`` set) one JSON argument per line and a JSON result."""

    input: str
    output: str


def _stripped_lines(text: str) -> list[str]:
    return [line.strip() for line in text.strip().split("\n")]


def outputs_match(got: str, expected: str) -> bool:
    """LiveCodeBench's stdout rule: as many stripped lines, each equal or equal token by token as decimals."""
    got_lines, want_lines = _stripped_lines(got), _stripped_lines(expected)
    if len(got_lines) != len(want_lines):
        return False
    for a, b in zip(got_lines, want_lines):
        if a == b:
            continue
        try:
            if [Decimal(x) for x in a.split()] != [Decimal(y) for y in b.split()]:
                return False
        except (InvalidOperation, ValueError):
            return False
    return True


def run_program(
    program: str, tests: list[ProgramTest], pool: WorkerPool, fn_name: str | None = None
) -> tuple[bool, str]:
    """Load ``program`` in one sandbox worker and run the tests in order, stopping at the first failure.

    Returns ``(all passed, a short reason)``. A timeout, crash or memory blow-up fails the test; none raises.
    """
    if not program.strip():
        return False, "no program"
    env = _start_judge(pool)
    try:
        requests = [json.dumps({"program": program, "fn_name": fn_name})]
        requests += [json.dumps({"input": t.input, "output": t.output}) for t in tests]
        for index, request in enumerate(requests):
            where = "load" if index == 0 else f"test {index - 1}"
            try:
                observation = env.step(request)[0]
            except SandboxError as exc:
                return False, f"{where}: {exc.kind}: {str(exc)[:200]}"
            report = json.loads(observation)
            if report["status"] != "ok":
                return False, f"{where}: {report['error'][:300]}"
            if index == 0:
                continue
            passed = report["passed"] if fn_name else outputs_match(report["output"], tests[index - 1].output)
            if not passed:
                return False, f"{where}: wrong output"
        return True, f"passed {len(tests)} tests"
    finally:
        env.close()


def _start_judge(pool: WorkerPool) -> RemoteEnv:
    """A judge worker ready for the program; raises the last ``SandboxError`` after :data:`JUDGE_START_ATTEMPTS`."""
    for attempt in range(1, JUDGE_START_ATTEMPTS + 1):
        env = None
        try:
            env = RemoteEnv(RUNNER_SOURCE, pool)
            env.reset(0)
            return env
        except SandboxError as exc:
            if env is not None:
                env.close()
            if attempt == JUDGE_START_ATTEMPTS:
                raise
            log.warning("the code judge did not start (attempt %d of %d, retrying): %s: %s", attempt,
                        JUDGE_START_ATTEMPTS, exc.code, exc)  # fmt: skip
    raise AssertionError("unreachable")
