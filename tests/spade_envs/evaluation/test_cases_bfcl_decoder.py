"""Case table: a BFCL reply's verdict, ours against BFCL's own Qwen FC decoder and ``ast_checker``, on the same text.

The reference is the installed bfcl-eval: ``QwenFCHandler._parse_query_response_prompting`` (keeps the text after
the last ``</think>``) and ``QwenFCHandler.decode_ast`` (``<tool_call>\\n...\\n</tool_call>`` blocks; unparseable
JSON skipped; any block that is not ``{"name", "arguments"}`` fails the whole reply), then the branching of
``eval_runner._evaluate_single_{ast,relevance}_entry`` with bfcl-eval's ``is_empty_output``,
``is_function_calling_format_output`` and ``ast_checker``. Only the handler's import-time dependencies (``overrides``,
the vLLM/OpenAI base handler, the tree-sitter utils), which ``decode_ast`` never uses, are stubbed, and only while it
is imported.
"""

from __future__ import annotations

import importlib
import json
import sys
import types

import pytest
from eval_oracle import bfcl_single_calls, gold_calls

from spade_envs.envs.llm import ChatResult
from spade_envs.evaluation import Sampling
from spade_envs.evaluation.scorer_pool import shared_pool
from spade_envs.evaluation.suites.bfcl import BfclMultiTurnSuite
from spade_envs.evaluation.suites.bfcl_single import BfclLiveSuite, BfclNonLiveSuite, check_entry

QWEN = "bfcl_eval.model_handler.local_inference.qwen_fc"
SAMPLING = Sampling(n_samples=1, temperature=0.0, top_p=1.0, max_tokens=4096)


@pytest.fixture(scope="module")
def qwen_handler():
    """BFCL's Qwen FC handler (its decoding methods only), imported with its unused import-time dependencies stubbed."""
    overrides = types.ModuleType("overrides")
    overrides.override = overrides.final = lambda fn: fn  # type: ignore[attr-defined]
    overrides.EnforceOverrides = object  # type: ignore[attr-defined]
    base = types.ModuleType("base_oss_handler")
    base.OSSHandler = object  # type: ignore[attr-defined]
    utils = types.ModuleType("utils")
    utils.convert_to_function_call = lambda calls: calls  # type: ignore[attr-defined]
    stubs = {"overrides": overrides, "bfcl_eval.model_handler.local_inference.base_oss_handler": base,
             "bfcl_eval.model_handler.utils": utils}  # fmt: skip
    with pytest.MonkeyPatch.context() as patch:
        for name, module in stubs.items():
            patch.setitem(sys.modules, name, module)
        handler_class = importlib.import_module(QWEN).QwenFCHandler
        sys.modules.pop(QWEN)
    return object.__new__(handler_class)


def official_verdict(handler, item, text: str) -> bool:
    from bfcl_eval.utils import is_empty_output, is_function_calling_format_output

    response = types.SimpleNamespace(choices=[types.SimpleNamespace(text=text)],
                                     usage=types.SimpleNamespace(prompt_tokens=0, completion_tokens=0))  # fmt: skip
    cleaned = handler._parse_query_response_prompting(response)["model_responses"]
    try:
        decoded = handler.decode_ast(cleaned, "python", False)
    except Exception:  # noqa: BLE001 (BFCL's evaluator: a reply that fails to decode)
        decoded = None
    category = item.meta["category"]
    if "relevance" in category:  # _evaluate_single_relevance_entry
        called = decoded is not None and not is_empty_output(decoded)
        return called != ("irrelevance" in category)
    if decoded is None or not is_function_calling_format_output(decoded):  # _evaluate_single_ast_entry
        return False
    verdict = shared_pool(("bfcl_eval",)).call(check_entry, category, item.meta["entry"]["function"], decoded,
                                               item.answer, timeout_s=60.0)  # fmt: skip
    return verdict["valid"]


class Text:
    """A client that always replies with one text (no server needed)."""

    def __init__(self, text: str) -> None:
        self.text = text

    def complete(self, messages, **_kw):
        return ChatResult(self.text, [], "stop")


def block(call, newlines: bool = True) -> str:
    body = json.dumps(call)
    return f"<tool_call>\n{body}\n</tool_call>" if newlines else f"<tool_call>{body}</tool_call>"


@pytest.fixture(scope="module")
def items():
    loaded = BfclNonLiveSuite(["simple_python_0", "parallel_0", "irrelevance_0"]).load(None)
    loaded += BfclLiveSuite(["live_relevance_0-0-0"]).load(None)
    return {item.id: item for item in loaded}


