"""Case table: LiveCodeBench programs judged by our sandboxed grader and by LiveCodeBench's own grader.

The ``official`` column is what LiveCodeBench's ``run_test`` (nvidia-livecodebench 26.3, the same grader as
LiveCodeBench's repository) decided for each program when run in a child process with stdin on /dev/null, as its
metrics module runs it. Every verdict here must equal it.
"""

# ruff: noqa: E501  (a table of programs, one per row)
from __future__ import annotations

import pytest

from spade_envs.evaluation import code_runner
from spade_envs.evaluation.code_runner import CODE_SANDBOX, ProgramTest, outputs_match, run_program
from spade_envs.sandbox import RemoteEnv, SandboxUnavailable, WorkerPool

STDIN = ([ProgramTest("3 4\n", "7\n")], None)
FN = ([ProgramTest("[1,2,3]\n2", "[3,4,5]")], "addAll")
FN2 = ([ProgramTest("[1,2,3]\n2", "[3,4,5]")] * 2, "addAll")
CASES = [  # name, program, tests, official verdict
    ("stdin_plain", "a,b=map(int,input().split())\nprint(a+b)", STDIN, True),
    ("open0", "a,b=map(int,open(0).read().split())\nprint(a+b)", STDIN, False),
    (
        "sys_stdin_open0",
        "import sys\nsys.stdin=open(0)\na,b=map(int,sys.stdin.readline().split())\nprint(a+b)",
        STDIN,
        False,
    ),
    ("stdin_buffer", "import sys\na,b=map(int,sys.stdin.buffer.read().split())\nprint(a+b)", STDIN, False),
    (
        "threading_join",
        "import sys, threading\nsys.setrecursionlimit(10**6)\nthreading.stack_size(2**26)\ndef main():\n    a,b=map(int,input().split())\n    print(a+b)\nt=threading.Thread(target=main)\nt.start()\nt.join()",
        STDIN,
        True,
    ),
    ("os_write", "import os\na,b=map(int,input().split())\nos.write(1, (str(a+b)+'\\n').encode())", STDIN, False),
    (
        "List_no_import",
        "class Solution:\n    def addAll(self, nums: List[int], k: int) -> List[int]:\n        return [x+k for x in nums]",
        FN,
        True,
    ),
    (
        "List_import",
        "from typing import List\nclass Solution:\n    def addAll(self, nums: List[int], k: int) -> List[int]:\n        return [x+k for x in nums]",
        FN,
        True,
    ),
    (
        "inf_no_import",
        "class Solution:\n    def addAll(self, nums, k):\n        best = inf\n        return [x+k for x in nums]",
        FN,
        True,
    ),
    (
        "Counter_no_import",
        "class Solution:\n    def addAll(self, nums, k):\n        c = Counter(nums)\n        return [x+k for x in nums]",
        FN,
        True,
    ),
    (
        "lru_cache_no_import",
        "class Solution:\n    def addAll(self, nums, k):\n        @cache\n        def f(x): return x+k\n        return [f(x) for x in nums]",
        FN,
        True,
    ),
    (
        "deep_recursion_5000_fn",
        "class Solution:\n    def addAll(self, nums, k):\n        def d(n): return 0 if n==0 else 1+d(n-1)\n        d(5000)\n        return [x+k for x in nums]",
        FN,
        True,
    ),
    (
        "deep_recursion_5000_stdin",
        "def d(n): return 0 if n==0 else 1+d(n-1)\nd(5000)\na,b=map(int,input().split())\nprint(a+b)",
        STDIN,
        True,
    ),
    ("print_then_exit", "a,b=map(int,input().split())\nprint(a+b)\nexit()", STDIN, True),
    ("quit", "a,b=map(int,input().split())\nprint(a+b)\nquit()", STDIN, False),
    (
        "os_exit",
        "import os,sys\na,b=map(int,input().split())\nprint(a+b)\nsys.stdout.flush()\nos._exit(0)",
        STDIN,
        False,
    ),
    (
        "numpy_return",
        "import numpy as np\nclass Solution:\n    def addAll(self, nums, k):\n        return list(np.array(nums)+k)",
        FN,
        True,
    ),
    (
        "numpy_int_return",
        "import numpy as np\nclass Solution:\n    def addAll(self, nums, k):\n        return [int(x) for x in np.array(nums)+k]",
        FN,
        True,
    ),
    (
        "global_stmt",
        "cnt=0\ndef inc():\n    global cnt\n    cnt+=1\na,b=map(int,input().split())\ninc()\nprint(a+b+cnt-1)",
        STDIN,
        False,
    ),
    ("stdin_noimport", "a,b=map(int,input().split())\nprint(gcd(a*6,b*6)//6 + a + b - 1)", STDIN, True),
    (
        "main_guard",
        "def main():\n    a,b=map(int,input().split())\n    print(a+b)\nif __name__=='__main__':\n    main()",
        STDIN,
        True,
    ),
    (
        "stdout_buffer",
        "import sys\na,b=map(int,input().split())\nsys.stdout.buffer.write((str(a+b)+'\\n').encode())",
        STDIN,
        False,
    ),
    (
        "from_sys_stdin_readline",
        "from sys import stdin\na,b=map(int,stdin.readline().split())\nprint(a+b)",
        STDIN,
        True,
    ),
    (
        "sys_stdin_readline",
        "import sys\ninput=sys.stdin.readline\na,b=map(int,input().split())\nprint(a+b)",
        STDIN,
        True,
    ),
    (
        "from_sys_stdout_write",
        "from sys import stdout\na,b=map(int,input().split())\nstdout.write(str(a+b)+'\\n')",
        STDIN,
        False,
    ),
    ("stdin_read_split", "import sys\ndata=sys.stdin.read().split()\nprint(int(data[0])+int(data[1]))", STDIN, True),
    (
        "for_line_in_stdin",
        "import sys\nfor line in sys.stdin:\n    a,b=map(int,line.split())\n    print(a+b)",
        STDIN,
        True,
    ),
    ("big_int_print", "a,b=map(int,input().split())\nx=10**6000\nprint(a+b if x>0 else 0)", STDIN, True),
    ("big_int_str", "a,b=map(int,input().split())\ns=str(10**6000)\nprint(a+b+len(s)-6001)", STDIN, True),
    (
        "tuple_return",
        "class Solution:\n    def addAll(self, nums, k):\n        return tuple(x+k for x in nums)",
        FN,
        True,
    ),
    ("wrong_fn", "class Solution:\n    def addAll(self, nums, k):\n        return [x for x in nums]", FN, False),
    ("module_fn", "def addAll(nums, k):\n    return [x+k for x in nums]", FN, True),
    ("float_tokens", "a,b=map(int,input().split())\nprint(f'{a+b:.3f}')", STDIN, True),
    ("extra_blank_lines", "a,b=map(int,input().split())\nprint()\nprint(a+b)\nprint()", STDIN, True),
    (
        "numpy_array_return",
        "import numpy as np\nclass Solution:\n    def addAll(self, nums, k):\n        return np.array(nums)+k",
        FN,
        False,
    ),
    (
        "state_across_tests",
        "class Solution:\n    calls = 0\n    def addAll(self, nums, k):\n        Solution.calls += 1\n        return [x+k for x in nums]",
        FN2,
        True,
    ),
    ("syntax_error", "a,b=map(int,input().split(\nprint(a+b)", STDIN, False),
    ("os_getcwd", "import os\nos.getcwd()\na,b=map(int,input().split())\nprint(a+b)", STDIN, False),
    ("import_resource", "import resource\na,b=map(int,input().split())\nprint(a+b)", STDIN, False),
]


