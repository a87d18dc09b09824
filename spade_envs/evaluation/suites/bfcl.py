r"""BFCL-v4 multi-turn (base, miss_func, miss_param, long_context: 800 entries), scored by BFCL's own checker.

``bfcl-eval`` ships the entries, the ground truth, the function docs, the executable backends and
``multi_turn_checker``; we install it with ``--no-deps`` (its full dependency set conflicts with verl) and use
only those pieces. The driver follows BFCL's function-calling inference loop (each user turn: query, run the
calls, feed results back, until the model makes no call; the held-out functions of ``miss_func`` are added at
their turn with BFCL's own user prompt). As in BFCL, a turn is force-stopped once more than 20 call-steps ran
(after the 21st), no later turn is played, and the entry is then checked like any other: it fails only because its
number of turns no longer matches the ground truth, so a stop in the last turn is checked normally. The driver reads
native OpenAI tool calls, or ``<tool_call>\n{"name", "arguments"}\n</tool_call>`` blocks in the text after the
last ``</think>`` as BFCL's Qwen FC decoder reads them (:func:`reply_calls`), and answers them with
``<tool_response>`` blocks. Calls are rebuilt as ``name(key=repr(value))`` strings from parsed JSON, so model text
never reaches BFCL's ``eval`` directly. Score: the unweighted mean of the four sub-category accuracies.
"""

from __future__ import annotations

import copy
import json
import re
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from spade_envs.envs.llm import ChatClient, ChatResult
from spade_envs.evaluation.records import Item, SampleRecord, Sampling
from spade_envs.evaluation.suite import MissingDependency, Suite

__all__ = [
    "CATEGORIES",
    "BfclMultiTurnSuite",
    "ReplyCalls",
    "after_think",
    "bfcl_root",
    "reply_calls",
    "result_messages",
    "to_openai_tool",
]

CATEGORIES = ("multi_turn_base", "multi_turn_miss_func", "multi_turn_miss_param", "multi_turn_long_context")
MAX_STEPS = 20  # BFCL's MAXIMUM_STEP_LIMIT: a turn is force-stopped once its count of call-steps exceeds it
ADDED_FUNCTIONS_PROMPT = "I have updated some more functions you can choose from. What about now?"  # BFCL's wording
_IDENT = re.compile(r"^[A-Za-z_]\w*$")
_TYPES = {"integer": "integer", "number": "number", "float": "number", "string": "string", "boolean": "boolean",
          "bool": "boolean", "array": "array", "list": "array", "dict": "object", "object": "object",
          "tuple": "array", "any": "string"}  # fmt: skip
INSTALL = "pip install --no-deps bfcl-eval==2026.3.23 mpmath==1.3.0"


def bfcl_root() -> Path:
    """The installed ``bfcl_eval`` package directory (its ``data/`` holds the benchmark)."""
    try:
        import bfcl_eval
    except ImportError as exc:
        raise MissingDependency(f"the BFCL suite needs bfcl-eval: {INSTALL}") from exc
    return Path(bfcl_eval.__file__).parent


def _schema(node: Any) -> Any:
    if isinstance(node, dict):
        out = {k: _schema(v) for k, v in node.items() if k != "response"}
        if isinstance(node.get("type"), str):
            out["type"] = _TYPES.get(node["type"], node["type"])
        return out
    if isinstance(node, list):
        return [_schema(v) for v in node]
    return node


def to_openai_tool(doc: dict[str, Any]) -> dict[str, Any]:
    """One BFCL function doc as an OpenAI tool (BFCL's ``dict``/``float``/``tuple`` types mapped to JSON schema)."""
    return {"type": "function", "function": {"name": doc["name"], "description": doc.get("description", ""),
                                             "parameters": _schema(doc["parameters"])}}  # fmt: skip


