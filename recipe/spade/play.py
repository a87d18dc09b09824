"""One multi-turn episode of the policy in a sandboxed environment, with exact token bookkeeping for verl.

Shared by the env agent loop (training plays) and the designer loop (design-time measurement plays). Assistant
tokens get mask 1 and their rollout log-probs; observation and tool-response tokens get mask 0. Tokens come from
verl's Continuous Token builder, so the trained sequence is exactly what the rollout generated.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
import uuid
from collections.abc import Awaitable
from dataclasses import dataclass, field
from typing import Any, TypeVar

from spade_envs.envs.contract import extract_command, outcome_reward
from spade_envs.envs.episode import observation_hash
from spade_envs.envs.tooluse import parse_agent_text
from spade_envs.play.prompts import agent_messages
from spade_envs.sandbox import AsyncSandboxEnv, SandboxError, WorkerPool

__all__ = ["EnvFault", "Episode", "TurnSample", "play_episode", "weight_versions"]

T = TypeVar("T")
logger = logging.getLogger(__name__)


@dataclass
class TurnSample:
    """One assistant turn of a per-turn episode (``recipe/spade/turns.py``): the rendered history and the turn."""

    prompt_ids: list[int]
    response_ids: list[int]
    response_logprobs: list[float] | None


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
    #: the env ended the episode (win or loss); False when turns or tokens ran out first
    terminated: bool = False
    sandbox_s: float = 0.0
    wall_s: float = 0.0
    info: dict[str, Any] = field(default_factory=dict)
    #: per-turn mode only: one sample per assistant turn (the fields above then describe the last turn)
    samples: list[TurnSample] = field(default_factory=list)
    #: the env's reward for each agent turn it acted on (the run record's transcripts)
    step_rewards: list[float] = field(default_factory=list)


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

    Nothing the environment or the sandbox does raises out of here: any failure of create, reset, tools, step,
    call_tool or close ends the episode with ``fault`` set (the sample is then masked out of the loss). Errors of
    the model server are not the env's and propagate. All turns share one request id, so verl's router keeps the
    episode on one replica and its prefix cache.
    """
    budget = loop.rollout_config.response_length
    began = time.perf_counter()
    sandbox = _SandboxClock()
    env: AsyncSandboxEnv | None = None
    ids: list[int] = []
    mask: list[int] = []
    logps: list[float] | None = None
    turns, reward, terminated, truncated, fault = 0, 0.0, False, False, None
    rewards: list[float] = []
    first_obs = ""
    versions: list[dict[str, Any]] = []
    request_id = uuid.uuid4().hex
    try:
        env = await sandbox.call(AsyncSandboxEnv.create(source, pool))
        obs, _ = await sandbox.call(env.reset(seed))
        first_obs = obs
        tools = await sandbox.call(env.tools()) if env.setting == "tool_use" else None
        messages = agent_messages(env.setting, obs, hint)
        ids = list(await loop.ct_build_initial_tokens(messages, tools=tools))
        prompt_len = len(ids)
        limit = min(max_turns, env.max_turns)
        for turn in range(limit):
            room = budget - len(mask)
            if room <= 0:
                break
            params = {**sampling_params, "max_tokens": min(turn_tokens, room)}
            out = await loop.server_manager.generate(request_id=request_id, prompt_ids=ids, sampling_params=params)
            versions.append(out.extra_fields)
            merged, mask, logps = await loop.ct_merge_assistant_token(
                ids, out.token_ids, mask, (logps if logps is not None else []) if out.log_probs else logps,
                assistant_logprobs=out.log_probs or None,
            )  # fmt: skip
            ids = merged.token_ids
            turns += 1
            text = loop.tokenizer.decode(out.token_ids, skip_special_tokens=True)
            assistant, result = await _act(env, text, out.token_ids, tools, tool_parser, sandbox)
            obs, reward, terminated, truncated, _ = result
            rewards.append(float(reward))
            messages.append(assistant)
            if terminated or truncated or turn == limit - 1:
                break  # no observation after the last turn: nobody would read it
            previous = list(messages)
            messages.append({"role": "tool" if assistant.get("tool_calls") else "user", "content": obs})
            merged, mask, logps = await loop.ct_merge_context_msg(previous, messages, ids, mask, logps, tools=tools)
            ids = merged.token_ids
    except EnvFault as exc:
        fault = exc.kind
    finally:
        if env is not None:
            try:
                await sandbox.call(env.close())
            except EnvFault as exc:
                fault = fault or exc.kind
    info = {**weight_versions(versions), "spade_first_obs": observation_hash(first_obs) if first_obs else ""}
    if not mask:  # nothing generated (the env failed before the first turn): one masked token keeps verl's shapes
        return Episode(ids or [_pad_id(loop)], [_pad_id(loop)], [0],
                       [0.0] if sampling_params.get("logprobs") else None, 0.0, turns, fault=fault or "no_turn",
                       sandbox_s=sandbox.seconds, wall_s=time.perf_counter() - began, info=info)  # fmt: skip
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
        terminated=bool(terminated) and not fault,
        sandbox_s=sandbox.seconds,
        wall_s=time.perf_counter() - began,
        info=info,
        step_rewards=rewards,
    )


class EnvFault(Exception):
    """What an environment or its sandbox did wrong, as one kind (a sandbox error kind, or ``host_error``)."""

    def __init__(self, kind: str) -> None:
        super().__init__(kind)
        self.kind = kind


class _SandboxClock:
    """Times sandbox calls and turns every failure of one into an :class:`EnvFault`."""

    def __init__(self) -> None:
        self.seconds = 0.0

    async def call(self, awaitable: Awaitable[T]) -> T:
        started = time.perf_counter()
        try:
            return await awaitable
        except SandboxError as exc:
            raise EnvFault(exc.kind) from exc
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # a host-side bug on generated output must not end the agent loop either
            logger.warning("spade: unexpected %s from a sandbox call: %s", type(exc).__name__, exc)
            raise EnvFault("host_error") from exc
        finally:
            self.seconds += time.perf_counter() - started


def _pad_id(loop: Any) -> int:
    tokenizer = getattr(loop, "tokenizer", None)
    for value in (getattr(tokenizer, "pad_token_id", None), getattr(tokenizer, "eos_token_id", None)):
        if value is not None:
            return int(value)
    return 0


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


async def _act(env: AsyncSandboxEnv, text: str, token_ids: list[int], tools: Any, tool_parser: Any,
               sandbox: _SandboxClock) -> tuple:  # fmt: skip
    """Send one agent turn to the env: games get the boxed command, tool use native calls (or raw text)."""
    if env.setting == "games":
        return {"role": "assistant", "content": text}, await sandbox.call(env.step(extract_command(text)))
    calls: list[Any] = []
    content = text
    if tool_parser is not None:
        content, calls = await tool_parser.extract_tool_calls(token_ids, tools)
    if not calls:
        return {"role": "assistant", "content": text}, await sandbox.call(env.step(text))
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
    return message, await sandbox.call(env.step_calls(parsed, answer))
