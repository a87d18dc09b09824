r"""Play one episode of an environment in-process, and the baseline policies validation needs.

The runtime, not the environment, turns agent text into an action: games get the content of the last
``\\boxed{...}`` (:func:`~spade_envs.contract.extract_command`); tool-use environments get the raw text. Only
trusted code (built-ins, tests) runs here in-process; generated code is played through the sandbox.
"""

from __future__ import annotations

import json
import random
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from spade_envs.contract import (
    ExecutableEnv,
    check_reset_output,
    check_step_output,
    extract_command,
    is_win,
    outcome_reward,
)
from spade_envs.tooluse import ToolUseEnv

__all__ = [
    "EpisodeResult",
    "Policy",
    "do_nothing_policy",
    "play",
    "random_policy",
    "setting_of",
    "solution_policy",
]

#: A policy maps ``(observation, turn index)`` to the agent's full text for that turn.
Policy = Callable[[str, int], str]

_GENERIC_WORDS = ("help", "look", "yes", "no", "up", "down", "left", "right", "go", "submit", "answer", "done", "1")
_TOKEN = re.compile(r"[A-Za-z_][A-Za-z0-9_\-]*|\d+")


@dataclass
class EpisodeResult:
    """What one episode produced. ``outcome`` is the contract's episode reward; ``won`` means outcome 1."""

    outcome: float
    won: bool
    turns: int
    terminated: bool
    truncated: bool
    observations: list[str] = field(default_factory=list)
    actions: list[str] = field(default_factory=list)
    rewards: list[float] = field(default_factory=list)


def setting_of(env: object) -> str:
    """``"tool_use"`` for :class:`ToolUseEnv` instances or subclasses, else ``"games"``."""
    cls = env if isinstance(env, type) else type(env)
    return "tool_use" if issubclass(cls, ToolUseEnv) else "games"


def play(
    env: ExecutableEnv, policy: Policy, seed: int, max_turns: int | None = None, setting: str | None = None
) -> EpisodeResult:
    """Reset ``env`` with ``seed`` and play ``policy`` until the episode ends or the turn limit truncates it.

    ``setting`` defaults to :func:`setting_of` the env; pass it for proxies of sandboxed envs. Every return value
    is checked against the contract; a violation raises :class:`~spade_envs.errors.ContractViolation` (an
    environment fault, never an agent loss).
    """
    obs, _ = check_reset_output(env.reset(seed))
    limit = env.max_turns if max_turns is None else min(env.max_turns, max_turns)
    games = (setting or setting_of(env)) == "games"
    result = EpisodeResult(0.0, False, 0, False, False, observations=[obs])
    reward, terminated, truncated = 0.0, False, False
    for turn in range(limit):
        text = policy(obs, turn)
        action = extract_command(text) if games else text
        obs, reward, terminated, truncated, _ = check_step_output(env.step(action))
        result.actions.append(action)
        result.observations.append(obs)
        result.rewards.append(reward)
        result.turns = turn + 1
        if terminated or truncated:
            break
    truncated = truncated or not terminated
    result.terminated, result.truncated = terminated, truncated
    result.outcome = outcome_reward(reward, terminated, truncated)
    result.won = is_win(result.outcome)
    return result


def solution_policy(actions: list[str], setting: str) -> Policy:
    r"""Replay ``actions`` one per turn (games commands are sent inside ``\\boxed{}``), then send nothing."""

    def policy(_obs: str, turn: int) -> str:
        if turn >= len(actions):
            return ""
        return f"I will do this: \\boxed{{{actions[turn]}}}" if setting == "games" else actions[turn]

    return policy


def do_nothing_policy(setting: str) -> Policy:
    """Games: an empty command every turn. Tool use: claim to be done at once without calling any tool."""
    reply = "\\boxed{}" if setting == "games" else "<answer>done</answer>"
    return lambda _obs, _turn: reply


def random_policy(rng: random.Random, setting: str, tools: list[dict[str, Any]] | None = None) -> Policy:
    """A policy that acts at random with the vocabulary it can see.

    Games: 1-3 tokens drawn from the current observation, a few generic command words and small numbers. Tool use:
    a random tool with random arguments of the right types (enums honoured, strings taken from the observation),
    and now and then an ``<answer>`` made of an observed token. It wins only an environment that any play wins.
    """

    def words(obs: str) -> list[str]:
        return _TOKEN.findall(obs) or list(_GENERIC_WORDS)

    def value(schema: dict[str, Any], vocab: list[str]) -> Any:
        if "enum" in schema:
            return rng.choice(schema["enum"])
        kind = schema.get("type")
        if kind == "integer":
            return rng.randint(0, 100)
        if kind == "number":
            return round(rng.uniform(0, 500), 2)
        if kind == "boolean":
            return rng.random() < 0.5
        if kind == "array":
            return [value(schema.get("items", {"type": "string"}), vocab) for _ in range(rng.randint(1, 2))]
        if kind == "object":
            return {}
        return rng.choice(vocab)

    def game_policy(obs: str, _turn: int) -> str:
        vocab = words(obs) + list(_GENERIC_WORDS) + [str(rng.randint(0, 20))]
        return "\\boxed{" + " ".join(rng.choice(vocab) for _ in range(rng.randint(1, 3))) + "}"

    def tool_policy(obs: str, _turn: int) -> str:
        vocab = words(obs)
        if not tools or rng.random() < 0.15:
            return f"<answer>{rng.choice(vocab + ['done'])}</answer>"
        fn = rng.choice(tools)["function"]
        props = fn["parameters"]["properties"]
        args = {k: value(s, vocab) for k, s in props.items() if k in fn["parameters"]["required"] or rng.random() < 0.5}
        return "<tool_call>" + json.dumps({"name": fn["name"], "arguments": args}) + "</tool_call>"

    return game_policy if setting == "games" else tool_policy