def _call_string(name: Any, arguments: Any) -> str | None:
    """``name(k=repr(v), ...)`` for BFCL's executor, or ``None`` if the call is malformed."""
    if not isinstance(name, str) or not _IDENT.match(name) or not isinstance(arguments, dict):
        return None
    if not all(_IDENT.match(str(k)) for k in arguments):
        return None
    return f"{name}({', '.join(f'{k}={v!r}' for k, v in arguments.items())})"


#: BFCL's Qwen FC decoder reads only blocks with the JSON on its own line(s), as Qwen's chat template writes them.
_BFCL_BLOCK = re.compile(r"<tool_call>\n(.*?)\n</tool_call>", re.DOTALL)
#: Our training environments also accept a block without the newlines.
_ANY_BLOCK = re.compile(r"<tool_call>(.*?)</tool_call>", re.DOTALL)


def after_think(text: str) -> str:
    """The text after the last ``</think>`` (all of it when there is none), as BFCL's Qwen handlers cut a reply."""
    return text.rsplit("</think>", 1)[-1].lstrip("\n") if "</think>" in text else text


@dataclass(frozen=True)
class ReplyCalls:
    """A reply's tool calls, read from its native calls and from ``<tool_call>`` blocks after ``</think>``.

    Attributes:
        calls: ``(name, arguments)``, native calls first; empty when the reply failed to decode. With ``bfcl=True``
            a name may be any JSON scalar (``null``, a number), as BFCL's decoder keys a call by it.
        n_native: how many of ``calls`` are native.
        errors: why blocks were not read (unparseable JSON, a call that is not ``{"name", "arguments"}``).
        malformed: a block parsed as JSON but is not ``{"name": ..., "arguments": object}``. BFCL's decoder then
            rejects the whole reply (no call at all); with ``bfcl=False`` only that block is dropped.
    """

    calls: list[tuple[Any, Any]]
    n_native: int
    errors: list[str]
    malformed: bool


def reply_calls(reply: ChatResult, *, bfcl: bool = True) -> ReplyCalls:
    """Read a reply's calls as BFCL's Qwen FC decoder reads them (``bfcl=True``) or as our training envs do.

    Both read only the text after the last ``</think>`` (a call drafted while reasoning is not a call) and need
    ``arguments`` (an object) in every call. ``bfcl=True``: blocks need the newlines of Qwen's chat template, a block
    that is not JSON is skipped, one malformed call makes the whole reply decode to no call, and the name may be any
    hashable JSON value (``QwenFCHandler.decode_ast`` builds ``{name: arguments}``, so ``null`` or ``0`` is a call,
    a list or an object is not); ``bfcl=False`` (our training environments) needs a string name.
    """
    native: list[tuple[Any, Any]] = [(c["name"], c["arguments"]) for c in reply.tool_calls]
    calls: list[tuple[Any, Any]] = []
    errors: list[str] = []
    malformed = False
    for body in (_BFCL_BLOCK if bfcl else _ANY_BLOCK).findall(after_think(reply.text)):
        try:
            payload = json.loads(body)
        except json.JSONDecodeError as exc:
            errors.append(f"could not parse tool call as JSON ({exc.msg} at char {exc.pos})")
            continue
        if (not isinstance(payload, dict) or "name" not in payload
                or not isinstance(payload["name"], str if not bfcl else str | int | float | bool | None)
                or not isinstance(payload.get("arguments"), dict)):  # fmt: skip
            errors.append('a tool call must be a JSON object {"name": <tool>, "arguments": {...}}')
            malformed = True
            continue
        calls.append((payload["name"], payload["arguments"]))
    if malformed and bfcl:
        return ReplyCalls(native, len(native), errors, True)
    return ReplyCalls(native + calls, len(native), errors, malformed)


