"""The simulated self-play loop: the recipe's curriculum state machine, driven by stand-ins for the model.

The env pool's state and its transitions are the recipe's own :class:`~spade_envs.curriculum.Curriculum` (memory,
live and next-generation envs, play windows, skill rotation, learning-potential EMAs, eviction); this module only
plays the roles of the model, in the recipe's call order. One step ``t`` (``R = regen_every``, ``G =
plays_per_arm``):

1. **Design** when ``t % R == 0`` (not for the fixed pool): design ``i`` builds for
   :meth:`Curriculum.design_skill` (the active skills in turn, as the recipe's design tasks); the designer stand-in
   proposes (positive exemplars from the real :meth:`EnvMemory.exemplars` pull the proposal when memory is on). A
   valid design is measured at once on ``G`` paired instances without the hint, with it and with the placebo (fresh
   instances for the hinted arm when ``paired`` is off); its reward is
   :func:`~spade_envs.design.rewards.designer_reward`
   on a :class:`~spade_envs.design.rewards.WindowStats` of those arms, as the recipe's reward manager scores it (the
   skill's slow EMA as the design task saw it), and :func:`~spade_envs.design.rewards.credited_regret` is the regret
   memory keeps. :meth:`Curriculum.register_design` admits it into memory and the next generation (at design time,
   as in a run); an invalid design gets :func:`~spade_envs.design.rewards.failure_penalty`.
   :func:`~spade_envs.design.rewards.designer_advantages` centres the step's rewards per skill and the designer takes
   its
   step (the recipe trains designer samples in the step that made them).
2. **Play**: agent row ``s`` plays :meth:`Curriculum.agent_task` (live envs in turn, or a memory replay), ``G``
   sessions on one instance; :meth:`Curriculum.record_plays` reports them (:meth:`Curriculum.record_play` of each,
   with one memory update), re-scoring the env from its play window.
3. **Learn**: the agent updates from the step's groups; :meth:`Curriculum.end_step` folds the step's admitted
   designs into the EMAs and returns the run's step metrics (``spade/memory/evictions``, ``spade/live_envs``, ...).

The envs designed at step ``K`` are live from step ``K + 1`` (the first task of a step promotes them); step 0 plays
the built-in stand-ins. Randomness comes from four streams spawned from the seed (agent start, design, play,
memory) and the curriculum's own seeded RNGs, so a run is a pure function of ``(config, seed)``; the curriculum's
seed secret is derived from the seed too (nothing secret: the stand-ins run no generated code, and the instances
they play are labels, not seeds).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any

import numpy as np

from spade_envs.curriculum import Curriculum, CurriculumConfig, seed_memory
from spade_envs.design.memory import EnvMemory
from spade_envs.design.rewards import (
    SkillEMA,
    WindowStats,
    credited_regret,
    designer_advantages,
    designer_reward,
    failure_penalty,
)
from spade_envs.simulate.agent import Agent, win_probability
from spade_envs.simulate.config import SimulationConfig
from spade_envs.simulate.designer import FixedPool, GaussianDesigner, sim_spec

__all__ = ["Run", "Simulation", "StepMetrics", "simulate", "simulate_many"]

_NAN = float("nan")
#: Standard normal quantiles at (i + 0.5) / 8: the instance offsets the expected win rate of a live env averages over.
_QUANTILES = np.array([-1.534, -0.887, -0.489, -0.157, 0.157, 0.489, 0.887, 1.534])


@dataclass(frozen=True)
class StepMetrics:
    """What one step looked like; one CSV row. NaN where a quantity does not exist yet (or at all).

    Attributes:
        step: training step.
        seed: run seed.
        variant: the run's label (reward variant, or ``fixed``).
        win_rate: share of this step's agent plays of live envs that were won (replays excluded; what the memory
            and the rewards call the win rate: partial credit is no win).
        frac_in_band: share of live envs whose expected no-hint win probability (model truth) lies in the plateau
            band ``[plateau_low, plateau_high]``.
        frac_unsolvable: share of live envs harder than ``ability + hint_strength + reach``: unsolvable with hint.
        difficulty: mean difficulty of the live envs.
        ability: the agent's mean ability over skills (before this step's update).
        designer_mean: the designer's mean difficulty over skills (the pool's mean for ``fixed``).
        validity: share of the latest regeneration's designer samples that were valid (NaN for ``fixed``).
        invalid_propensity: the designer's mean probability of writing invalid code.
        designer_reward: mean designer reward of the latest regeneration, penalties included (NaN for ``fixed``).
        regret: mean regret of the live envs as memory holds it (credited at design time: gates applied).
        replay_win_rate: share of this step's plays of replayed envs that were won.
        memory_size: records in memory.
        live_envs: live envs this step (the curriculum's ``spade/live_envs``).
        evictions: records evicted from memory by this step's designs (``spade/memory/evictions``).
    """

    step: int
    seed: int
    variant: str
    win_rate: float
    frac_in_band: float
    frac_unsolvable: float
    difficulty: float
    ability: float
    designer_mean: float
    validity: float
    invalid_propensity: float
    designer_reward: float
    regret: float
    replay_win_rate: float
    memory_size: int
    live_envs: int
    evictions: int


@dataclass
class Run:
    """One seed's result: its rows, the curriculum's step metrics, the abilities before and after, and the memory."""

    config: SimulationConfig
    seed: int
    rows: list[StepMetrics]
    initial_ability: np.ndarray
    final_ability: np.ndarray
    memory: EnvMemory
    pool_metrics: list[dict[str, float]]


class Simulation:
    """One seed's run, a step at a time: the stand-ins and the :class:`Curriculum` they drive (``curriculum``)."""

    def __init__(self, config: SimulationConfig, seed: int) -> None:
        self.c = config
        self.seed = seed
        agent_rng, self.design_rng, self.play_rng, self.memory_rng = (
            np.random.default_rng(s) for s in np.random.SeedSequence(seed).spawn(4)
        )
        self.agent = Agent.initial(config, agent_rng)
        self.pool = FixedPool(config, self.design_rng) if config.fixed_pool else None
        self.designer = None if config.fixed_pool else GaussianDesigner(config)
        seeds = self.pool.specs if self.pool is not None else [
            sim_spec(f"builtin{k}", k, skill, float(config.builtin_difficulty), 0, kind="Builtin")
            for k, skill in enumerate(config.skills)
        ]  # fmt: skip
        self.difficulty = {spec.env_id: float(spec.metadata["difficulty"]) for spec in seeds}
        designs = 0 if config.fixed_pool else config.envs_per_regen
        schedule = CurriculumConfig(setting="games", seed=seed, regen_every=config.regen_every, envs_per_regen=designs,
                                    skills=config.skills, active_per_regen=config.active_per_regen,
                                    memory_replay_fraction=config.memory_replay_fraction if config.memory else 0.0,
                                    use_memory=config.memory, lp_fast_ema=config.lp_fast_ema,
                                    lp_slow_ema=config.reward.lp_slow_ema,
                                    seed_secret=_secret(seed))  # fmt: skip
        memory = seed_memory(EnvMemory(config.memory_config), seeds)
        self.curriculum = Curriculum(schedule, memory, run_dir=None)
        self.skill_index = {s: i for i, s in enumerate(config.skills)}
        self.seeds = tuple(range(config.plays_per_arm))  # design-time instance labels, every arm
        self.n_designed = 0
        self.last_validity = self.last_reward = _NAN
        self.pool_metrics: list[dict[str, float]] = []

    # ----- one regeneration -----------------------------------------------------------------------------------
    def _anchor(self, skill: str) -> float:
        """Mean difficulty of the positive exemplars memory shows for ``skill`` (NaN: none, or memory off)."""
        memory = self.curriculum.memory
        if not self.c.memory or self.c.exemplar_pull == 0.0:
            return _NAN
        positives = memory.exemplars(skill, "games", self.memory_rng).positives
        return float(np.mean([self.difficulty[e.record.env_id] for e in positives])) if positives else _NAN

    def _design(self, step: int) -> None:
        c, cur = self.c, self.curriculum
        assert self.designer is not None
        cur.advance(step)  # as the recipe's designer_task does first
        names = [cur.design_skill(step, i) for i in range(c.envs_per_regen)]
        skills = np.array([self.skill_index[s] for s in names])
        slow = {s: cur.lp_slow.get(s) for s in names}  # the EMA each design task carries (before this step's fold)
        anchors = np.array([self._anchor(s) for s in names])
        difficulty, means, invalid, codes = self.designer.propose(skills, anchors, self.design_rng)
        valid = np.flatnonzero(~invalid)
        inst = self._instances(difficulty[valid])
        no_hint = self.agent.play(skills[valid], inst, False, self.play_rng)
        hint_inst = inst if c.paired else self._instances(difficulty[valid])
        hint = self.agent.play(skills[valid], hint_inst, True, self.play_rng)
        placebo = self.agent.play(skills[valid], inst, False, self.play_rng) if c.placebo else None
        rewards: list[float] = []
        row = 0
        for j, skill in enumerate(names):
            if invalid[j]:
                rewards.append(failure_penalty(c.reward, codes[j]))  # type: ignore[arg-type]
                cur.register_design(step, {"skill": skill, "doc_id": None, "valid": False, "code": codes[j]})
                continue
            arms = tuple(map(float, no_hint[row])), tuple(map(float, hint[row]))
            window = WindowStats(skill, arms[0], arms[0], arms[1], self.seeds, self.seeds,
                                 paired_placebo=() if placebo is None else tuple(map(float, placebo[row])))  # fmt: skip
            ema = SkillEMA(c.reward.lp_slow_ema, {skill: slow[skill]} if slow[skill] is not None else None)
            rewards.append(designer_reward(c.reward, window, ema))
            i, self.n_designed = self.n_designed, self.n_designed + 1
            spec = sim_spec(f"env{i}", i, skill, float(difficulty[j]), step)
            env_id = cur.register_design(step, {
                "skill": skill, "doc_id": None, "valid": True, "code": None, "source": spec.source,
                "seeds": list(self.seeds), "win_rate": window.win_rate,
                "regret": credited_regret(c.reward, window), "hint_failure": None,
            })  # fmt: skip
            self.difficulty.setdefault(env_id, float(difficulty[j]))  # type: ignore[arg-type]
            row += 1
        advantages = designer_advantages(rewards, names, 1.0)
        self.designer.update(skills, difficulty, means, invalid, np.array(advantages))
        self.last_validity = float(valid.size / len(names))
        self.last_reward = float(np.mean(rewards))

    def _instances(self, difficulty: np.ndarray) -> np.ndarray:
        noise = self.play_rng.standard_normal((difficulty.size, self.c.plays_per_arm))
        return difficulty[:, None] + self.c.instance_noise * noise

    # ----- one step ---------------------------------------------------------------------------------------------
    def step(self, step: int) -> StepMetrics:
        """Design (on a regeneration step), play every agent row, learn; the step's row."""
        c, cur = self.c, self.curriculum
        regen = self.designer is not None and step % c.regen_every == 0
        if regen:
            self._design(step)
        rows = c.agent_rows + (0 if regen or self.designer is None else c.envs_per_regen // c.plays_per_arm)
        tasks = [cur.agent_task(step, slot) for slot in range(rows)]
        live = set(cur.live)
        skills = np.array([self.skill_index[t["skill"]] for t in tasks], dtype=int)
        d = np.array([self.difficulty[t["env_id"]] for t in tasks])
        instance = d + c.instance_noise * self.play_rng.standard_normal(rows)  # a row's G sessions share its seed
        outcomes = self.agent.play(skills, np.repeat(instance[:, None], c.plays_per_arm, axis=1), False, self.play_rng)
        faults = [None] * c.plays_per_arm
        for slot, (task, row) in enumerate(zip(tasks, outcomes)):  # a row's sessions, reported as they finish
            cur.record_plays(task["env_id"], step, row.tolist(), faults, slot)
        replayed = np.array([t["env_id"] not in live for t in tasks], dtype=bool)
        live_ids = cur.live
        live_skills = np.array([self.skill_index[cur.memory.get(e).skill] for e in live_ids])
        live_d = np.array([self.difficulty[e] for e in live_ids])
        gap = self.agent.ability[live_skills][:, None] - (live_d[:, None] + c.instance_noise * _QUANTILES)
        expected = win_probability(gap, c.temperature, c.win_floor).mean(axis=1)  # the rewards' w: wins only
        low, high = c.reward.plateau_low, c.reward.plateau_high
        hard = live_d > self.agent.ability[live_skills] + c.hint_strength + c.reach
        memory = cur.memory
        designer = self.pool.difficulty if self.pool is not None else self.designer.mean  # type: ignore[union-attr]
        metrics: dict[str, Any] = cur.end_step()  # the run's step metrics (folds the step's designs into the EMAs)
        self.pool_metrics.append(metrics)
        out = StepMetrics(
            step=step,
            seed=self.seed,
            variant=c.label,
            win_rate=_mean(outcomes[~replayed] >= 1.0),
            frac_in_band=_mean((expected >= low) & (expected <= high)),
            frac_unsolvable=_mean(hard),
            difficulty=_mean(live_d),
            ability=float(self.agent.ability.mean()),
            designer_mean=float(designer.mean()),
            validity=self.last_validity,
            invalid_propensity=0.0 if self.designer is None else float(self.designer.invalid_propensity.mean()),
            designer_reward=self.last_reward,
            regret=_mean(np.array([memory.get(e).regret for e in live_ids])),
            replay_win_rate=_mean(outcomes[replayed] >= 1.0),
            memory_size=len(memory),
            live_envs=len(live_ids),
            evictions=int(metrics.get("spade/memory/evictions", 0)),
        )
        self.agent.learn(skills, outcomes)
        return out


def _mean(values: np.ndarray) -> float:
    values = np.asarray(values, dtype=float)
    return float(values.mean()) if values.size else _NAN


def _secret(seed: int) -> bytes:
    """The curriculum's seed secret in a simulation: a function of the seed (no env code runs here to hide it from)."""
    return hashlib.sha256(f"spade simulator seed {seed}".encode()).digest()


def simulate(config: SimulationConfig, seed: int = 0) -> Run:
    """Run ``config.steps`` simulated training steps with ``seed``; a pure function of its arguments."""
    if not isinstance(seed, int) or isinstance(seed, bool) or seed < 0:
        raise ValueError(f"seed must be an int >= 0, got {seed!r}")
    sim = Simulation(config, seed)
    initial = sim.agent.ability.copy()
    rows = [sim.step(t) for t in range(config.steps)]
    return Run(config, seed, rows, initial, sim.agent.ability.copy(), sim.curriculum.memory, sim.pool_metrics)


def simulate_many(config: SimulationConfig) -> list[Run]:
    """:func:`simulate` for seeds ``0 .. config.seeds - 1``."""
    return [simulate(config, seed) for seed in range(config.seeds)]
