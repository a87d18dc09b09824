"""A scripted model for the evaluation tests: oracle answers (score 1) or corrupted ones (score 0) for every suite."""

from __future__ import annotations

import ast
import functools
import importlib
import inspect
import json
import re
import time
from pathlib import Path
from typing import Any

from spade_envs.evaluation.suites.acebench import AceBenchAgentSuite
from spade_envs.evaluation.suites.bfcl import BfclMultiTurnSuite
from spade_envs.evaluation.suites.bfcl_single import BfclLiveSuite, BfclNonLiveSuite
from spade_envs.evaluation.suites.math import AimeSuite, GpqaDiamondSuite
from spade_envs.evaluation.suites.reasoning_gym import INSTRUCTION, ReasoningGymSuite

DATA = Path(__file__).resolve().parents[2] / "data" / "eval"
ACEBENCH = DATA / "acebench"  # a tiny stand-in for an ACEBench checkout, written for these tests
#: Per group: tasks whose generated entries carry a reference answer and whose scorer gives 0 to "wrong".
RG_TASKS = {
    "rg_math": ["basic_arithmetic", "gcd"],
    "rg_algorithmic": ["number_sorting", "word_sorting"],
    "rg_cognition": ["color_cube_rotation", "number_sequence"],
    "rg_logic": ["syllogism", "aiw"],
}
BFCL_IDS = ["multi_turn_base_0", "multi_turn_miss_func_3", "multi_turn_miss_param_5", "multi_turn_long_context_7"]
#: One real entry of every BFCL single-turn category.
BFCL_NON_LIVE_IDS = ["simple_python_0", "simple_java_0", "simple_javascript_0", "multiple_0", "parallel_0",
                     "parallel_multiple_0", "irrelevance_0"]  # fmt: skip
BFCL_LIVE_IDS = ["live_simple_0-0-0", "live_multiple_0-0-0", "live_parallel_0-0-0", "live_parallel_multiple_0-0-0",
                 "live_irrelevance_0-0-0", "live_relevance_0-0-0"]  # fmt: skip
LCB_PROGRAMS = {
    "Given two integers A and B": ("a, b = map(int, input().split())\nprint(a + b)", "print(0)"),
    "Given a list of words": (
        "class Solution:\n    def reverseWords(self, words):\n        return words[::-1]",
        "class Solution:\n    def reverseWords(self, words):\n        return words",
    ),
}


def _first_user(messages: list[dict[str, Any]]) -> str:
    return next(m["content"] for m in messages if m["role"] == "user")


def rg_suites(split: str = "paper") -> dict[str, ReasoningGymSuite]:
    return {group: ReasoningGymSuite(group, tasks=tasks, split=split) for group, tasks in RG_TASKS.items()}


def gold_calls(call_strings: list[str], involved_classes: list[str]) -> list[dict[str, Any]]:
    """BFCL gold call strings as tool calls; positional arguments named from the backend method signatures."""
    from bfcl_eval.constants.executable_backend_config import CLASS_FILE_PATH_MAPPING

    params: dict[str, list[str]] = {}
    for name in involved_classes:
        cls = getattr(importlib.import_module(CLASS_FILE_PATH_MAPPING[name]), name)
        for method, fn in inspect.getmembers(cls, inspect.isfunction):
            params[method] = [p for p in inspect.signature(fn).parameters if p != "self"]
    calls = []
    for text in call_strings:
        node = ast.parse(text, mode="eval").body
        args = {params[node.func.id][i]: ast.literal_eval(a) for i, a in enumerate(node.args)}
        args |= {k.arg: ast.literal_eval(k.value) for k in node.keywords}
        calls.append({"name": node.func.id, "arguments": args})
    return calls


def acebench_steps(milestones: list, corrupt: bool = False) -> list[list[dict[str, Any]]]:
    """The first milestone list as tool-call steps; ``corrupt`` changes the last string argument of the last call."""
    texts = milestones[0] if milestones and isinstance(milestones[0], list) else milestones
    steps = []
    for text in texts:
        node = ast.parse(text, mode="eval").body
        steps.append([{"name": c.func.id, "arguments": {k.arg: ast.literal_eval(k.value) for k in c.keywords}}
                      for c in node.elts])  # fmt: skip
    if corrupt:
        last = steps[-1][-1]["arguments"]
        last[[k for k, v in last.items() if isinstance(v, str)][-1]] = "WRONG"
    return steps


