"""The simulated self-play loop: the training schedule with stand-ins for the model and the real rewards and memory.

One step (``t``), as in training (``R = regen_every``, ``G = plays_per_arm``):

1. **Design** when ``t % R == 0``: close the previous batch's window (below), then fill ``envs_per_regen``
   slots (skills cycling) from the designer stand-in (or the fixed pool). Positive exemplars from the real
   :meth:`EnvMemory.exemplars` pull the proposal (when memory is on). Valid designs become live envs with a
   real :class:`~spade_envs.spec.EnvSpec`; each is played ``G`` times without and ``G`` times with the hint on
   paired instances (fresh ones for the hinted arm when ``paired`` is off), and its regret is computed by the
   real :func:`~spade_envs.rewards.paired_regret`.
2. **Play**: every live env ``G`` times without the hint on fresh instances (on design steps the measurement
   plays above are these plays), plus ``replay_per_step`` envs from the real :meth:`EnvMemory.sample_replay`,
   re-scored with :meth:`EnvMemory.update_stats`.
3. **Learn**: the agent updates from all of this step's no-hint groups.
4. **Close a window** (at the next design step, ``R`` steps after the batch was designed, the training delay):
   every valid env gets :func:`~spade_envs.rewards.designer_reward` on a real
   :class:`~spade_envs.rewards.WindowStats` of its ``R * G`` no-hint outcomes and paired arms; every invalid one
   gets :func:`~spade_envs.rewards.failure_penalty`. :func:`~spade_envs.rewards.designer_advantages` centres
   them per skill, the designer takes one step, the skills' :class:`~spade_envs.rewards.SkillEMA` is updated
   and the envs enter memory with their window win rate and regret.

Randomness comes from four streams spawned from the seed (agent start, design, play, memory), so a run is a pure
function of ``(config, seed)``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from spade_envs.memory import EnvMemory
from spade_envs.memory_record import MemoryRecord
from spade_envs.rewards import (
    SkillEMA,
    WindowStats,
    designer_advantages,
    designer_reward,
    failure_penalty,
    paired_regret,
)
from spade_envs.simulate.agent import Agent
from spade_envs.simulate.config import SimulationConfig
from spade_envs.simulate.designer import FixedPool, GaussianDesigner, sim_spec
from spade_envs.spec import EnvSpec

__all__ = ["Run", "StepMetrics", "simulate", "simulate_many"]

_NAN = float("nan")


@dataclass(frozen=True)
class StepMetrics:
    """What one step looked like; one CSV row. NaN where a quantity does not exist yet (or at all).

    Attributes:
        step: training step.
        seed: run seed.
        variant: the run's label (reward variant, or ``fixed``).
        win_rate: mean no-hint outcome of the live designed envs' plays this step (what the memory and the
            rewards call the win rate; partial credit included).
        frac_in_band: share of live envs whose expected no-hint outcome (model truth over this step's instances)
            lies in the plateau band ``[plateau_low, plateau_high]``.
        frac_unsolvable: share of live envs harder than ``ability + hint_strength + reach``: unsolvable with hint.
        difficulty: mean difficulty of the live envs.
        ability: the agent's mean ability over skills (before this step's update).
        designer_mean: the designer's mean difficulty over skills (the pool's mean for ``fixed``).
        validity: share of the current batch's designer samples that were valid.
        invalid_propensity: the designer's mean probability of writing invalid code.
        designer_reward: mean designer reward of the latest closed batch, penalties included.
        regret: mean paired regret of the live envs, measured at design time.
        replay_win_rate: mean outcome of this step's replayed envs.
        memory_size: records in memory.
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


@dataclass
class Run:
    """One seed's result: its rows, the abilities before and after, and the memory it built (if any)."""

    config: SimulationConfig
    seed: int
    rows: list[StepMetrics]
    initial_ability: np.ndarray
    final_ability: np.ndarray
    memory: EnvMemory | None


@dataclass
class _Batch:
    """One regeneration's designer samples and, for its valid ones, the window of plays."""

    step: int
    skills: np.ndarray
    difficulty: np.ndarray
    means: np.ndarray
    invalid: np.ndarray
    codes: list[str | None]
    specs: list[EnvSpec]
    instances: np.ndarray
    paired_no_hint: np.ndarray
    paired_hint: np.ndarray
    regret: np.ndarray
    paired_placebo: np.ndarray | None = None
    window: list[np.ndarray] = field(default_factory=list)

    @property
    def valid(self) -> np.ndarray:
        return np.flatnonzero(~self.invalid)