@pytest.fixture(scope="module")
def pool():
    with WorkerPool(CODE_SANDBOX) as workers:
        yield workers


@pytest.mark.parametrize(("name", "program", "tests", "official"), CASES, ids=[c[0] for c in CASES])
def test_verdict_equals_livecodebench(pool, name, program, tests, official):
    passed, why = run_program(program, tests[0], pool, tests[1])
    assert passed is official, why


OUTPUT_CASES = [  # got, expected, LiveCodeBench's verdict
    ("7\n", "7", True),
    ("\n7\n\n", "7\n", True),
    ("1.50 2", "1.5 2.0", True),
    ("1 2", "1 3", False),
    ("1", "1\n2", False),
    ("a  b", "a b", False),  # not numbers, not equal after stripping the line
    ("1e3", "1000", True),
    ("7\r\n8", "7\n8", True),
    ("7\r8", "7\n8", False),  # only \n separates lines
]


@pytest.mark.parametrize(("got", "expected", "verdict"), OUTPUT_CASES)
def test_output_comparison_follows_livecodebench(got, expected, verdict):
    assert outputs_match(got, expected) is verdict


class _JudgeStartFails:
    """The real judge, except that its first ``failures`` starts fail as an overloaded machine's do."""

    def __init__(self, failures: int) -> None:
        self.failures, self.starts = failures, 0

    def __call__(self, *args, **kwargs):
        self.starts += 1
        if self.starts <= self.failures:
            raise SandboxUnavailable("start did not answer in time", code="start_timeout")
        return RemoteEnv(*args, **kwargs)


def test_a_judge_that_fails_to_start_is_retried_not_charged_to_the_program(pool, monkeypatch):
    starts = _JudgeStartFails(code_runner.JUDGE_START_ATTEMPTS - 1)
    monkeypatch.setattr(code_runner, "RemoteEnv", starts)
    passed, why = run_program("a,b=map(int,input().split())\nprint(a+b)", [ProgramTest("1 2", "3")], pool)
    assert passed, why
    assert starts.starts == code_runner.JUDGE_START_ATTEMPTS


def test_a_judge_that_never_starts_fails_the_sample_with_the_machine_fault(pool, monkeypatch):
    starts = _JudgeStartFails(code_runner.JUDGE_START_ATTEMPTS)
    monkeypatch.setattr(code_runner, "RemoteEnv", starts)
    with pytest.raises(SandboxUnavailable, match="start did not answer"):
        run_program("print(3)", [ProgramTest("", "3")], pool)
    assert starts.starts == code_runner.JUDGE_START_ATTEMPTS
