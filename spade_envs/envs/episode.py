r"""Play one episode of an environment, and the baseline policies validation needs.

The runtime, not the environment, turns agent text into an action: games get the content of the last
``\\boxed{...}`` (:func:`~spade_envs.envs.contract.extract_command`); tool-use environments get the raw text. Only
trusted code (built-ins, tests) runs here in-process; generated code is played through the sandbox proxy.

Every episode is bounded on the host whatever the env declares: at most ``min(env.max_turns, max_turns)`` turns
(:func:`turn_limit`), actions of at most :data:`MAX_ACTION_CHARS`, observations kept up to ``keep_chars`` (the
rest is only hashed), and an optional wall-clock ``deadline``.
"""

from __future__ import annotations

import hashlib
import json
import math
import random
import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from spade_envs.envs.contract import (
    ExecutableEnv,
    check_reset_output,
    check_step_output,
    extract_command,
    is_win,
    outcome_reward,
)
from spade_envs.envs.errors import ContractViolation, SpadeEnvError
from spade_envs.envs.tooluse import ToolUseEnv

__all__ = [
    "MAX_ACTION_CHARS",
    "EpisodeDeadline",
    "EpisodeResult",
    "Policy",
    "check_tools",
    "command_text",
    "do_nothing_policy",
    "observation_hash",
    "play",
    "random_policy",
    "setting_of",
    "solution_policy",
    "turn_limit",
]

#: A policy maps ``(observation, turn index)`` to the agent's full text for that turn.
Policy = Callable[[str, int], str]

#: Longest action the runtime sends to ``step``; longer agent actions are cut, longer solution actions rejected.
MAX_ACTION_CHARS = 16_384
#: Observation characters an :class:`EpisodeResult` keeps; later observations are hashed, not stored.
KEEP_CHARS = 1 << 20

_GENERIC_WORDS = ("help", "look", "yes", "no", "up", "down", "left", "right", "go", "submit", "answer", "done", "1")
_TOKEN = re.compile(r"[A-Za-z_][A-Za-z0-9_\-]*|\d+")


class EpisodeDeadline(SpadeEnvError):
    """An episode ran past its wall-clock deadline (slow steps that each stay under the call timeout)."""

    kind = "episode_deadline"


@dataclass
class EpisodeResult:
    """What one episode produced. ``outcome`` is the contract's episode reward; ``won`` means outcome 1.

    ``first_obs_hash`` identifies the instance the agent saw (paired arms must agree on it);
    ``transcript_hash`` covers every action, observation, reward and flag (two workers must agree on it).
    """

    outcome: float
    won: bool
    turns: int
    terminated: bool
    truncated: bool
    observations: list[str] = field(default_factory=list)
    actions: list[str] = field(default_factory=list)
    rewards: list[float] = field(default_factory=list)
    first_obs_hash: str = ""
    transcript_hash: str = ""
    observations_cut: bool = False


def observation_hash(observation: str) -> str:
    """A short, stable fingerprint of an observation (first 16 hex digits of its sha256)."""
    return hashlib.sha256(observation.encode("utf-8", "surrogatepass")).hexdigest()[:16]


def turn_limit(declared: Any, cap: int | None = None) -> int:
    """``min(declared, cap)`` as an int; a declared limit that is not a positive finite number is a contract fault.

    Huge declarations (``2**63``, ``1e12``, a float on the wire) cost nothing: only the cap is ever iterated.
    """
    if isinstance(declared, bool) or not isinstance(declared, (int, float)):
        raise ContractViolation(f"max_turns must be a positive int, got {type(declared).__name__}")
    if isinstance(declared, float) and not math.isfinite(declared) or declared < 1:
        raise ContractViolation(f"max_turns must be a positive int, got {declared!r}")
    limit = int(declared) if cap is None else min(int(declared), int(cap))
    return max(1, limit)


def setting_of(env: object) -> str:
    """``"tool_use"`` for :class:`ToolUseEnv` instances or subclasses, else ``"games"``."""
    cls = env if isinstance(env, type) else type(env)
    return "tool_use" if issubclass(cls, ToolUseEnv) else "games"


def play(
    env: ExecutableEnv,
    policy: Policy,
    seed: int,
    max_turns: int | None = None,
    setting: str | None = None,
    *,
    deadline: float | None = None,
    keep_chars: int = KEEP_CHARS,
    after_reset: Callable[[], object] | None = None,
) -> EpisodeResult:
    """Reset ``env`` with ``seed`` and play ``policy`` until the episode ends or the turn limit truncates it.

    ``after_reset`` runs between ``reset`` and the first step (a tool-use episode in training asks for ``tools()``
    there), so validation can replay training's exact call order.

    ``setting`` defaults to :func:`setting_of` the env; pass it for proxies of sandboxed envs. ``deadline`` is a
    :func:`time.monotonic` instant; past it :class:`EpisodeDeadline` is raised. Every return value is checked
    against the contract; a violation raises :class:`~spade_envs.envs.errors.ContractViolation` (an environment
    fault, never an agent loss).
    """
    obs, _ = check_reset_output(env.reset(seed))
    if after_reset is not None:
        after_reset()
    limit = turn_limit(env.max_turns, max_turns)
    games = (setting or setting_of(env)) == "games"
    digest = hashlib.sha256(obs.encode("utf-8", "surrogatepass"))
    result = EpisodeResult(0.0, False, 0, False, False, observations=[obs], first_obs_hash=observation_hash(obs))
    kept = len(obs)
    reward, terminated, truncated = 0.0, False, False
    for turn in range(limit):
        if deadline is not None and time.monotonic() > deadline:
            raise EpisodeDeadline(f"the episode ran past its wall-clock deadline after {turn} turns")
        text = policy(obs, turn)
        action = (extract_command(text) if games else text)[:MAX_ACTION_CHARS]
        obs, reward, terminated, truncated, _ = check_step_output(env.step(action))
        step = json.dumps([action, obs, reward, terminated, truncated], ensure_ascii=True)
        digest.update(step.encode("ascii"))
        result.actions.append(action)
        result.rewards.append(reward)
        kept += len(obs)
        if kept <= keep_chars:
            result.observations.append(obs)
        else:
            result.observations_cut = True
        result.turns = turn + 1
        if terminated or truncated:
            break
    truncated = truncated or not terminated
    result.terminated, result.truncated = terminated, truncated
    result.outcome = outcome_reward(reward, terminated, truncated)
    result.won = is_win(result.outcome)
    result.transcript_hash = digest.hexdigest()[:32]
    return result