class _Simulation:
    def __init__(self, config: SimulationConfig, seed: int) -> None:
        self.c = config
        self.seed = seed
        agent_rng, self.design_rng, self.play_rng, self.memory_rng = (
            np.random.default_rng(s) for s in np.random.SeedSequence(seed).spawn(4)
        )
        self.agent = Agent.initial(config, agent_rng)
        self.pool = FixedPool(config, self.design_rng) if config.fixed_pool else None
        self.designer = None if config.fixed_pool else GaussianDesigner(config)
        self.memory = EnvMemory(config.memory_config) if config.memory else None
        self.ema = SkillEMA(config.reward.lp_slow_ema)
        self.skill_index = {s: i for i, s in enumerate(config.skills)}
        self.seeds = list(range(config.plays_per_arm))  # design-time instance seeds, both arms
        self.batch: _Batch | None = None
        self.last_reward = _NAN
        self.n_designed = 0

    # ----- one regeneration -----------------------------------------------------------------------------------
    def _anchors(self, skills: np.ndarray) -> np.ndarray:
        anchors = np.full(skills.size, _NAN)
        if self.memory is None or self.c.exemplar_pull == 0.0 or not len(self.memory):
            return anchors
        for j, k in enumerate(skills):
            ex = self.memory.exemplars(self.c.skills[k], "games", self.memory_rng, n_pos=2, n_neg=0)
            if ex.positives:
                anchors[j] = np.mean([e.record.spec.metadata["difficulty"] for e in ex.positives])
        return anchors

    def _design(self, step: int) -> _Batch:
        c = self.c
        skills = np.arange(c.envs_per_regen) % len(c.skills)
        if self.pool is not None:
            idx = self.pool.draw(skills, self.design_rng)
            difficulty, means = self.pool.difficulty[idx], self.pool.difficulty[idx]
            invalid, codes = np.zeros(skills.size, bool), [None] * skills.size
            specs = [self.pool.specs[i] for i in idx]
        else:
            assert self.designer is not None
            difficulty, means, invalid, codes = self.designer.propose(skills, self._anchors(skills), self.design_rng)
            specs = []
            for j in np.flatnonzero(~invalid):
                i = self.n_designed
                self.n_designed += 1
                specs.append(sim_spec(f"env{i}", i, c.skills[skills[j]], float(difficulty[j]), step))
        valid = np.flatnonzero(~invalid)
        inst = self._instances(difficulty[valid])
        no_hint = self.agent.play(skills[valid], inst, False, self.play_rng)
        hint_inst = inst if c.paired else self._instances(difficulty[valid])
        hint = self.agent.play(skills[valid], hint_inst, True, self.play_rng)
        placebo = self.agent.play(skills[valid], inst, False, self.play_rng) if c.placebo else None
        regret = np.array([paired_regret(tuple(map(float, n)), tuple(map(float, h)), self.seeds, self.seeds,
                                         placebo=tuple(map(float, placebo[i])) if placebo is not None else None)
                           for i, (n, h) in enumerate(zip(no_hint, hint))])  # fmt: skip
        batch = _Batch(step, skills, difficulty, means, invalid, codes, specs, inst, no_hint, hint, regret, placebo)
        batch.window.append(no_hint)
        return batch

    def _instances(self, difficulty: np.ndarray) -> np.ndarray:
        noise = self.play_rng.standard_normal((difficulty.size, self.c.plays_per_arm))
        return difficulty[:, None] + self.c.instance_noise * noise

    def _close(self, batch: _Batch, step: int) -> None:
        c = self.c
        names = [c.skills[k] for k in batch.skills]
        window = np.concatenate(batch.window, axis=1) if batch.window else np.empty((0, 0))
        rewards: list[float] = []
        ws: dict[str, list[float]] = {}
        row = 0
        for j, name in enumerate(names):
            if batch.invalid[j]:
                rewards.append(failure_penalty(c.reward, batch.codes[j]))  # type: ignore[arg-type]
                continue
            stats = WindowStats(
                name,
                outcomes=tuple(map(float, window[row])),
                paired_no_hint=tuple(map(float, batch.paired_no_hint[row])),
                paired_hint=tuple(map(float, batch.paired_hint[row])),
                seeds_no_hint=self.seeds,
                seeds_hint=self.seeds,
                paired_placebo=() if batch.paired_placebo is None else tuple(map(float, batch.paired_placebo[row])),
            )
            rewards.append(designer_reward(c.reward, stats, self.ema))
            ws.setdefault(name, []).append(stats.mean_outcome)
            self._remember(batch.specs[row], stats.mean_outcome, float(batch.regret[row]), window.shape[1], step - 1)
            row += 1
        advantages = designer_advantages(rewards, names, 1.0)
        if self.designer is not None:
            self.designer.update(batch.skills, batch.difficulty, batch.means, batch.invalid, np.array(advantages))
        self.ema.update(ws)
        self.last_reward = float(np.mean(rewards))

    def _remember(self, spec: EnvSpec, win_rate: float, regret: float, plays: int, step: int) -> None:
        if self.memory is None:
            return
        if spec.env_id in self.memory:  # a pool env seen before: re-score it
            self.memory.update_stats(spec.env_id, win_rate, regret, plays, step)
        else:
            self.memory.add(MemoryRecord(spec, win_rate=win_rate, regret=regret, plays=plays, last_played_step=step))

    # ----- one step ---------------------------------------------------------------------------------------------
    def _replay(self, step: int) -> tuple[np.ndarray, np.ndarray]:
        if self.memory is None or self.c.replay_per_step == 0:
            return np.empty(0, int), np.empty((0, self.c.plays_per_arm))
        records = self.memory.sample_replay(self.c.replay_per_step, step, self.memory_rng)
        skills = np.array([self.skill_index[r.skill] for r in records], dtype=int)
        difficulty = np.array([r.spec.metadata["difficulty"] for r in records], dtype=float)
        outcomes = self.agent.play(skills, self._instances(difficulty), False, self.play_rng)
        for record, row in zip(records, outcomes):
            self.memory.update_stats(record.env_id, float(row.mean()), None, row.size, step)
        return skills, outcomes

    def step(self, step: int) -> StepMetrics:
        c = self.c
        if step % c.regen_every == 0:
            if self.batch is not None:
                self._close(self.batch, step)
            self.batch = self._design(step)
            inst, no_hint = self.batch.instances, self.batch.window[-1]
        else:
            assert self.batch is not None
            inst = self._instances(self.batch.difficulty[self.batch.valid])
            no_hint = self.agent.play(self.batch.skills[self.batch.valid], inst, False, self.play_rng)
            self.batch.window.append(no_hint)
        batch, valid = self.batch, self.batch.valid
        skills, difficulty = batch.skills[valid], batch.difficulty[valid]
        expected = self.agent.expected(skills, inst).mean(axis=1)
        low, high = c.reward.plateau_low, c.reward.plateau_high
        hard = difficulty > self.agent.ability[skills] + c.hint_strength + c.reach
        replay_skills, replay = self._replay(step)
        row = StepMetrics(
            step=step,
            seed=self.seed,
            variant=c.label,
            win_rate=_mean(no_hint),
            frac_in_band=_mean((expected >= low) & (expected <= high)),
            frac_unsolvable=_mean(hard),
            difficulty=_mean(difficulty),
            ability=float(self.agent.ability.mean()),
            designer_mean=float(self.pool.difficulty.mean() if self.pool is not None else self.designer.mean.mean()),
            validity=_mean(~batch.invalid),
            invalid_propensity=0.0 if self.designer is None else float(self.designer.invalid_propensity.mean()),
            designer_reward=self.last_reward,
            regret=_mean(batch.regret),
            replay_win_rate=_mean(replay),
            memory_size=0 if self.memory is None else len(self.memory),
        )
        self.agent.learn(np.concatenate([skills, replay_skills]), np.concatenate([no_hint, replay]))
        return row


def _mean(values: np.ndarray) -> float:
    values = np.asarray(values, dtype=float)
    return float(values.mean()) if values.size else _NAN


def simulate(config: SimulationConfig, seed: int = 0) -> Run:
    """Run ``config.steps`` simulated training steps with ``seed``; a pure function of its arguments."""
    if not isinstance(seed, int) or isinstance(seed, bool) or seed < 0:
        raise ValueError(f"seed must be an int >= 0, got {seed!r}")
    sim = _Simulation(config, seed)
    initial = sim.agent.ability.copy()
    rows = [sim.step(t) for t in range(config.steps)]
    return Run(config, seed, rows, initial, sim.agent.ability.copy(), sim.memory)


def simulate_many(config: SimulationConfig) -> list[Run]:
    """:func:`simulate` for seeds ``0 .. config.seeds - 1``."""
    return [simulate(config, seed) for seed in range(config.seeds)]