def _cases(items):
    simple, parallel, irrelevance, relevance = (items[k] for k in ("simple_python_0", "parallel_0", "irrelevance_0",
                                                                  "live_relevance_0-0-0"))  # fmt: skip
    right, wrong, both = bfcl_single_calls(simple), bfcl_single_calls(simple, corrupt=True), bfcl_single_calls(parallel)
    name, rname = irrelevance.meta["entry"]["function"][0]["name"], relevance.meta["entry"]["function"][0]["name"]
    draft = "<think>\nFirst idea:\n" + block(wrong[0]) + "\nNo, the base is different.\n</think>\n\n"
    return [  # (case, item, reply text, BFCL's verdict)
        ("simple: Qwen-template blocks", simple, "".join(map(block, right)), True),
        ("simple: a block without newlines", simple, "".join(block(c, False) for c in right), False),
        ("simple: a wrong draft in <think>, the right call after", simple, draft + block(right[0]), True),
        ("simple: the right call only inside <think>", simple, f"<think>{block(right[0])}</think>\nDone.", False),
        ("simple: a cut-off <think> (no </think>) holding the wrong draft", simple, draft.split("</think>")[0], False),
        ("simple: arguments as a JSON string", simple,
         block({"name": right[0]["name"], "arguments": json.dumps(right[0]["arguments"])}), False),
        ("simple: the right call and an unparseable block", simple,
         block(right[0]) + "<tool_call>\n{oops\n</tool_call>", True),
        ("simple: the right call and a call without arguments", simple,
         block(right[0]) + block({"name": right[0]["name"]}), False),
        ("parallel: Qwen-template blocks", parallel, "\n".join(map(block, both)), True),
        ("parallel: one block holding a JSON list", parallel, f"<tool_call>\n{json.dumps(both)}\n</tool_call>", False),
        ("irrelevance: a plain refusal", irrelevance, "None of the functions can answer this.", True),
        ("irrelevance: a call drafted in <think>, a refusal after", irrelevance,
         f"<think>\nCould I use it? {block({'name': name, 'arguments': {}})} No.\n</think>\n\nNone fits.", True),
        ("irrelevance: a call", irrelevance, block({"name": name, "arguments": {}}), False),
        ("irrelevance: a call without an 'arguments' key", irrelevance, block({"name": name}), True),
        ("irrelevance: 'parameters' instead of 'arguments'", irrelevance,
         block({"name": name, "parameters": {"x": 1}}), True),
        ("relevance: a call", relevance, block({"name": rname, "arguments": {}}), True),
        ("relevance: a call without an 'arguments' key", relevance, block({"name": rname}), False),
        # review 3: BFCL's decoder keys a call by any hashable name, so these are calls, not a failed decode
        ("irrelevance: a call named null", irrelevance, block({"name": None, "arguments": {}}), False),
        ("irrelevance: a call named 0", irrelevance, block({"name": 0, "arguments": {}}), False),
        ("irrelevance: a call named true", irrelevance, block({"name": True, "arguments": {}}), False),
        ("irrelevance: a call named by a list", irrelevance, block({"name": [name], "arguments": {}}), True),
        ("irrelevance: a call named by an object", irrelevance, block({"name": {"n": name}, "arguments": {}}), True),
        ("relevance: a call named null", relevance, block({"name": None, "arguments": {}}), True),
        ("relevance: a call named 0", relevance, block({"name": 0, "arguments": {}}), True),
        ("relevance: a call named by a list", relevance, block({"name": [rname], "arguments": {}}), False),
        ("simple: the right call named 1.5", simple, block({"name": 1.5, "arguments": right[0]["arguments"]}), False),
    ]  # fmt: skip


def test_every_case_gets_bfcls_own_verdict(items, qwen_handler):
    suites = {"bfcl_non_live": BfclNonLiveSuite(), "bfcl_live": BfclLiveSuite()}
    table = []
    for label, item, text, expected in _cases(items):
        suite = suites["bfcl_live" if item.id.startswith("live") else "bfcl_non_live"]
        ours = bool(suite.run_sample(Text(text), item, 0, SAMPLING).score)
        table.append((label, ours, official_verdict(qwen_handler, item, text), expected))
    assert [(label, official) for label, _, official, _ in table] == [(t[0], t[3]) for t in table]  # the reference
    assert [(label, ours) for label, ours, _, _ in table] == [(t[0], t[3]) for t in table]


class Script:
    """multi_turn_base_1's gold calls as Qwen-template blocks, optionally after an ``mkdir`` drafted in <think>."""

    def __init__(self, item, think: bool) -> None:
        self.item, self.think = item, think

    def complete(self, messages, **_kw):
        if messages[-1]["content"].startswith("<tool_response>"):
            return ChatResult("Done.", [], "stop")
        turn = sum(m["role"] == "user" and not m["content"].startswith("<tool_response>") for m in messages) - 1
        calls = gold_calls(self.item.answer[turn], self.item.meta["entry"]["involved_classes"])
        if not calls:
            return ChatResult("Nothing to do.", [], "stop")
        draft = block({"name": "mkdir", "arguments": {"dir_name": "draft"}})
        thinking = f"<think>\nA scratch folder first?\n{draft}\nNo, not asked for.\n</think>\n\n" if self.think else ""
        return ChatResult(thinking + "".join(map(block, calls)), [], "stop")


def test_a_call_drafted_in_think_is_not_executed_in_multi_turn():
    suite = BfclMultiTurnSuite(["multi_turn_base_1"])
    item = suite.load(None)[0]
    for think in (False, True):
        record = suite.run_sample(Script(item, think), item, 0, SAMPLING)
        assert record.score == 1.0 and record.detail["error"] == "", think
