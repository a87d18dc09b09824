"""Episodes as training plays them: each the first episode of a fresh sandbox worker, in training's call order.

Every recipe play, training or measurement, loads the env in a new worker, calls ``reset(seed)`` (and ``tools()``
for tool use) and then ``step``: no ``solution()``, no probe, no earlier episode. Validation's own checks run many
episodes per worker, so an env with a class-level counter or one that watches the call order can be honest there
and a coin flip (or a free win) in training. :func:`first_episode_plan` lists validation's solution, do-nothing and
random episodes; :func:`play_first` plays one of them the way training would, so validation can compare transcripts
(``spade_envs.design.validate``, failure code ``first_episode_differs``).
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from typing import Any

from spade_envs.envs.episode import EpisodeResult, Policy, do_nothing_policy, play, random_policy, solution_policy
from spade_envs.sandbox.client import RemoteEnv
from spade_envs.sandbox.pool import WorkerPool

__all__ = ["first_episode_plan", "play_first"]


def first_episode_plan(
    setting: str,
    seeds: Sequence[int],
    random_episodes: int,
    solutions: Mapping[int, list[str]],
    tools: list[dict[str, Any]] | None,
) -> list[tuple[tuple, str, Policy]]:
    """``(transcript key, what, policy)`` of validation's solution, do-nothing and random episodes, in that order.

    The keys are those validation records its in-worker transcripts under (``("solution", seed)``,
    ``("idle", seed)``, ``("random", seed, episode)``); the random policies are seeded as validation seeds them.
    """
    plan: list[tuple[tuple, str, Policy]] = [
        (("solution", s), "solution", solution_policy(solutions[s], setting)) for s in seeds
    ]
    plan += [(("idle", s), "do-nothing", do_nothing_policy(setting)) for s in seeds]
    plan += [(("random", s, e), "random-agent", random_policy(random.Random(s * 1000 + e), setting, tools))
             for s in seeds for e in range(random_episodes)]  # fmt: skip
    return plan


def play_first(
    source: str,
    pool: WorkerPool,
    policy: Policy,
    seed: int,
    max_turns: int,
    setting: str,
    deadline: float | None = None,
) -> EpisodeResult:
    """Play ``policy`` on ``seed`` as the first episode of a fresh worker: load, ``reset``, ``tools()``, steps."""
    env = RemoteEnv(source, pool)
    try:
        after = env.tools if setting == "tool_use" else None
        return play(env, policy, seed, max_turns, setting=setting, deadline=deadline, after_reset=after)
    finally:
        env.close()
