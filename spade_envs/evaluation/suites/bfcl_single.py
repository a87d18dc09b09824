"""BFCL-v4 single-turn categories, non-live and live, scored by bfcl-eval's own AST checker.

``bfcl-eval`` (installed ``--no-deps``) ships every entry, its ground truth and ``ast_checker``. Each entry is one
model call: the entry's messages, its functions as OpenAI tools (with BFCL's language hints for Java and JavaScript,
as ``bfcl generate`` sends them), at T 0. The reply's calls (native tool calls or ``<tool_call>`` blocks, as in
:mod:`~spade_envs.evaluation.suites.bfcl`) become BFCL's decoded form ``[{name: {arg: value}}]`` and are judged
as BFCL's evaluator judges them:

- AST categories (``simple_*``, ``multiple``, ``parallel``, ``parallel_multiple`` and their ``live_`` forms):
  ``ast_checker`` against the possible answers, with the entry's original function docs and its language;
- ``irrelevance`` / ``live_irrelevance``: right when the reply makes no call;
- ``live_relevance``: right when the reply makes at least one call.

Headline scores are BFCL's: non-live is the unweighted mean of simple (itself the unweighted mean of Python, Java,
JavaScript), multiple, parallel and parallel-multiple; live is the entry-weighted accuracy over the four live AST
categories. Irrelevance and relevance are reported beside them (BFCL counts them in its overall score only).

The checker runs in a scorer process (:mod:`~spade_envs.evaluation.scorer_pool`). bfcl-eval's checker module
imports BFCL's model registry, which imports every vendor SDK (anthropic, cohere, ...) that a ``--no-deps`` install
lacks; the checker reads one flag from it, ``underscore_to_dot`` (whether dots in function names were sent as
underscores), which is ``False`` for BFCL's Qwen FC handlers and here, since names are sent as written. Only when
the registry cannot be imported does the scorer process put a registry with that flag in its place.
"""

from __future__ import annotations

import copy
import importlib.metadata
import json
import sys
import types
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from spade_envs.envs.llm import ChatClient
from spade_envs.evaluation.records import Item, SampleRecord, Sampling
from spade_envs.evaluation.scorer_pool import ScorerRaised, ScorerTimeout, shared_pool
from spade_envs.evaluation.suite import Suite
from spade_envs.evaluation.suites.bfcl import _load_json_lines, bfcl_root, reply_calls, to_openai_tool

__all__ = ["LIVE", "NON_LIVE", "BfclLiveSuite", "BfclNonLiveSuite", "check_entry", "decoded_calls"]

NON_LIVE = ("simple_python", "simple_java", "simple_javascript", "multiple", "parallel", "parallel_multiple",
            "irrelevance")  # fmt: skip
LIVE = ("live_simple", "live_multiple", "live_parallel", "live_parallel_multiple", "live_irrelevance",
        "live_relevance")  # fmt: skip
#: The model name the checker is told (it only looks up ``underscore_to_dot``, False for BFCL's Qwen FC handlers).
CHECKER_MODEL = "Qwen/Qwen3-8B-FC"
CHECK_TIMEOUT_S = 30.0
_PRELOAD = ("bfcl_eval",)


def decoded_calls(calls: Sequence[tuple[Any, Any]]) -> list[dict[Any, Any]]:
    """Our parsed calls in BFCL's decoded form; a call whose arguments are not an object keeps them as they are."""
    return [{name: arguments} for name, arguments in calls]


class _NoDotRegistry(dict):
    """Stands in for BFCL's model registry in a scorer process: every model sends dotted names as written."""

    def __missing__(self, key: str) -> Any:
        return types.SimpleNamespace(underscore_to_dot=False)


def _checker() -> Any:
    try:
        import bfcl_eval.constants.model_config  # noqa: F401
    except ImportError:  # a --no-deps install: the registry's vendor SDKs are missing
        registry = types.ModuleType("bfcl_eval.constants.model_config")
        registry.MODEL_CONFIG_MAPPING = _NoDotRegistry()  # type: ignore[attr-defined]
        sys.modules["bfcl_eval.constants.model_config"] = registry
    from bfcl_eval.eval_checker.ast_eval import ast_checker

    return ast_checker


def check_entry(category: str, functions: list[dict[str, Any]], decoded: list[Any] | None, answer: Any
                ) -> dict[str, Any]:  # fmt: skip
    """BFCL's verdict on one entry: ``{"valid": bool, "error_type": str}`` (runs in a scorer process).

    ``decoded`` is ``None`` when the reply failed to decode (BFCL's decoder raised): wrong for AST categories and
    relevance, right for irrelevance, as in BFCL's evaluator.
    """
    from bfcl_eval.constants.enums import Language
    from bfcl_eval.utils import is_empty_output, is_function_calling_format_output

    if decoded is None and "relevance" not in category:
        return {"valid": False, "error_type": "ast_decoder:decoder_failed"}
    if "irrelevance" in category or "relevance" in category:
        called = decoded is not None and not is_empty_output(decoded)
        valid = not called if "irrelevance" in category else called
        kind = "irrelevance_error:decoder_success" if "irrelevance" in category else "relevance_error:decoder_failed"
        return {"valid": valid, "error_type": "" if valid else kind}
    if not is_function_calling_format_output(decoded):
        return {"valid": False, "error_type": "ast_decoder:decoder_wrong_output_format"}
    language = Language.JAVA if category.endswith("java") else (
        Language.JAVASCRIPT if category.endswith("javascript") else Language.PYTHON)  # fmt: skip
    result = _checker().ast_checker(functions, decoded, answer, language, category, CHECKER_MODEL)
    return {"valid": bool(result["valid"]), "error_type": "" if result["valid"] else str(result.get("error_type"))}


