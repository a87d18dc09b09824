"""One episode in per-turn mode (``spade.agent.thinking``): each turn is rendered afresh by the chat template.

A thinking model's chat template (Qwen3's) drops the ``<think>`` blocks of earlier assistant turns, so at inference
the model never sees its old reasoning. Appending every generated token to one growing sequence (``play.py``) would
train it on a context it is never served with, and long reasoning would overflow ``rollout.response_length`` within
a few turns. Here every turn's prompt is the template's own rendering of the conversation so far (earlier reasoning
stripped by the template), with ``enable_thinking=True`` on top of ``data.apply_chat_template_kwargs`` (which keeps
governing the designer, hint and audit prompts: they do not think, as in the paper's 8B runs), and every assistant
turn becomes its own sample: prompt = that rendering, response = the turn's generated tokens with their rollout
log-probs. ``rollout.response_length`` then bounds one turn, and ``rollout.prompt_length`` the rendered history: an
episode whose history no longer fits ends there, as a length truncation (outcome 0 unless the env had ended it).

The env acts only on the answer, the part of a turn after its last ``</think>`` (verl's tool parser reads only that
part too), so a draft command or tool call inside the reasoning is never executed. A turn without a ``</think>``, or
one that did not end on its own (cut at the turn budget, aborted), ends the episode as a length truncation with no env
step: it stays a trained sample, the outcome is 0, and the episode does not count as ended by the env. A turn that
generated nothing is no sample (verl would read its advantage off an all-masked row) and ends the episode there.

Env handling is ``play.py``'s (one rule for failures, one request id per episode for verl's sticky routing).
"""

from __future__ import annotations

import asyncio
import copy
import functools
import time
import uuid
from typing import Any

from recipe.spade.play import EnvFault, Episode, TurnSample, _act, _pad_id, _SandboxClock, weight_versions
from spade_envs.envs.contract import outcome_reward
from spade_envs.envs.episode import observation_hash
from spade_envs.play.prompts import agent_messages
from spade_envs.sandbox import AsyncSandboxEnv, WorkerPool

__all__ = ["THINK_END", "play_turns", "render_history", "thinking_builder"]

#: closes a turn's reasoning; the env acts (and the tool parser reads) only on what follows the last one
THINK_END = "</think>"


def thinking_builder(loop: Any) -> Any:
    """The loop's Continuous Token builder (verl's, chosen for the model family) with the template told to think."""
    builder = copy.copy(loop.continuous_token_builder)
    builder.chat_template_kwargs = {**builder.chat_template_kwargs, "enable_thinking": True}
    return builder


async def render_history(builder: Any, messages: list[dict[str, Any]], tools: Any = None) -> list[int]:
    """The chat template's rendering of ``messages`` plus the generation prompt, uncapped.

    Unlike verl's ``ct_build_initial_tokens`` this does not left-truncate to ``rollout.prompt_length``, so the caller
    can end the episode instead of cutting the task off the start of the prompt.
    """
    build = functools.partial(builder.build_initial_tokens, messages, tools=tools)
    return list(await asyncio.get_running_loop().run_in_executor(None, build))


def _without_special_tokens(tokenizer: Any, message: dict[str, Any]) -> dict[str, Any]:
    """The assistant message as history: verl's tool parser leaves special tokens (the EOS) in ``content``.

    One growing sequence never re-renders an assistant message, but here the template renders it again next turn,
    where a literal ``<|im_end|>`` in the content would close the message early.
    """
    content = message.get("content") or ""
    for token in tokenizer.all_special_tokens:
        content = content.replace(token, "")
    return {**message, "content": content}


def _ended(tokenizer: Any, out: Any, max_tokens: int) -> bool:
    """Whether a turn ended on its own: not aborted, and not cut at ``max_tokens``.

    A turn whose last token is a special token (the EOS) ended on its own, even at the budget (verl's server then
    says ``length``). Otherwise vLLM reports a length stop as ``completed``, so a turn that used its whole budget
    counts as cut.
    """
    if out.stop_reason in ("aborted", "abort"):
        return False
    if int(out.token_ids[-1]) in set(tokenizer.all_special_ids):
        return True
    return out.stop_reason != "length" and len(out.token_ids) < max_tokens


def _split_turn(text: str) -> tuple[str, str]:
    """``(reasoning through the last </think>, the answer after it)``; the text must contain ``</think>``."""
    reasoning, answer = text.rsplit(THINK_END, 1)
    return reasoning + THINK_END, answer


