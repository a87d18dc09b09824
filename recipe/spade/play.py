"""One multi-turn episode of the policy in a sandboxed environment, with exact token bookkeeping for verl.

Shared by the env agent loop (training plays) and the designer loop (design-time measurement plays). Assistant
tokens get mask 1 and their rollout log-probs; observation and tool-response tokens get mask 0. Tokens come from
verl's Continuous Token builder, so the trained sequence is exactly what the rollout generated.
"""

from __future__ import annotations

import json
import time
import uuid
from dataclasses import dataclass, field
from typing import Any

from spade_envs.contract import extract_command, outcome_reward
from spade_envs.prompts import agent_messages
from spade_envs.sandbox import AsyncSandboxEnv, SandboxError, WorkerPool
from spade_envs.tooluse import parse_agent_text

__all__ = ["Episode", "play_episode", "weight_versions"]


@dataclass
class Episode:
    """Token streams and outcome of one episode. ``fault`` names an environment failure (never an agent loss)."""

    prompt_ids: list[int]
    response_ids: list[int]
    response_mask: list[int]
    response_logprobs: list[float] | None
    outcome: float
    turns: int
    fault: str | None = None
    truncated_by_length: bool = False
    sandbox_s: float = 0.0
    wall_s: float = 0.0
    info: dict[str, Any] = field(default_factory=dict)


async def play_episode(
    loop: Any,
    pool: WorkerPool,
    source: str,
    seed: int,
    sampling_params: dict[str, Any],
    *,
    hint: str | None = None,
    max_turns: int = 25,
    turn_tokens: int = 1024,
    tool_parser: Any = None,
) -> Episode:
    """Play ``source`` from ``reset(seed)`` with the rollout behind ``loop.server_manager``.

    ``loop`` is the calling :class:`~verl.experimental.agent_loop.agent_loop.AgentLoopBase` (for its tokenizer,
    server manager and Continuous Token helpers). The episode ends when the env terminates or truncates, after
    ``max_turns`` agent turns, or when the response budget (``rollout.response_length``) is spent.
    """
    budget = loop.rollout_config.response_length
    began = started = time.perf_counter()
    env = await AsyncSandboxEnv.create(source, pool)
    sandbox_s = time.perf_counter() - started
    ids: list[int] = []
    mask: list[int] = []
    logps: list[float] | None = None
    turns, reward, terminated, truncated, fault = 0, 0.0, False, False, None
    versions: list[dict[str, Any]] = []
    try:
        started = time.perf_counter()
        obs, _ = await env.reset(seed)
        tools = await env.tools() if env.setting == "tool_use" else None
        sandbox_s += time.perf_counter() - started
        messages = agent_messages(env.setting, obs, hint)
        ids = list(await loop.ct_build_initial_tokens(messages, tools=tools))
        prompt_len = len(ids)
        limit = min(max_turns, env.max_turns)
        for turn in range(limit):
            room = budget - len(mask)
            if room <= 0:
                break
            params = {**sampling_params, "max_tokens": min(turn_tokens, room)}
            out = await loop.server_manager.generate(
                request_id=uuid.uuid4().hex, prompt_ids=ids, sampling_params=params
            )
            versions.append(out.extra_fields)
            merged, mask, logps = await loop.ct_merge_assistant_token(
                ids, out.token_ids, mask, (logps if logps is not None else []) if out.log_probs else logps,
                assistant_logprobs=out.log_probs or None,
            )  # fmt: skip
            ids = merged.token_ids
            turns += 1
            text = loop.tokenizer.decode(out.token_ids, skip_special_tokens=True)
            started = time.perf_counter()
            assistant, result = await _act(env, text, out.token_ids, tools, tool_parser)
            sandbox_s += time.perf_counter() - started
            obs, reward, terminated, truncated, _ = result
            messages.append(assistant)
            if terminated or truncated or turn == limit - 1:
                break  # no observation after the last turn: nobody would read it
            previous = list(messages)
            messages.append({"role": "tool" if assistant.get("tool_calls") else "user", "content": obs})
            merged, mask, logps = await loop.ct_merge_context_msg(previous, messages, ids, mask, logps, tools=tools)
            ids = merged.token_ids
    except SandboxError as exc:
        fault = exc.kind
    finally:
        started = time.perf_counter()
        await env.close()
        sandbox_s += time.perf_counter() - started
    if not mask:  # nothing generated (e.g. the env failed at reset): an empty, untrainable response
        return Episode(ids or [0], [], [], None, 0.0, turns, fault=fault or "no_turn", sandbox_s=sandbox_s,
                       wall_s=time.perf_counter() - began,
                       info=weight_versions(versions))  # fmt: skip
    prompt_ids = ids[: len(ids) - len(mask)] if len(ids) > len(mask) else ids[:prompt_len]
    outcome = 0.0 if fault else outcome_reward(reward, terminated, truncated or not terminated)
    return Episode(
        prompt_ids=prompt_ids,
        response_ids=ids[-len(mask) :][:budget],
        response_mask=([0] * len(mask) if fault else mask)[:budget],  # an env fault teaches the agent nothing
        response_logprobs=logps[:budget] if logps else None,
        outcome=outcome,
        turns=turns,
        fault=fault,
        truncated_by_length=len(mask) >= budget,
        sandbox_s=sandbox_s,
        wall_s=time.perf_counter() - began,
        info=weight_versions(versions),
    )


def weight_versions(extra_fields: list[dict[str, Any]]) -> dict[str, Any]:
    """The policy versions that generated an episode's turns, in the fields verl's V1 trainer reads."""
    steps = [e.get("global_steps") for e in extra_fields if e.get("global_steps") is not None]
    lows = [e.get("min_global_steps", e.get("global_steps")) for e in extra_fields]
    highs = [e.get("max_global_steps", e.get("global_steps")) for e in extra_fields]
    lows, highs = [x for x in lows if x is not None], [x for x in highs if x is not None]
    return {
        "global_steps": steps[-1] if steps else 0,
        "min_global_steps": min(lows) if lows else 0,
        "max_global_steps": max(highs) if highs else 0,
    }


async def _act(env: AsyncSandboxEnv, text: str, token_ids: list[int], tools: Any, tool_parser: Any) -> tuple:
    """Send one agent turn to the env: games get the boxed command, tool use native calls (or raw text)."""
    if env.setting == "games":
        return {"role": "assistant", "content": text}, await env.step(extract_command(text))
    calls: list[Any] = []
    content = text
    if tool_parser is not None:
        content, calls = await tool_parser.extract_tool_calls(token_ids, tools)
    if not calls:
        return {"role": "assistant", "content": text}, await env.step(text)
    parsed = []
    for call in calls:
        try:
            arguments = json.loads(call.arguments) if call.arguments else {}
        except json.JSONDecodeError:
            arguments = call.arguments  # the env answers an unparseable call with a helpful error
        parsed.append({"name": call.name, "arguments": arguments})
    _, answer, _ = parse_agent_text(content or "")
    message = {"role": "assistant", "content": content or "",
               "tool_calls": [{"type": "function", "function": p} for p in parsed]}  # fmt: skip
    return message, await env.step_calls(parsed, answer)