def result_messages(
    reply: ChatResult, n_native: int, outputs: Sequence[str], errors: Sequence[str], tag: str
) -> list[dict[str, Any]]:
    """The assistant turn plus the answers to its calls, each in the format it was called in.

    ``outputs`` holds one result per call of :func:`reply_calls`, in that order. Native calls are answered with
    ``tool`` messages (ids ``call_<tag>_<i>``); parse errors and ``<tool_call>`` blocks with one user message of
    ``<tool_response>`` blocks, errors first, as our training environments answer them.
    """
    ids = [f"call_{tag}_{i}" for i in range(n_native)]
    assistant: dict[str, Any] = {"role": "assistant", "content": reply.text}
    if ids:
        assistant["tool_calls"] = [
            {"id": i, "type": "function", "function": {"name": c["name"], "arguments": json.dumps(c["arguments"])}}
            for i, c in zip(ids, reply.tool_calls)
        ]
    messages = [assistant, *({"role": "tool", "tool_call_id": i, "content": o} for i, o in zip(ids, outputs))]
    text_out = [f"Error: {e}" for e in errors] + list(outputs[n_native:])
    if text_out:
        body = "\n\n".join(f"<tool_response>\n{o}\n</tool_response>" for o in text_out)
        messages.append({"role": "user", "content": body})
    return messages


def _load_json_lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