def command_text(action: str) -> str | None:
    r"""Agent text from which the runtime extracts exactly ``action`` (stripped), or ``None`` if none exists.

    ``\\boxed{action}`` when that round-trips, else the bare action (``b}`` cannot be boxed, but an agent can send
    it as plain text). Validation replays solutions through this, so it admits exactly what an agent can win.
    """
    for text in (f"\\boxed{{{action}}}", action):
        if extract_command(text) == action.strip():
            return text
    return None


def solution_policy(actions: list[str], setting: str) -> Policy:
    r"""Replay ``actions`` one per turn (games: as text an agent could send, :func:`command_text`), then nothing."""

    def policy(_obs: str, turn: int) -> str:
        if turn >= len(actions):
            return ""
        if setting != "games":
            return actions[turn]
        text = command_text(actions[turn])
        if text is None:
            return actions[turn]
        return f"I will do this: {text}" if text.startswith("\\boxed") else text

    return policy


def do_nothing_policy(setting: str) -> Policy:
    """Games: an empty command every turn. Tool use: claim to be done at once without calling any tool."""
    reply = "\\boxed{}" if setting == "games" else "<answer>done</answer>"
    return lambda _obs, _turn: reply


def check_tools(tools: Any) -> str | None:
    """Why ``tools`` is not a list of well-formed OpenAI function schemas, or ``None`` when it is."""
    if not isinstance(tools, list):
        return f"tools() must return a list, got {type(tools).__name__}"
    for i, tool in enumerate(tools):
        fn = tool.get("function") if isinstance(tool, dict) else None
        if not isinstance(fn, dict) or not isinstance(fn.get("name"), str) or not fn["name"]:
            return f"tools()[{i}] is not {{'type': 'function', 'function': {{'name': str, ...}}}}"
        params = fn.get("parameters", {"properties": {}, "required": []})
        props = params.get("properties") if isinstance(params, dict) else None
        required = params.get("required", []) if isinstance(params, dict) else None
        if not isinstance(props, dict) or not all(isinstance(v, dict) for v in props.values()):
            return f"tool {fn['name']!r}: parameters.properties must map names to schema objects"
        if not isinstance(required, list) or not all(isinstance(r, str) for r in required):
            return f"tool {fn['name']!r}: parameters.required must be a list of names"
        for name, schema in props.items():
            enum = schema.get("enum")
            if enum is not None and (not isinstance(enum, list) or not enum):
                return f"tool {fn['name']!r}: parameter {name!r} has an enum that is not a non-empty list"
    return None


def random_policy(rng: random.Random, setting: str, tools: list[dict[str, Any]] | None = None) -> Policy:
    """A policy that acts at random with the vocabulary it can see.

    Games: 1-3 tokens drawn from the current observation, a few generic command words and small numbers. Tool use:
    a random tool with random arguments of the right types (enums honoured, strings taken from the observation),
    and now and then an ``<answer>`` made of an observed token. It wins only an environment that any play wins.
    Malformed tool schemas (:func:`check_tools`) are never called; validation rejects them before.
    """
    usable = list(tools) if tools and check_tools(list(tools)) is None else []

    def words(obs: str) -> list[str]:
        return _TOKEN.findall(obs[:MAX_ACTION_CHARS]) or list(_GENERIC_WORDS)

    def value(schema: Any, vocab: list[str], depth: int = 0) -> Any:
        schema = schema if isinstance(schema, dict) else {}
        if isinstance(schema.get("enum"), list) and schema["enum"]:
            return rng.choice(schema["enum"])
        kind = schema.get("type")
        if kind == "integer":
            return rng.randint(0, 100)
        if kind == "number":
            return round(rng.uniform(0, 500), 2)
        if kind == "boolean":
            return rng.random() < 0.5
        if kind == "array" and depth < 3:
            return [value(schema.get("items"), vocab, depth + 1) for _ in range(rng.randint(1, 2))]
        if kind in ("object", "array"):
            return {} if kind == "object" else []
        return rng.choice(vocab)

    def game_policy(obs: str, _turn: int) -> str:
        vocab = words(obs) + list(_GENERIC_WORDS) + [str(rng.randint(0, 20))]
        return "\\boxed{" + " ".join(rng.choice(vocab) for _ in range(rng.randint(1, 3))) + "}"

    def tool_policy(obs: str, _turn: int) -> str:
        vocab = words(obs)
        if not usable or rng.random() < 0.15:
            return f"<answer>{rng.choice(vocab + ['done'])}</answer>"
        fn = rng.choice(usable)["function"]
        params = fn.get("parameters", {"properties": {}, "required": []})
        required = params.get("required", [])
        args = {k: value(s, vocab) for k, s in params["properties"].items() if k in required or rng.random() < 0.5}
        return "<tool_call>" + json.dumps({"name": fn["name"], "arguments": args}) + "</tool_call>"

    return game_policy if setting == "games" else tool_policy
