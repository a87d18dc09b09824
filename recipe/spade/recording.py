"""Glue from the loops and the trainer to the run record (``spade.record``; ``spade_envs/browse/run_record.py``).

The loops already hold what the record keeps (the design's text, its verdict, the hint, the measurement episodes);
here it becomes entries: transcripts are decoded from an episode's token streams (model tokens are the agent's
turns, masked tokens the env's observations and tool responses), and the trainer's per-row rewards and advantages
become one ``scores`` entry per step. The env-pool actor writes them (with the caps applied).
"""

from __future__ import annotations

from typing import Any

import torch

from recipe.spade.play import Episode
from recipe.spade.turn_batches import is_episode_row
from spade_envs.design.extract import extract_code

__all__ = ["ARMS", "design_entry", "episode_entry", "scores_entry", "transcript"]

#: The measurement arms, in the order the designer loop plays them.
ARMS = ("no_hint", "hint", "placebo")


def transcript(tokenizer: Any, episode: Episode, seed: int) -> dict[str, Any]:
    """One episode as turns: ``prompt`` (instructions and first observation), then ``agent`` / ``env`` in turn.

    ``rewards`` holds the env's reward for each agent turn it acted on (an agent turn also carries its own). In
    thinking mode (one sample per turn) the last turn's prompt holds the whole history, so it is the prompt.
    """
    if episode.samples:
        last = episode.samples[-1]
        prompt_ids, pieces = last.prompt_ids, [("agent", last.response_ids)]
    else:
        prompt_ids, pieces = episode.prompt_ids, _runs(episode.response_ids, episode.response_mask)
    turns = [{"role": "prompt", "text": tokenizer.decode(prompt_ids, skip_special_tokens=True)}]
    rewards = iter(episode.step_rewards if not episode.samples else ())
    for role, ids in pieces:  # each agent turn the env acted on carries the env's reward for it
        turn = {"role": role, "text": tokenizer.decode(ids, skip_special_tokens=True)}
        turns.append({**turn, "reward": next(rewards, None)} if role == "agent" else turn)
    return {"seed": seed, "outcome": episode.outcome, "fault": episode.fault, "agent_turns": episode.turns,
            "terminated": episode.terminated, "rewards": list(episode.step_rewards), "turns": turns}  # fmt: skip


def _runs(ids: list[int], mask: list[int]) -> list[tuple[str, list[int]]]:
    """Split a response into runs of model tokens (mask 1: ``agent``) and env tokens (mask 0: ``env``)."""
    runs: list[tuple[str, list[int]]] = []
    for token, m in zip(ids, mask):
        role = "agent" if m else "env"
        if runs and runs[-1][0] == role:
            runs[-1][1].append(token)
        else:
            runs.append((role, [token]))
    return runs


def design_entry(step: int, design: int, task: dict[str, Any], text: str | None, outcome: dict[str, Any],
                 trace: dict[str, Any], tokenizer: Any, per_arm: int) -> dict[str, Any]:  # fmt: skip
    """The record of one design, admitted or not (``trace``: what ``_measure`` kept of the hint and the plays)."""
    source, source_kind = outcome.get("source"), "admitted"
    if source is None and text is not None:
        extracted = extract_code(text).code
        source, source_kind = (extracted, "extracted") if extracted is not None else (text, "raw")
    measure = outcome.get("measure") or {}
    transcripts = {}
    for arm, episodes in zip(ARMS, trace.get("by_arm") or ()):
        seeds = trace.get("seeds") or []
        transcripts[arm] = [transcript(tokenizer, e, s) for e, s in list(zip(episodes, seeds))[:per_arm]]
    return {"kind": "design", "step": step, "design": design, "skill": task["skill"], "doc_id": task.get("doc_id"),
            "doc_head": task.get("document"),  # cut to doc_chars by the writer, which says how much it cut
            "verdict": "admitted" if outcome["valid"] else "rejected", "code": outcome.get("code"),
            "reason": trace.get("reason", ""), "excluded": bool(outcome.get("excluded")), "source": source,
            "source_kind": source_kind if source is not None else None, "hint_text": trace.get("hint_text"),
            "hint": trace.get("hint"), "hint_failure": outcome.get("hint_failure"),
            "hint_reason": trace.get("hint_reason", ""), "seeds": trace.get("seeds"),
            "arms": {arm: measure.get(arm) or [] for arm in ARMS} if measure else None,
            "win_rate": outcome.get("win_rate"), "regret": outcome.get("regret"),
            "raw_regret": outcome.get("raw_regret"), "transcripts": transcripts}  # fmt: skip


def episode_entry(step: int, slot: int, task: dict[str, Any], episode: Episode, tokenizer: Any) -> dict[str, Any]:
    """A training episode of agent row ``slot`` (its first session), for the record's per-step sample."""
    return {"kind": "episode", "step": step, "slot": slot, "env_id": task["env_id"], "skill": task["skill"],
            "seed": task["seed"], "outcome": episode.outcome, "fault": episode.fault,
            "transcript": transcript(tokenizer, episode, task["seed"])}  # fmt: skip


def scores_entry(keys: list[str], extra: list[dict], real: list[bool], scores: list[float],
                 advantages: torch.Tensor, mask: torch.Tensor) -> dict[str, Any] | None:  # fmt: skip
    """The step's designer rewards and advantages per design, and the agent episodes' per env and seed."""
    designer, agent, step = [], [], None
    for i, e in enumerate(extra):
        if not real[i] or not is_episode_row(e):
            continue
        step = e.get("spade_step", step)
        values = advantages[i][mask[i].bool()]
        row = {"reward": float(scores[i]), "advantage": float(values[0]) if len(values) else 0.0,
               "excluded": bool(e.get("spade_excluded"))}  # fmt: skip
        if e.get("spade_role") == "designer":
            designer.append({"design": e.get("spade_design"), **row})
        elif e.get("spade_role") == "agent":
            agent.append({"env_id": e.get("spade_env_id"), "seed": e.get("spade_seed"),
                          "session": keys[i].rsplit("_", 2)[1], **row})  # fmt: skip
    if step is None:
        return None
    return {"kind": "scores", "step": int(step), "designer": designer, "agent": agent}