class BfclMultiTurnSuite(Suite):
    """The four BFCL-v4 multi-turn categories, entries interleaved so that ``--limit`` samples all four."""

    name = "bfcl_multi_turn"
    setting = "tool_use"
    metric = "acc"
    default_sampling = Sampling(n_samples=1, temperature=0.0, top_p=1.0, max_tokens=4096)

    def __init__(self, ids: Sequence[str] | None = None) -> None:
        super().__init__()
        self.ids = list(ids) if ids is not None else None

    def load(self, data_dir: Path | None) -> list[Item]:
        root = bfcl_root()
        from bfcl_eval.constants.executable_backend_config import MULTI_TURN_FUNC_DOC_FILE_MAPPING

        docs_dir = root / "data" / "multi_turn_func_doc"
        per_category: list[list[Item]] = []
        self.data_files = []
        class_docs: dict[str, list[dict[str, Any]]] = {}
        for category in CATEGORIES:
            entries_path = root / "data" / f"BFCL_v4_{category}.json"
            answers_path = root / "data" / "possible_answer" / f"BFCL_v4_{category}.json"
            self.data_files += [entries_path, answers_path]
            answers = {a["id"]: a["ground_truth"] for a in _load_json_lines(answers_path)}
            items = []
            for entry in _load_json_lines(entries_path):
                docs = []
                for cls in entry["involved_classes"]:
                    if cls not in class_docs:
                        doc_path = docs_dir / MULTI_TURN_FUNC_DOC_FILE_MAPPING[cls]
                        self.data_files.append(doc_path)
                        class_docs[cls] = _load_json_lines(doc_path)
                    docs += class_docs[cls]
                entry = dict(entry, function=docs)
                items.append(Item(entry["id"], "", answers[entry["id"]], {"entry": entry, "category": category}))
            per_category.append(items)
        import importlib.metadata

        self.provenance = {"bfcl_eval": importlib.metadata.version("bfcl-eval"), "categories": list(CATEGORIES)}
        interleaved = [item for group in zip(*per_category) for item in group]
        longest = max(map(len, per_category))
        interleaved += [g[i] for i in range(min(map(len, per_category)), longest) for g in per_category if i < len(g)]
        if self.ids is None:
            return interleaved
        by_id = {item.id: item for item in interleaved}
        missing = [i for i in self.ids if i not in by_id]
        if missing:
            raise ValueError(f"unknown BFCL multi-turn id(s) {missing}")
        return [by_id[i] for i in self.ids]

    def aggregate(self, records: Sequence[SampleRecord]) -> dict[str, float]:
        """Unweighted mean over the sub-categories present (BFCL's "Multi Turn Overall Acc"), plus each one."""
        scores: dict[str, list[float]] = {}
        for r in records:
            scores.setdefault(r.detail.get("category", "?"), []).append(r.score)
        means = {category: sum(v) / len(v) for category, v in scores.items()}
        return {"score": sum(means.values()) / len(means), **means} if means else {}

    def run_sample(self, client: ChatClient, item: Item, sample: int, sampling: Sampling) -> SampleRecord:
        from bfcl_eval.eval_checker.multi_turn_eval import multi_turn_utils
        from bfcl_eval.eval_checker.multi_turn_eval.multi_turn_checker import multi_turn_checker

        entry = copy.deepcopy(item.meta["entry"])
        category = item.meta["category"]
        token = f"spade_{uuid.uuid4().hex}"  # BFCL keys live backend instances by model name: one per sample
        try:
            decoded, forced, transcript = self._play(client, entry, category, sampling, token)
            # BFCL's evaluator drops steps without calls before checking.
            turns = [[step for step in turn if step] for turn in decoded]
            if len(turns) != len(item.answer):  # BFCL: force-terminated during inference
                result = {"valid": False, "error_type": "multi_turn:force_terminated"}
            else:
                result = multi_turn_checker(turns, item.answer, entry, category, token)
        finally:
            for key in [k for k in vars(multi_turn_utils) if token in k]:
                del vars(multi_turn_utils)[key]
        error = "" if result["valid"] else str(result.get("error_type", "invalid"))
        return self.record(item, sample, float(result["valid"]), json.dumps(turns)[:2000], transcript,
                           category=category, error=error, force_stopped=forced)  # fmt: skip

    def _play(
        self, client: ChatClient, entry: dict[str, Any], category: str, sampling: Sampling, token: str
    ) -> tuple[list[list[list[str]]], bool, str]:
        """Run BFCL's FC inference loop; return per-turn, per-step call strings, force-quit flag and transcript."""
        from bfcl_eval.eval_checker.multi_turn_eval.multi_turn_utils import execute_multi_turn_func_call

        missed = {int(k): v for k, v in entry.get("missed_function", {}).items()}
        held_out = {name for names in missed.values() for name in names}
        docs = {d["name"]: d for d in entry["function"]}
        active = [name for name in docs if name not in held_out]
        messages: list[dict[str, Any]] = []
        decoded: list[list[list[str]]] = []
        transcript: list[str] = []
        for turn, user_messages in enumerate(entry["question"]):
            if turn in missed:
                active += [name for name in missed[turn] if name not in active]
                user_messages = [{"role": "user", "content": ADDED_FUNCTIONS_PROMPT}]
            messages += user_messages
            tools = [to_openai_tool(docs[name]) for name in active]
            steps: list[list[str]] = []
            step = 0
            while True:
                reply = client.complete(messages, temperature=sampling.temperature, top_p=sampling.top_p,
                                        max_tokens=sampling.max_tokens, tools=tools)  # fmt: skip
                transcript.append(reply.text + "".join(f"\n[call] {json.dumps(c)}" for c in reply.tool_calls))
                read = reply_calls(reply)
                calls, n_native, errors = read.calls, read.n_native, read.errors
                if not calls:  # no call, or a reply BFCL's decoder rejects: the turn ends, as in BFCL
                    messages.append({"role": "assistant", "content": reply.text})
                    break
                strings = [_call_string(name, args) for name, args in calls]
                valid = [s for s in strings if s is not None]
                results, _ = execute_multi_turn_func_call(
                    valid, entry["initial_config"], entry["involved_classes"], token, entry["id"],
                    long_context="long_context" in category,
                )  # fmt: skip
                results_iter = iter(results)
                outputs = [next(results_iter) if s is not None else "Error: malformed call" for s in strings]
                steps.append(valid)
                messages += result_messages(reply, n_native, outputs, errors, f"{turn}_{step}")
                transcript += [f"[result] {o[:300]}" for o in [f"Error: {e}" for e in errors] + outputs]
                step += 1
                if step > MAX_STEPS:  # BFCL's force quit: this turn ends, and so does the entry
                    decoded.append(steps)
                    transcript.append(f"[force-stopped after {step} call-steps in turn {turn}]")
                    return decoded, True, "\n".join(transcript)
            decoded.append(steps)
        return decoded, False, "\n".join(transcript)