def _hinted(functions: list[dict[str, Any]], category: str) -> list[dict[str, Any]]:
    """The docs as ``bfcl generate`` sends them: BFCL's own language hints and Java/JavaScript type rewrites."""
    from bfcl_eval.utils import _func_doc_language_specific_pre_processing

    return _func_doc_language_specific_pre_processing(copy.deepcopy(functions), category)


class _BfclSingleTurn(Suite):
    """One model call per entry, judged by BFCL's rules; entries of the categories interleaved (``--limit``)."""

    setting = "tool_use"
    metric = "acc"
    categories: tuple[str, ...] = ()
    default_sampling = Sampling(n_samples=1, temperature=0.0, top_p=1.0, max_tokens=4096)

    def __init__(self, ids: Sequence[str] | None = None) -> None:
        super().__init__()
        self.ids = list(ids) if ids is not None else None

    def load(self, data_dir: Path | None) -> list[Item]:
        root = bfcl_root()
        per_category: list[list[Item]] = []
        self.data_files = []
        for category in self.categories:
            entries_path = root / "data" / f"BFCL_v4_{category}.json"
            answers_path = root / "data" / "possible_answer" / f"BFCL_v4_{category}.json"
            self.data_files.append(entries_path)
            answers: dict[str, Any] = {}
            if answers_path.exists():
                self.data_files.append(answers_path)
                answers = {a["id"]: a["ground_truth"] for a in _load_json_lines(answers_path)}
            items = [Item(e["id"], "", answers.get(e["id"]), {"entry": e, "category": category})
                     for e in _load_json_lines(entries_path)]  # fmt: skip
            per_category.append(items)
        self.provenance = {"bfcl_eval": importlib.metadata.version("bfcl-eval"), "categories": list(self.categories)}
        longest = max(map(len, per_category))
        interleaved = [g[i] for i in range(longest) for g in per_category if i < len(g)]
        if self.ids is None:
            return interleaved
        by_id = {item.id: item for item in interleaved}
        missing = [i for i in self.ids if i not in by_id]
        if missing:
            raise ValueError(f"unknown {self.name} id(s) {missing}")
        return [by_id[i] for i in self.ids]

    def run_sample(self, client: ChatClient, item: Item, sample: int, sampling: Sampling) -> SampleRecord:
        entry, category = item.meta["entry"], item.meta["category"]
        tools = [to_openai_tool(doc) for doc in _hinted(entry["function"], category)]
        messages = [dict(m) for m in entry["question"][0]]
        reply = client.complete(messages, temperature=sampling.temperature, top_p=sampling.top_p,
                                max_tokens=sampling.max_tokens, tools=tools)  # fmt: skip
        read = reply_calls(reply)
        decoded = None if read.malformed else decoded_calls(read.calls)
        detail: dict[str, Any] = {"category": category}
        try:
            verdict = shared_pool(_PRELOAD).call(check_entry, category, entry["function"], decoded, item.answer,
                                                 timeout_s=CHECK_TIMEOUT_S)  # fmt: skip
        except ScorerTimeout:
            verdict, detail["scorer_timeout"] = {"valid": False, "error_type": "checker timed out"}, 1
        except ScorerRaised as exc:  # BFCL's checker raises on some malformed outputs: a wrong answer, as in BFCL
            verdict = {"valid": False, "error_type": f"checker raised: {exc}"[:300]}
        text = reply.text + "".join(f"\n[call] {json.dumps(c)}" for c in reply.tool_calls)
        return self.record(item, sample, float(verdict["valid"]), json.dumps(decoded, default=str)[:2000], text,
                           error=verdict["error_type"], **detail)  # fmt: skip

    def category_scores(self, records: Sequence[SampleRecord]) -> dict[str, tuple[float, int]]:
        """Per category: accuracy and entry count."""
        groups: dict[str, list[float]] = {}
        for r in records:
            groups.setdefault(r.detail.get("category", "?"), []).append(r.score)
        return {c: (sum(v) / len(v), len(v)) for c, v in groups.items()}


class BfclNonLiveSuite(_BfclSingleTurn):
    """BFCL-v4 non-live: simple (Python, Java, JavaScript), multiple, parallel, parallel-multiple, irrelevance."""

    name = "bfcl_non_live"
    categories = NON_LIVE

    def aggregate(self, records: Sequence[SampleRecord]) -> dict[str, float]:
        """BFCL's "Non-Live Overall Acc" (unweighted over the AST groups present), plus every category."""
        scores = {c: acc for c, (acc, _n) in self.category_scores(records).items()}
        simple = [scores[c] for c in ("simple_python", "simple_java", "simple_javascript") if c in scores]
        groups = ([sum(simple) / len(simple)] if simple else []) + [
            scores[c] for c in ("multiple", "parallel", "parallel_multiple") if c in scores
        ]
        out = dict(scores)
        if simple:
            out["simple"] = sum(simple) / len(simple)
        if groups:
            out["score"] = sum(groups) / len(groups)
        return out


class BfclLiveSuite(_BfclSingleTurn):
    """BFCL-v4 live: simple, multiple, parallel, parallel-multiple, irrelevance, relevance."""

    name = "bfcl_live"
    categories = LIVE

    def aggregate(self, records: Sequence[SampleRecord]) -> dict[str, float]:
        """BFCL's "Live Overall Acc" (entry-weighted over the live AST categories), plus every category."""
        per = self.category_scores(records)
        ast = [(acc, n) for c, (acc, n) in per.items() if c in LIVE[:4]]
        out = {c: acc for c, (acc, _n) in per.items()}
        if ast:
            out["score"] = sum(acc * n for acc, n in ast) / sum(n for _acc, n in ast)
        return out
