"""ACEBench-Agent (English): 20 multi-step and 30 multi-turn items, scored end to end and by process.

Data, answers, scenario classes and the domain rules come from the user's ACEBench checkout (``--acebench-root`` or
``ACEBENCH_ROOT``; see :mod:`~spade_envs.evaluation.suites.acebench_env`). Each sample runs on fresh instances of
the item's classes. The model gets the item's functions as OpenAI tools and calls them in our training format
(native tool calls or ``<tool_call>`` blocks, answered as in the BFCL suite) instead of ACEBench's ``[f(x=1)]``
text. Loops follow ACEBench's runner:

- multi-step: the task is the first user message; the agent works alone until it says "finish conversation" or 40
  messages have passed; every reply without calls gets a nudge, as ACEBench's runner answers it;
- multi-turn: an LLM plays the user from the item's instruction under the checkout's simulator prompt; the episode
  ends when either side says "finish conversation" or after 40 messages. ACEBench uses GPT-4o as the user; the
  simulator here is whatever ``user_client`` serves (by default the model under test). ``results.json`` names its
  model and endpoint (``provenance.user_simulator``, ``user_simulator_endpoint``), and ``compare`` refuses runs
  whose simulators differ or were the models under test (base and trained runs then played different users). The
  recommended setting is one fixed simulator for every run (``--user-base-url``/``--user-model``).

Score: end-to-end accuracy (final class states equal the ground truth), the unweighted mean of multi-step and
multi-turn as in ACEBench's "agent" column; ``process`` (milestones matched in order) is reported beside it.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from spade_envs.design.extract import split_thinking
from spade_envs.envs.llm import ChatClient, ChatError, ChatMisconfigured, ChatRefused
from spade_envs.evaluation.records import Item, SampleRecord, Sampling
from spade_envs.evaluation.suite import Suite
from spade_envs.evaluation.suites.acebench_env import (
    KINDS,
    PIN,
    Scenario,
    check_checkout,
    check_end_to_end,
    checkout_commit,
    load_classes,
    process_accuracy,
    read_constant,
    render_call,
)
from spade_envs.evaluation.suites.bfcl import reply_calls, result_messages, to_openai_tool

__all__ = ["AceBenchAgentSuite", "UserSimulator"]

FINISH = "finish conversation"
MAX_MESSAGES = 40  # ACEBench's --max-dialog-turns default
OFFICIAL_SIMULATOR = "gpt-4o"
# Our own wording; the domain rules (time, policies) are read from the checkout and appended.
TURN_SYSTEM = (
    "You are an assistant acting for the user through the functions given as tools. Call a function when you have "
    "everything it needs, otherwise ask the user. Call functions only through the tools, whatever call notation the "
    f'rules below mention. When the user\'s task is complete, say "{FINISH}".\n\nRules:\n'
)
STEP_SYSTEM = (
    "You complete the user's task alone through the functions given as tools, one step at a time, deciding each "
    f'step from the previous results. Nobody can answer questions. When the task is complete, reply "{FINISH}".'
)
NUDGE = f'Nobody can answer questions here. Use what you know to complete the task, then reply "{FINISH}".'
OPENING = "Hello! How can I help you today?"


def _read_items(path: Path) -> list[dict[str, Any]]:
    """ACEBench's ``.json`` files hold one JSON object per line; a JSON list is accepted too."""
    text = path.read_text(encoding="utf-8").strip()
    if text.startswith("["):
        return list(json.loads(text))
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def _visible(text: str) -> str:
    return split_thinking(text)[0].strip()


class UserSimulator:
    """The simulated user of a multi-turn item: its own lines are ``assistant`` turns, the agent's are ``user``."""

    def __init__(self, client: ChatClient, system_prompt: str, max_tokens: int) -> None:
        self.client, self.max_tokens = client, max_tokens
        self.messages: list[dict[str, Any]] = [{"role": "system", "content": system_prompt}]

    def reply(self, agent_text: str) -> str:
        """The user's next line after the agent said ``agent_text`` (greedy, as ACEBench samples it at T 0.001).

        A refusal of the simulator's request is never the agent's answer: it raises a plain :class:`ChatError` (the
        sample fails and a rerun plays it), or :class:`ChatMisconfigured` naming the simulator (the run stops).
        """
        self.messages.append({"role": "user", "content": agent_text})
        try:
            reply = self.client.complete(self.messages, temperature=0.0, top_p=1.0, max_tokens=self.max_tokens)
        except ChatMisconfigured as exc:
            raise ChatMisconfigured(f"ACEBench's user simulator: {exc}", exc.status, exc.detail) from exc
        except ChatRefused as exc:
            raise ChatError(f"ACEBench's user simulator refused a request (not the agent's answer): {exc}") from exc
        text = _visible(reply.text)
        self.messages.append({"role": "assistant", "content": text})
        return text