def _pick(options: list) -> Any:
    """The first acceptable value of a BFCL possible-answer list ("" marks an optional parameter left out)."""
    value = next(o for o in options if o != "")
    return {k: _pick(v) for k, v in value.items() if any(x != "" for x in v)} if isinstance(value, dict) else value


def bfcl_single_calls(item: Any, corrupt: bool = False) -> list[dict[str, Any]]:
    """Calls that BFCL's checker accepts for a single-turn entry; ``corrupt`` makes them wrong.

    Java and JavaScript arguments are literals in strings, as BFCL's hints ask. Corrupted: the first argument of the
    first call changes (AST categories), an irrelevance entry gets a call, a relevance entry none.
    """
    category = item.meta["category"]
    if "relevance" in category:
        wants_call = ("irrelevance" in category) == corrupt
        return [{"name": item.meta["entry"]["function"][0]["name"], "arguments": {}}] if wants_call else []
    as_text = category.endswith(("java", "javascript"))
    calls = []
    for call in item.answer:
        ((name, params),) = call.items()
        args = {k: _pick(v) for k, v in params.items() if any(x != "" for x in v)}
        if as_text:
            args = {k: (str(v).lower() if isinstance(v, bool) else str(v)) for k, v in args.items()}
        calls.append({"name": name, "arguments": args})
    if corrupt:
        first = calls[0]["arguments"]
        key = next(iter(first))
        value = first[key]
        first[key] = (not value if isinstance(value, bool) else value + 7 if isinstance(value, int | float)
                      else f"{value}_WRONG" if isinstance(value, str) else [*value, 999] if isinstance(value, list)
                      else {"wrong": 1})  # fmt: skip
    return calls


