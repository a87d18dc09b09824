r"""One RLVE problem as a SPADE environment: source text that plays an RLVE env at one difficulty in the sandbox.

:func:`rlve_source` returns ordinary environment source (a class ``RLVEProblemEnv``), so the env pool, the agent
loop and validation run it like any designed env: in a sandbox worker, never in the trainer. Inside the worker it
imports only the one RLVE module it needs from the read-only venv (``Gym.environments`` would load all ~400, and
``Gym.environment`` imports torch only to seed it: a no-op ``torch`` stands in, since no RLVE env draws from torch).

Contract mapping (single turn, as in RLVE):

* ``reset(seed)``: the parameter controller is advanced ``difficulty`` times (RLVE's difficulty level), one of its
  parameter dicts is drawn with ``random.Random(seed)``, and ``generator(seed, parameter)`` builds the problem;
  the observation is RLVE's ``prompt_generator()``. A failed generation retries with seeds drawn from the same
  ``Random`` (up to 3 tries), so a seed always gives the same problem.
* ``step(answer)``: the answer (the content of the agent's last ``\boxed{}``) is wrapped in RLVE's answer markers
  and scored by RLVE's own ``verifier``; the episode ends. Reward 1.0 when RLVE counts it as passing
  (``score >= passing_reward_threshold``), else RLVE's score in [-1, 1) (the outcome clamps it to [0, 1]).
* ``solution()``: RLVE's ``reference_answer`` for the problem (used by validation and tests only).
"""

from __future__ import annotations

from dataclasses import dataclass

from spade_envs.envs.spec import EnvSpec
from spade_envs.rlve.catalog import RLVEEntry

__all__ = ["RLVEInstance", "rlve_source"]

_TEMPLATE = '''\
"""RLVE environment {env_id} at difficulty {difficulty}, played through SPADE's contract (spade_envs.rlve)."""

import importlib
import os
import random
import sys
import types

ENV_ID = {env_id!r}
DIFFICULTY = {difficulty!r}
_ENV = ({env_module!r}, {env_class!r})
_CONTROLLER = ({controller_module!r}, {controller_class!r})
_MARKERS = ("<answer>", "</answer>")
_GENERATE_TIMEOUT_S = {generate_timeout_s!r}
_TRIES = 3


def _rlve_class(module, name):
    """Import one RLVE module without the package registries (they import every environment)."""
    if "torch" not in sys.modules:  # Gym.environment imports torch only to seed it; no RLVE env uses it
        stub = types.ModuleType("torch")
        stub.manual_seed = lambda seed: None
        stub.cuda = types.SimpleNamespace(manual_seed_all=lambda seed: None)
        stub.backends = types.SimpleNamespace(cudnn=types.SimpleNamespace())
        sys.modules["torch"] = stub
    gym = importlib.import_module("Gym")
    for sub in ("environments", "parameter_controllers"):
        name_ = "Gym." + sub
        if name_ not in sys.modules:
            package = types.ModuleType(name_)
            package.__path__ = [os.path.join(gym.__path__[0], sub)]
            sys.modules[name_] = package
    return getattr(importlib.import_module(module), name)


class RLVEProblemEnv:
    """One RLVE problem per episode at a fixed difficulty; a single answer ends it."""

    max_turns = 1

    def __init__(self):
        self._problem_class = _rlve_class(*_ENV)
        controller = _rlve_class(*_CONTROLLER)()
        for _ in range(DIFFICULTY):
            controller.update()
        self._parameters = list(controller.get_parameter_list())
        if not self._parameters:
            raise ValueError(ENV_ID + ": the parameter controller lists no parameters at this difficulty")
        self._problem = None
        self._over = True

    def reset(self, seed=None):
        rng = random.Random(0 if seed is None else int(seed))
        problem_seed = 0 if seed is None else int(seed)
        for _ in range(_TRIES):
            parameter = rng.choice(self._parameters)
            problem = self._problem_class(answer_markers=_MARKERS)
            if problem.generator(seed=problem_seed, parameter=parameter, timeout_second=_GENERATE_TIMEOUT_S):
                break
            problem_seed = rng.randrange(2**31)
        else:
            raise RuntimeError(ENV_ID + ": RLVE could not generate a problem for seed " + repr(seed))
        self._problem, self._over = problem, False
        info = {{"rlve_env": ENV_ID, "difficulty": DIFFICULTY, "problem_seed": problem_seed}}
        return problem.prompt_generator(), info

    def step(self, action):
        if self._problem is None or self._over:
            return "The episode is over.", 0.0, True, False, {{}}
        self._over = True
        text = str(action)
        answer = text if _MARKERS[0] in text and _MARKERS[1] in text else _MARKERS[0] + text + _MARKERS[1]
        verdict = self._problem.verifier(answer)
        score, passed = float(verdict["reward"]), bool(verdict["accuracy"])
        info = {{"rlve_score": score, "rlve_accuracy": int(passed), "rlve_format": int(verdict["format_score"])}}
        if passed:
            return "Correct.", 1.0, True, False, info
        return "Not correct (RLVE score " + format(score, ".3g") + ").", score, True, False, info

    def solution(self):
        if self._problem is None:
            return []
        answer = self._problem.parameter.get("reference_answer")
        return [] if answer is None else [str(answer)]
'''


def rlve_source(entry: RLVEEntry, difficulty: int, generate_timeout_s: int = 10) -> str:
    """Environment source that plays ``entry`` at ``difficulty`` (RLVE's level: controller updates from level 0).

    ``generate_timeout_s`` is RLVE's own generation timeout; keep it under the sandbox's ``soft_timeout_s``
    if generation may be slow, or RLVE's generator swallows the alarm and reports a failed generation.
    """
    if isinstance(difficulty, bool) or not isinstance(difficulty, int) or difficulty < 0:
        raise ValueError(f"difficulty must be an int >= 0, got {difficulty!r}")
    if isinstance(generate_timeout_s, bool) or not isinstance(generate_timeout_s, int) or generate_timeout_s < 1:
        raise ValueError(f"generate_timeout_s must be an int >= 1, got {generate_timeout_s!r}")
    return _TEMPLATE.format(
        env_id=entry.env_id,
        difficulty=difficulty,
        env_module=entry.env_module,
        env_class=entry.env_class,
        controller_module=entry.controller_module,
        controller_class=entry.controller_class,
        generate_timeout_s=generate_timeout_s,
    )


@dataclass(frozen=True)
class RLVEInstance:
    """One playable RLVE problem: env id, difficulty and seed. A GRPO group plays one instance (same seed).

    ``source`` goes to the sandbox (``RemoteEnv(instance.source, pool)``), then
    ``reset(instance.seed)``. ``key`` names the (env, difficulty) pair, e.g. ``"rlve:Sorting@3"``, for
    bookkeeping; the source is the same for every seed of one key.
    """

    env_id: str
    difficulty: int
    seed: int
    source: str

    @property
    def key(self) -> str:
        return f"rlve:{self.env_id}@{self.difficulty}"

    def spec(self) -> EnvSpec:
        """The (env, difficulty) pair as an :class:`EnvSpec` (id ``rlve_<env>_d<level>``, skill = the RLVE id)."""
        return EnvSpec(
            f"rlve_{self.env_id}_d{self.difficulty}",
            "games",
            self.env_id,
            self.source,
            metadata={"rlve_env": self.env_id, "difficulty": self.difficulty},
        )
