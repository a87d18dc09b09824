"""Gymnasium view of a SPADE environment: ``Text`` spaces and gymnasium seeding.

The built-ins register themselves under this view (``spade_envs.builtin.register_builtins``, run by
``import spade_envs``), so ``gymnasium.make("spade_envs/VaultCodeEnv-v0")`` works. The adapter runs the environment
in-process: use it for trusted code only; generated code
goes through the sandbox's proxy, which exposes the same spaces.
"""

from __future__ import annotations

import string
from typing import Any

import gymnasium
from gymnasium import spaces

from spade_envs.envs.contract import check_reset_output, check_step_output, extract_command
from spade_envs.envs.episode import setting_of

__all__ = ["ACTION_MAX_CHARS", "OBSERVATION_CHARSET", "OBSERVATION_MAX_CHARS", "TextEnv"]

#: Characters observations and actions may contain: printable ASCII, Latin-1 and Latin Extended-A letters, common
#: typographic punctuation, arrows, box drawing and block elements (grids and maps drawn by designers).
OBSERVATION_CHARSET: str = (
    string.printable
    + "".join(chr(c) for c in range(0xA0, 0x180))
    + "\u2013\u2014\u2018\u2019\u201c\u201d\u2022\u2026\u20ac\u2190\u2191\u2192\u2193\u2713\u2717"
    + "".join(chr(c) for c in range(0x2500, 0x25A0))
)
OBSERVATION_MAX_CHARS = 32_768
ACTION_MAX_CHARS = 4_096


class TextEnv(gymnasium.Env[str, str]):
    r"""A SPADE environment as a ``gymnasium.Env`` with text observations and text actions.

    ``reset(seed=None)`` follows gymnasium: with no seed it draws one from the env's own ``np_random``, so a seeded
    reset followed by unseeded ones is reproducible. Game actions are agent text: the command is extracted from its
    last ``\\boxed{...}`` exactly as in training; tool-use actions are passed through raw. ``step`` returns the
    environment's own reward; :func:`~spade_envs.envs.contract.outcome_reward` turns the last one into the outcome.
    """

    metadata = {"render_modes": []}

    def __init__(self, env: Any, max_turns: int | None = None, setting: str | None = None) -> None:
        """Wrap an environment class (instantiated here) or instance; ``setting`` defaults to the env's own."""
        self.env = env() if isinstance(env, type) else env
        self.setting = setting or setting_of(env)
        self.max_turns = int(max_turns if max_turns is not None else self.env.max_turns)
        self.observation_space = spaces.Text(max_length=OBSERVATION_MAX_CHARS, charset=OBSERVATION_CHARSET)
        self.action_space = spaces.Text(max_length=ACTION_MAX_CHARS, charset=string.printable)
        self._turn = 0

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[str, dict[str, Any]]:
        super().reset(seed=seed)
        episode_seed = seed if seed is not None else int(self.np_random.integers(0, 2**31 - 1))
        self._turn = 0
        obs, info = check_reset_output(self.env.reset(episode_seed))
        return obs, {**info, "episode_seed": episode_seed, "setting": self.setting}

    def step(self, action: str) -> tuple[str, float, bool, bool, dict[str, Any]]:
        command = extract_command(action) if self.setting == "games" else action
        obs, reward, terminated, truncated, info = check_step_output(self.env.step(command))
        self._turn += 1
        if not terminated and self._turn >= self.max_turns:
            truncated = True
        return obs, reward, terminated, truncated, info
