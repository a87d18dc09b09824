"""Host-side parsing from several threads (the recipe validates designs in executor threads).

CPython 3.11 raised ``SystemError: AST constructor recursion depth mismatch`` on valid code when a finalizer switched
threads inside one parse and the other thread parsed too: a soak run charged a good design as ``crashed``.
"""

from __future__ import annotations

import ast
import io
import sys
import threading
import tokenize
from pathlib import Path

import pytest

from spade_envs.builtin import builtin_source
from spade_envs.envs.ast_parse import parse_source

ROOT = Path(__file__).resolve().parents[2]


class _Cycle:
    """A cyclic object with a finalizer: the collector runs Python code, and may switch threads, mid-parse."""

    def __init__(self) -> None:
        self.me = self

    def __del__(self) -> None:
        [0] * 8  # noqa: B018  (Python code run by the collector)


def _parse_in_threads(parse, source: str, threads: int = 3, parses: int = 30) -> list[str]:
    """Parse ``source`` ``parses`` times in each of ``threads`` threads while another thread churns cycles."""
    expected = ast.dump(ast.parse(source))
    problems: list[str] = []
    done = threading.Event()

    def parser() -> None:
        for _ in range(parses):
            try:
                tree = parse(source)
            except SystemError as exc:
                problems.append(f"SystemError: {exc}")
                continue
            if ast.dump(tree) != expected:
                problems.append("a different tree")

    def churn() -> None:
        while not done.is_set():
            for _ in range(500):
                _Cycle()

    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    try:
        workers = [threading.Thread(target=parser) for _ in range(threads)]
        churner = threading.Thread(target=churn)
        churner.start()
        for worker in workers:
            worker.start()
        for worker in workers:
            worker.join()
        done.set()
        churner.join()
    finally:
        sys.setswitchinterval(interval)
    return problems


def test_parses_from_several_threads_under_collector_churn_all_succeed():
    assert _parse_in_threads(parse_source, builtin_source("VaultCodeEnv")) == []


@pytest.mark.skipif(sys.version_info >= (3, 12), reason="the race is CPython 3.11's")
def test_the_harness_does_catch_the_race_in_a_plain_parse():
    """Without this the test above could pass for want of a race; a few rounds of plain parses must hit it."""
    source = builtin_source("VaultCodeEnv")
    assert any(_parse_in_threads(ast.parse, source) for _ in range(8))


def test_parse_source_keeps_ast_parse_errors_and_modes():
    assert isinstance(parse_source("1 + 2", mode="eval"), ast.Expression)
    try:
        parse_source("class Broken(:\n    pass\n", "<design>")
    except SyntaxError as exc:
        assert exc.filename == "<design>"
    else:
        raise AssertionError("no SyntaxError")


def _raw_parse_calls(path: Path) -> list[int]:
    """Lines of ``path`` that call ``ast.parse`` in code (not inside a string: sandboxed runner sources may)."""
    tokens = [t for t in tokenize.generate_tokens(io.StringIO(path.read_text(encoding="utf-8")).readline)
              if t.type in (tokenize.NAME, tokenize.OP)]  # fmt: skip
    return [a.start[0] for a, b, c in zip(tokens, tokens[1:], tokens[2:], strict=False)
            if (a.string, b.string, c.string) == ("ast", ".", "parse")]  # fmt: skip


def test_host_code_parses_only_through_parse_source():
    found = {}
    for package in ("spade_envs", "recipe"):
        for path in (ROOT / package).rglob("*.py"):
            if path.name != "ast_parse.py" and (lines := _raw_parse_calls(path)):
                found[str(path.relative_to(ROOT))] = lines
    assert found == {}
