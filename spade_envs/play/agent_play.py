"""A model behind an OpenAI-compatible endpoint as the Reasoning Agent: a :data:`~spade_envs.envs.episode.Policy`.

Used outside training (``spade-envs run`` and ``generate``); inside training the verl agent loop plays instead.
Native tool calls returned by the endpoint are rendered as ``<tool_call>`` text, which the environment's ``step``
parses, so one conversation format serves every endpoint.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from spade_envs.envs.episode import Policy
from spade_envs.envs.llm import ChatClient
from spade_envs.envs.tooluse import tool_call
from spade_envs.play.prompts import agent_messages

__all__ = ["Sampling", "model_policy"]


@dataclass(frozen=True)
class Sampling:
    """Sampling settings for one role (the reference agent: temperature 0.6, top-p 0.95)."""

    temperature: float = 0.6
    top_p: float = 0.95
    max_tokens: int = 4096

    @classmethod
    def from_dict(cls, data: dict[str, Any] | None) -> Sampling:
        data = dict(data or {})
        unknown = sorted(set(data) - {"temperature", "top_p", "max_tokens"})
        if unknown:
            raise ValueError(f"unknown sampling option(s) {unknown}; known: ['max_tokens', 'temperature', 'top_p']")
        return cls(**data)


def model_policy(
    client: ChatClient,
    setting: str,
    *,
    tools: list[dict[str, Any]] | None = None,
    hint: str | None = None,
    sampling: Sampling | None = None,
) -> Policy:
    """A policy holding one conversation: create one per episode.

    Turn 0 opens the conversation (with ``hint`` on the first observation, if given); later turns append the
    observation as a user message.
    """
    sampling = sampling or Sampling()
    history: list[dict[str, Any]] = []

    def policy(observation: str, turn: int) -> str:
        if turn == 0:
            history[:] = agent_messages(setting, observation, hint)
        else:
            history.append({"role": "user", "content": observation})
        result = client.complete(
            history,
            temperature=sampling.temperature,
            top_p=sampling.top_p,
            max_tokens=sampling.max_tokens,
            tools=tools if setting == "tool_use" else None,
        )
        text = result.text
        if result.tool_calls:
            calls = [
                tool_call(c["name"], **(c["arguments"] if isinstance(c["arguments"], dict) else {}))
                for c in result.tool_calls
            ]
            text = "\n".join(([text] if text.strip() else []) + calls)
        history.append({"role": "assistant", "content": text})
        return text

    return policy