class AceBenchAgentSuite(Suite):
    """ACEBench's agent category; items of the two kinds interleaved so that ``--limit`` samples both."""

    name = "acebench_agent"
    setting = "tool_use"
    metric = "e2e acc"
    shown_metrics = ("process",)
    #: The reference harness's protocol (``spade-rl/spade`` ``eval_offline/configs/tool_use.yaml``).
    default_sampling = Sampling(n_samples=1, temperature=0.7, top_p=1.0, max_tokens=16384)

    def __init__(self, root: Path | None = None, user_client: ChatClient | None = None,
                 user_is_model_under_test: bool | None = None) -> None:  # fmt: skip
        """Read the checkout at ``root``; ``user_client`` plays the multi-turn user.

        ``None`` means the model under test, on its own endpoint; ``user_is_model_under_test`` says that
        ``user_client`` is the model under test (the CLI's default).
        """
        super().__init__()
        self.root, self.user_client = root, user_client
        self.user_is_model_under_test = (
            user_client is None if user_is_model_under_test is None else user_is_model_under_test
        )
        self._classes: dict[str, dict[str, type]] = {}
        self._rules: dict[str, str] = {}
        self._user_prompts: dict[str, str] = {}

    def load(self, data_dir: Path | None) -> list[Item]:
        root = check_checkout(self.root)
        data = root / "data_all" / "data_en"
        per_kind: list[list[Item]] = []
        self.data_files = []
        for kind in KINDS:
            entries_path = data / f"data_agent_{kind}.json"
            answers_path = data / "possible_answer" / f"data_agent_{kind}.json"
            self.data_files += [entries_path, answers_path]
            answers = {a["id"]: a for a in _read_items(answers_path)}
            entries = _read_items(entries_path)
            missing = [e["id"] for e in entries if e["id"] not in answers]
            if missing:
                raise ValueError(f"{answers_path} has no answer for {missing}")
            involved = sorted({name for e in entries for name in e["involved_classes"]})
            self._classes[kind] = load_classes(root, kind, involved)
            per_kind.append([Item(e["id"], e["question"], answers[e["id"]], {"entry": e, "kind": kind})
                             for e in entries])  # fmt: skip
        prompts, user_prompts = root / "model_inference" / "prompt_en.py", root / "model_inference" / "multi_turn"
        for cls, key in (("BaseApi", "BASE"), ("Travel", "TRAVEL")):  # the phone and the airline domains
            self._rules[cls] = read_constant(prompts, f"{key}_PROMPT_EN")
            self._user_prompts[cls] = read_constant(user_prompts / "APIModel_user.py", f"SYSTEM_PROMPT_{key}_EN")
        self.data_files += [prompts, user_prompts / "APIModel_user.py"]
        user = self.user_client
        self.provenance = {
            "acebench_root": str(root), "acebench_commit": checkout_commit(root), "pinned_commit": PIN,
            # the protocol part: which model plays the user (the endpoint may move between runs of one protocol)
            "user_simulator": {"model": user.model if user else None,
                               "model_under_test": self.user_is_model_under_test},
            "user_simulator_endpoint": user.url.removesuffix("/chat/completions") if user else None,
            "official_user_simulator": OFFICIAL_SIMULATOR,
        }  # fmt: skip
        items = [item for pair in zip(*per_kind) for item in pair]
        longest = max(map(len, per_kind))
        return items + [g[i] for i in range(min(map(len, per_kind)), longest) for g in per_kind if i < len(g)]

    def aggregate(self, records: Sequence[SampleRecord]) -> dict[str, float]:
        """End-to-end ``score`` and ``process``: unweighted means over the kinds present; plus each kind's."""
        by_kind: dict[str, list[SampleRecord]] = {}
        for r in records:
            by_kind.setdefault(r.detail.get("kind", "?"), []).append(r)
        if not by_kind:
            return {}
        scores: dict[str, float] = {}
        for kind, rs in by_kind.items():
            scores[kind] = sum(r.score for r in rs) / len(rs)
            scores[f"{kind}_process"] = sum(float(r.detail.get("process", 0.0)) for r in rs) / len(rs)
        scores["score"] = sum(scores[k] for k in by_kind) / len(by_kind)
        scores["process"] = sum(scores[f"{k}_process"] for k in by_kind) / len(by_kind)
        return scores

    def run_sample(self, client: ChatClient, item: Item, sample: int, sampling: Sampling) -> SampleRecord:
        entry, kind = item.meta["entry"], item.meta["kind"]
        scenario = Scenario(self._classes[kind], entry["involved_classes"], entry["initial_config"])
        steps, transcript, ended = self._play(client, scenario, entry, kind, sampling)
        passed, errors, unchecked = check_end_to_end(scenario.states(), item.answer["ground_truth"])
        process = process_accuracy(steps, item.answer["mile_stone"], passed)
        return self.record(item, sample, float(passed), json.dumps(steps)[:2000], "\n".join(transcript), kind=kind,
                           process=process, ended=ended, errors=errors[:5], unchecked_classes=unchecked)  # fmt: skip

    def _play(
        self, client: ChatClient, scenario: Scenario, entry: dict[str, Any], kind: str, sampling: Sampling
    ) -> tuple[list[str], list[str], str]:
        """Run one episode; return the call steps in ACEBench notation, the transcript and why it ended."""
        involved = entry["involved_classes"]
        tools = [to_openai_tool(doc) for doc in entry["function"]]
        user: UserSimulator | None = None
        if kind == "multi_turn":
            rules = "\n\n".join(self._rules[cls] for cls in ("Travel", "BaseApi") if cls in involved)
            persona = self._user_prompts["BaseApi" if "BaseApi" in involved or "Travel" not in involved else "Travel"]
            user = UserSimulator(self.user_client or client, persona.replace("{instruction}", entry["question"]),
                                 sampling.max_tokens)  # fmt: skip
            system, first = TURN_SYSTEM + rules, user.reply(OPENING)
        else:
            system, first = STEP_SYSTEM, entry["question"]
        messages = [{"role": "system", "content": system}, {"role": "user", "content": first}]
        transcript = [f"[user] {first}"]
        steps: list[str] = []
        budget = MAX_MESSAGES
        while budget > 0:
            reply = client.complete(messages, temperature=sampling.temperature, top_p=sampling.top_p,
                                    max_tokens=sampling.max_tokens, tools=tools)  # fmt: skip
            budget -= 1
            text = _visible(reply.text)
            read = reply_calls(reply, bfcl=False)
            calls, n_native, errors = read.calls, read.n_native, read.errors
            transcript.append(f"[agent] {text}" + "".join(f"\n[call] {json.dumps(c)}" for c in reply.tool_calls))
            if calls or errors:
                budget -= 1
                outputs = scenario.run_step(calls, multi_turn=kind == "multi_turn")
                if calls:
                    steps.append("[" + ", ".join(render_call(name, args) for name, args in calls) + "]")
                messages += result_messages(reply, n_native, outputs, errors, str(len(steps)))
                transcript += [f"[result] {o[:300]}" for o in [f"Error: {e}" for e in errors] + outputs]
                if FINISH in text.lower():
                    return steps, transcript, "agent finished"
                continue
            messages.append({"role": "assistant", "content": reply.text})
            if FINISH in text.lower():
                return steps, transcript, "agent finished"
            if user is None:  # as ACEBench's multi-step runner: nudge after every reply without calls
                messages.append({"role": "user", "content": NUDGE})
                transcript.append(f"[user] {NUDGE}")
            else:
                answer = user.reply(text)
                transcript.append(f"[user] {answer}")
                if FINISH in answer.lower():
                    return steps, transcript, "user finished"
                messages.append({"role": "user", "content": answer})
            budget -= 1
        return steps, transcript, f"{MAX_MESSAGES} messages"