def _answer_ids(tokenizer: Any, token_ids: list[int], answer: str) -> list[int]:
    """The tokens after the last ``</think>`` (for verl's tool parser), re-encoded if ``</think>`` is no token run."""
    end = tokenizer.encode(THINK_END, add_special_tokens=False)
    for i in range(len(token_ids) - len(end), -1, -1):
        if list(token_ids[i : i + len(end)]) == end:
            return list(token_ids[i + len(end) :])
    return tokenizer.encode(answer, add_special_tokens=False)


async def play_turns(
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
    """Play ``source`` from ``reset(seed)``, one sample per assistant turn (``Episode.samples``).

    Same contract as :func:`recipe.spade.play.play_episode` (arguments, faults, outcome); the episode-level token
    fields of the returned :class:`Episode` describe its last turn. A turn may generate up to
    ``min(turn_tokens, rollout.response_length)`` tokens.
    """
    prompt_cap = loop.rollout_config.prompt_length
    turn_cap = min(turn_tokens, loop.rollout_config.response_length)
    began = time.perf_counter()
    sandbox = _SandboxClock()
    env: AsyncSandboxEnv | None = None
    samples: list[TurnSample] = []
    reward, terminated, truncated, fault, overflow, cut = 0.0, False, False, None, False, False
    first_obs = ""
    versions: list[dict[str, Any]] = []
    rewards: list[float] = []
    request_id = uuid.uuid4().hex
    builder = thinking_builder(loop)
    try:
        env = await sandbox.call(AsyncSandboxEnv.create(source, pool))
        obs, _ = await sandbox.call(env.reset(seed))
        first_obs = obs
        tools = await sandbox.call(env.tools()) if env.setting == "tool_use" else None
        messages = agent_messages(env.setting, obs, hint)
        for _ in range(min(max_turns, env.max_turns)):
            prompt = await render_history(builder, messages, tools)
            if len(prompt) > prompt_cap:
                overflow = True  # the history no longer fits: the episode ends here, truncated
                break
            params = {**sampling_params, "max_tokens": turn_cap}
            out = await loop.server_manager.generate(request_id=request_id, prompt_ids=prompt, sampling_params=params)
            if not out.token_ids:  # nothing generated: no sample (it would carry no advantage), and no env step
                break
            versions.append(out.extra_fields)
            samples.append(TurnSample(prompt, list(out.token_ids), list(out.log_probs) if out.log_probs else None))
            text = loop.tokenizer.decode(out.token_ids, skip_special_tokens=True)
            if THINK_END not in text or not _ended(loop.tokenizer, out, turn_cap):
                cut = True  # cut off mid-thought (or mid-answer): trained, but the env never sees a draft
                break
            reasoning, answer = _split_turn(text)
            assistant, result = await _act(env, answer, _answer_ids(loop.tokenizer, out.token_ids, answer), tools,
                                           tool_parser, sandbox)  # fmt: skip
            obs, reward, terminated, truncated, _ = result
            rewards.append(float(reward))
            assistant = {**assistant, "content": reasoning + (assistant.get("content") or "")}  # the template strips it
            messages.append(_without_special_tokens(loop.tokenizer, assistant))
            if terminated or truncated:
                break
            messages.append({"role": "tool" if assistant.get("tool_calls") else "user", "content": obs})
    except EnvFault as exc:
        fault = exc.kind
    finally:
        if env is not None:
            try:
                await sandbox.call(env.close())
            except EnvFault as exc:
                fault = fault or exc.kind
    info = {**weight_versions(versions), "spade_first_obs": observation_hash(first_obs) if first_obs else ""}
    wall = time.perf_counter() - began
    if not samples:  # nothing generated: one masked token keeps verl's shapes (as play_episode does)
        pad = _pad_id(loop)
        empty = TurnSample([pad], [pad], [0.0] if sampling_params.get("logprobs") else None)
        return Episode(empty.prompt_ids, [pad], [0], empty.response_logprobs, 0.0, 0, fault=fault or "no_turn",
                       sandbox_s=sandbox.seconds, wall_s=wall, info=info, samples=[empty])  # fmt: skip
    last = samples[-1]
    return Episode(
        prompt_ids=last.prompt_ids,
        response_ids=last.response_ids,
        response_mask=[1] * len(last.response_ids),
        response_logprobs=last.response_logprobs,
        outcome=0.0 if fault else outcome_reward(reward, terminated, truncated or not terminated),
        turns=len(samples),
        fault=fault,
        truncated_by_length=overflow or cut,
        terminated=bool(terminated) and not fault,
        sandbox_s=sandbox.seconds,
        wall_s=wall,
        info=info,
        samples=samples,
        step_rewards=rewards,
    )