def _native(calls: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [
        {"id": f"c{i}", "type": "function", "function": {"name": c["name"], "arguments": json.dumps(c["arguments"])}}
        for i, c in enumerate(calls)
    ]


@functools.cache
def _knowledge(rg_samples: int) -> tuple[dict, list, dict, dict]:
    """Every fixture's prompt and answer, built once per session (generating them takes seconds)."""
    math = {}
    for suite in (AimeSuite(2025), AimeSuite(2026)):
        math |= {item.prompt: item.answer for item in suite.load(DATA)}
    gpqa = [item.answer for item in GpqaDiamondSuite().load(DATA)]
    rg = {}
    for suite in [*rg_suites("paper").values(), *rg_suites("modules").values()]:
        for item in suite.load(None):
            for k in range(rg_samples):
                entry = suite.instance(item, k, rg_samples)[1]
                rg[f"{entry['question']}\n\n{INSTRUCTION}"] = entry["answer"]
    bfcl = {_first_user(item.meta["entry"]["question"][0]): item for item in BfclMultiTurnSuite(BFCL_IDS).load(None)}
    for suite in (BfclNonLiveSuite(BFCL_NON_LIVE_IDS), BfclLiveSuite(BFCL_LIVE_IDS)):
        bfcl |= {_first_user(item.meta["entry"]["question"][0]): item for item in suite.load(None)}
    return math, gpqa, rg, bfcl


@functools.cache
def _acebench_items() -> dict:
    return {item.prompt: item for item in AceBenchAgentSuite(ACEBENCH).load(None)}


class Oracle:
    """Responder for ``stub_openai``: knows every fixture's answer; ``corrupt`` makes each answer wrong."""

    def __init__(self, corrupt: bool = False, delay: float = 0.0, rg_samples: int = 2) -> None:
        self.corrupt, self.delay = corrupt, delay
        self.math, self.gpqa, self.rg, self.bfcl = _knowledge(rg_samples)
        self.acebench = _acebench_items()

    def _acebench_item(self, text: str) -> Any:
        return next((item for question, item in self.acebench.items() if question in text), None)

    def __call__(self, body: dict[str, Any]) -> dict[str, Any]:
        time.sleep(self.delay)
        messages = body["messages"]
        if body.get("tools"):
            item = self._acebench_item(_first_user(messages))
            return self._bfcl(messages) if item is None else self._acebench_agent(item, messages)
        if messages[0]["role"] == "system" and self._acebench_item(messages[0]["content"]) is not None:
            return self._acebench_user(self._acebench_item(messages[0]["content"]), messages)
        first = next(m["content"] for m in body["messages"] if m["role"] == "user")
        if first in self.math:
            answer = int(self.math[first]) + 1 if self.corrupt else self.math[first]
            return {"content": f"Working it out... the answer is $\\boxed{{{answer}}}$."}
        if first in self.rg:
            return {"content": "Thinking. \\boxed{wrong}" if self.corrupt else f"\\boxed{{{self.rg[first]}}}"}
        for marker, (good, bad) in LCB_PROGRAMS.items():
            if marker in first:
                return {"content": f"Here it is.\n```python\n{bad if self.corrupt else good}\n```"}
        for correct in self.gpqa:
            hit = re.search(rf"^([A-D])\) {re.escape(correct)}$", first, re.M)
            if hit:
                letter = "ABCD"[("ABCD".index(hit.group(1)) + self.corrupt) % 4]
                return {"content": f"Reasoning.\nAnswer: {letter}"}
        raise AssertionError(f"the oracle does not know this prompt: {first[:200]!r}")

    def _bfcl(self, messages: list[dict[str, Any]]) -> dict[str, Any]:
        users = [m for m in messages if m["role"] == "user" and not m["content"].startswith("<tool_response>")]
        item = self.bfcl[_first_user(messages)]
        if "category" in item.meta and not item.meta["category"].startswith("multi_turn"):
            calls = bfcl_single_calls(item, self.corrupt)
            if not calls:
                return {"content": "None of these functions fits the request."}
            if sum(map(ord, item.id)) % 2:  # raw-text tool calls for some entries, native ones for the others
                return {"content": "".join(f"<tool_call>\n{json.dumps(c)}\n</tool_call>" for c in calls)}
            return {"content": "", "tool_calls": _native(calls)}
        last = messages[-1]
        if last["role"] == "tool" or last["content"].startswith("<tool_response>"):
            return {"content": "Done."}
        turn = len(users) - 1
        calls = gold_calls(item.answer[turn], item.meta["entry"]["involved_classes"])
        first_real_turn = next(i for i, gold in enumerate(item.answer) if gold)
        if self.corrupt and turn == first_real_turn:
            calls = []
        if turn % 2:  # alternate between raw-text tool calls and native ones
            return {"content": "".join(f"<tool_call>\n{json.dumps(c)}\n</tool_call>" for c in calls)}
        native = [
            {"id": f"c{i}", "type": "function", "function": {"name": c["name"], "arguments": json.dumps(args)}}
            for i, (c, args) in enumerate((c, c["arguments"]) for c in calls)
        ]
        return {"content": "", "tool_calls": native} if native else {"content": "Nothing to do."}

    def _acebench_agent(self, item: Any, messages: list[dict[str, Any]]) -> dict[str, Any]:
        """Play the gold steps one reply at a time (native and text calls alternating), then close."""
        steps = acebench_steps(item.answer["mile_stone"], self.corrupt)
        done = sum(m["role"] == "assistant" and bool(m.get("tool_calls") or "<tool_call>" in m["content"])
                   for m in messages)  # fmt: skip
        if done < len(steps):
            if done % 2:
                return {"content": "".join(f"<tool_call>{json.dumps(c)}</tool_call>" for c in steps[done])}
            return {"content": "", "tool_calls": _native(steps[done])}
        return {"content": "All done." if item.meta["kind"] == "multi_turn" else "Done. finish conversation"}

    def _acebench_user(self, item: Any, messages: list[dict[str, Any]]) -> dict[str, Any]:
        """The simulated user: states the instruction, then ends once the agent reports."""
        return {"content": f"Hi. {item.prompt}" if len(messages) == 2 else "Thanks! finish conversation"}
