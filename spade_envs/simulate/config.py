"""``SimulationConfig``: every knob of the curriculum simulator in one frozen dataclass.

The schedule knobs carry the training names (``regen_every``, ``envs_per_regen``, ``agent_rows``,
``plays_per_arm``, ``active_per_regen``, ``memory_replay_fraction``) and the reward and memory knobs are the real
:class:`~spade_envs.design.rewards.RewardConfig` and :class:`~spade_envs.design.memory_record.MemoryConfig`, so a
simulated setting
reads like a training config (the schedule is run by the recipe's own :class:`~spade_envs.curriculum.Curriculum`).
The model knobs (agent and designer stand-ins) are documented with the equations in :mod:`spade_envs.simulate.agent` and
:mod:`spade_envs.simulate.designer`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, fields, replace
from typing import Any

from spade_envs.design.memory_record import MemoryConfig
from spade_envs.design.rewards import RewardConfig
from spade_envs.envs.skills import SKILLS

__all__ = ["SimulationConfig"]

_NESTED = {"reward": RewardConfig, "memory_config": MemoryConfig}
_POSITIVE_INTS = ("steps", "seeds", "regen_every", "envs_per_regen", "agent_rows", "plays_per_arm", "fixed_pool_size")
_NON_NEGATIVE = (
    "hint_strength", "instance_noise", "ability_spread", "agent_lr", "designer_lr",
    "designer_std_lr", "validity_lr", "fixed_std",
)  # fmt: skip
_POSITIVE = ("temperature", "progress_span", "designer_init_std", "designer_min_std", "designer_max_std")
_UNIT = ("win_floor", "partial_credit", "hint_progress", "exemplar_pull", "invalid_rate", "memory_replay_fraction")


@dataclass(frozen=True)
class SimulationConfig:
    """One simulated training run (per seed). Difficulties and abilities share one unit (see ``temperature``).

    Attributes:
        steps: training steps simulated.
        seeds: runs with seeds ``0 .. seeds - 1``; :func:`~spade_envs.simulate.loop.simulate_many` runs them all.
        regen_every: designs every this many steps (step 0 included). As in training, a design is measured and
            rewarded at its design step, enters memory then, and its envs are the live ones from the next step until
            the next generation goes live (``spade.regen_every``).
        envs_per_regen: designer samples per regeneration; design ``i`` builds for the ``i``-th active skill, in
            turn (``spade.envs_per_regen``).
        agent_rows: agent rows of a design step (``spade.agent_rows_per_step``; the games 30B run's 21); other
            steps also fill the ``envs_per_regen // plays_per_arm`` designer rows with agent rows, as the recipe's
            schedule does. Each row plays one env (live envs in turn, or a memory replay) on one instance (seed),
            ``plays_per_arm`` times: one GRPO group.
        plays_per_arm: ``G``: plays of an agent row (``rollout.n``) and plays per arm of the design-time
            measurement (no hint / hint / placebo, on the same ``G`` instances; these plays never train).
        active_per_regen: skills a regeneration designs for, in turn over ``skills`` (``spade.skills.active_per_regen``;
            ``None``: all of them; the games runs: 3).
        skills: skill names; each has its own agent ability and its own designer policy.
        reward: the real designer-reward config; ``reward.variant`` selects the reward being simulated.
        fixed_pool: the fixed-pool baseline (``spade.fixed_env``): no designer; the pool's envs are the live ones
            for the whole run.
        memory: use the environment memory: an agent replay stream and exemplars in the designer "prompt"
            (``spade.memory.enable``; memory still keeps the records either way).
        memory_config: the real memory config (capacity, replay temperature, exemplar bands). Its capacity must
            hold the live envs and a regeneration's designs (never evicted) plus one.
        memory_replay_fraction: share of agent rows that replay an env from memory instead of a live one
            (``spade.memory_replay_fraction``; ignored without ``memory``).
        builtin_difficulty: difficulty of the stand-ins of the built-in envs (one per skill), the live envs of
            step 0 before the first designs go live (not used with ``fixed_pool``).
        lp_fast_ema: weight of the new value in the fast per-skill EMA of admitted designs' win rates (logged as
            the learning-potential gap; ``spade.learning_potential.fast_ema``). The slow EMA's is
            ``reward.lp_slow_ema``, as in the recipe.
        exemplar_pull: ``lambda``: how far positive exemplars pull the designer's proposal towards their mean
            difficulty (0 = exemplars ignored).
        paired: both arms play the same instances at design time; ``False`` gives the hinted arm fresh
            instances (the reference's defect), though the regret code still receives matching seed labels.
        placebo: also play a placebo arm at design time (training's ``spade.hint.placebo``): a content-free hint
            helps the stand-in agent not at all, so it is a second no-hint arm, and regret counts only beyond the
            better of the two (the max of two noisy means biases an honest env's regret down).
        hint_strength: ``H``: ability the privileged hint adds. An env harder than ability + ``H`` + the win
            reach stays unsolvable with the hint.
        hint_progress: ``beta``: share of the not yet achieved progress a hint supplies on a lost episode (the
            hint explains the mechanics even where it cannot make the env winnable).
        partial_credit: ``kappa``: outcome of a lost episode is ``kappa * progress``; 0 gives pure win/loss.
        progress_span: ``D``: progress on a lost episode falls linearly from 1 at ``difficulty = ability`` to 0
            at ``difficulty = ability + D``.
        temperature: ``T``: logistic temperature of the win probability; one ability unit is ``1/T`` logits.
        win_floor: ``epsilon``: the logistic is rescaled so the win probability is exactly 0 (1) when
            ``sigmoid(gap / T)`` is below ``epsilon`` (above ``1 - epsilon``); this bounds what is solvable.
        instance_noise: standard deviation of an instance's difficulty around its env's difficulty.
        initial_ability: mean starting ability over skills.
        ability_spread: standard deviation of the per-skill starting abilities (drawn per seed).
        agent_lr: ``eta``: ability gained per unit of outcome variance in the batch (see the agent module).
        designer_lr: learning rate of the designer's mean difficulty per skill.
        designer_std_lr: learning rate of the log standard deviation of the designer's difficulty per skill.
        designer_init_mean: starting mean difficulty of the designer (below the agent: LLMs write easy games).
        designer_init_std: starting standard deviation of the designer's difficulty.
        designer_min_std: lower clip of the designer's standard deviation.
        designer_max_std: upper clip of the designer's standard deviation.
        invalid_rate: starting probability that the designer writes code that fails validation.
        validity_lr: learning rate of the logit of that probability.
        fixed_pool_size: envs in the fixed pool (spread evenly over skills).
        fixed_mean: mean difficulty of the fixed pool (static; the starting agent wins about half of it).
        fixed_std: standard deviation of the fixed pool's difficulties.
    """

    steps: int = 400
    seeds: int = 5
    regen_every: int = 4
    envs_per_regen: int = 24
    agent_rows: int = 21
    plays_per_arm: int = 8
    active_per_regen: int | None = None
    skills: tuple[str, ...] = tuple(SKILLS["games"])
    reward: RewardConfig = field(default_factory=RewardConfig)
    fixed_pool: bool = False
    memory: bool = True
    memory_config: MemoryConfig = field(default_factory=MemoryConfig)
    memory_replay_fraction: float = 0.15
    builtin_difficulty: float = 0.0
    lp_fast_ema: float = 0.98
    exemplar_pull: float = 0.3
    paired: bool = True
    placebo: bool = True
    hint_strength: float = 1.0
    hint_progress: float = 0.5
    partial_credit: float = 0.3
    progress_span: float = 3.0
    temperature: float = 0.5
    win_floor: float = 0.02
    instance_noise: float = 0.3
    initial_ability: float = 0.0
    ability_spread: float = 0.5
    agent_lr: float = 0.6
    designer_lr: float = 3.0
    designer_std_lr: float = 0.1
    designer_init_mean: float = -1.0
    designer_init_std: float = 1.0
    designer_min_std: float = 0.3
    designer_max_std: float = 3.0
    invalid_rate: float = 0.3
    validity_lr: float = 0.5
    fixed_pool_size: int = 96
    fixed_mean: float = 0.0
    fixed_std: float = 1.0

    def __post_init__(self) -> None:
        object.__setattr__(self, "skills", tuple(self.skills))
        for name in _POSITIVE_INTS:
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ValueError(f"{name} must be an int >= 1, got {value!r}")
        k = self.active_per_regen
        if k is not None and (not isinstance(k, int) or isinstance(k, bool) or k < 1):
            raise ValueError(f"active_per_regen must be an int >= 1 or None, got {k!r}")
        for name in ("fixed_pool", "memory", "paired", "placebo"):
            if not isinstance(getattr(self, name), bool):
                raise ValueError(f"{name} must be a bool, got {getattr(self, name)!r}")
        for f in fields(self):
            value = getattr(self, f.name)
            if f.type == "float" and not (isinstance(value, (int, float)) and not isinstance(value, bool)
                                          and math.isfinite(value)):  # fmt: skip
                raise ValueError(f"{f.name} must be a finite number, got {value!r}")
        for name in _NON_NEGATIVE:
            if getattr(self, name) < 0:
                raise ValueError(f"{name} must be >= 0, got {getattr(self, name)!r}")
        for name in _POSITIVE:
            if getattr(self, name) <= 0:
                raise ValueError(f"{name} must be > 0, got {getattr(self, name)!r}")
        for name in _UNIT:
            if not 0.0 <= getattr(self, name) <= 1.0:
                raise ValueError(f"{name} must be in [0, 1], got {getattr(self, name)!r}")
        if not 0.0 < self.lp_fast_ema <= 1.0:
            raise ValueError(f"lp_fast_ema must be in (0, 1], got {self.lp_fast_ema!r}")
        if not 0.0 < self.win_floor < 0.5:
            raise ValueError(f"win_floor must be in (0, 0.5), got {self.win_floor!r}")
        if self.invalid_rate >= 1.0:
            raise ValueError(f"invalid_rate must be below 1 (some code must be valid), got {self.invalid_rate!r}")
        if not self.designer_min_std <= self.designer_init_std <= self.designer_max_std:
            raise ValueError(
                "need designer_min_std <= designer_init_std <= designer_max_std, got "
                f"{self.designer_min_std!r}, {self.designer_init_std!r}, {self.designer_max_std!r}"
            )
        if (
            not self.skills
            or len(set(self.skills)) != len(self.skills)
            or not all(isinstance(s, str) and s for s in self.skills)
        ):
            raise ValueError(f"skills must be distinct non-empty names, got {self.skills!r}")
        if self.fixed_pool_size < len(self.skills):
            raise ValueError(f"fixed_pool_size ({self.fixed_pool_size}) must give every skill at least one env")
        for name, cls in _NESTED.items():
            if not isinstance(getattr(self, name), cls):
                raise ValueError(f"{name} must be a {cls.__name__}, got {type(getattr(self, name)).__name__}")
        designs = 0 if self.fixed_pool else self.envs_per_regen
        need = max(self.fixed_pool_size if self.fixed_pool else len(self.skills), designs) + designs + 1
        if self.memory_config.capacity < need:
            raise ValueError(f"memory_config.capacity ({self.memory_config.capacity}) must be at least {need}: the "
                             "live envs and the designs about to go live are never evicted")  # fmt: skip

    @property
    def label(self) -> str:
        """What the run is called in CSVs and plots: ``fixed`` for the baseline, else the reward variant."""
        return "fixed" if self.fixed_pool else self.reward.variant

    @property
    def reach(self) -> float:
        """Largest ``difficulty - ability`` gap with a non-zero win probability: ``T * ln((1 - eps) / eps)``."""
        return self.temperature * math.log((1.0 - self.win_floor) / self.win_floor)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any] | None) -> SimulationConfig:
        """Build from a mapping; ``reward`` and ``memory_config`` may be mappings too. Unknown keys are an error."""
        data = dict(data or {})
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise ValueError(f"unknown simulation option(s) {unknown}; known: {sorted(known)}")
        for name, nested in _NESTED.items():
            if isinstance(data.get(name), Mapping):
                data[name] = nested.from_dict(data[name])
        return cls(**data)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self) | {"reward": self.reward.to_dict(), "skills": list(self.skills)}

    def with_updates(self, **changes: Any) -> SimulationConfig:
        """A copy with ``changes``; ``reward`` / ``memory_config`` changes given as mappings update those fields."""
        for name, nested in _NESTED.items():
            if isinstance(changes.get(name), Mapping):
                current = getattr(self, name).to_dict()
                changes[name] = nested.from_dict(current | dict(changes[name]))
        unknown = sorted(set(changes) - {f.name for f in fields(self)})
        if unknown:
            raise ValueError(f"unknown simulation option(s) {unknown}; known: {sorted(f.name for f in fields(self))}")
        return replace(self, **changes)
