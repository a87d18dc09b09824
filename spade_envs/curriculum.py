"""The curriculum state machine of a SPADE run, framework-free.

It holds memory, the live and next-generation envs, play windows, skill rotation, learning-potential EMAs, the RLVE
windows and what a checkpoint holds.

One class, driven three ways: the recipe's env-pool Ray actor (``recipe/spade/env_pool.py``) wraps it and adds the
designer prompts; the full-length tests and the curriculum simulator (``spade-envs simulate``,
:mod:`spade_envs.simulate.loop`) drive it with stand-in plays, so a long run, its resumes and the simulated
dynamics exercise the exact code a training run uses. It knows nothing of verl or Ray: calls arrive as
(step, design) and (step, slot).

A step's life: the first task of step ``t`` finishes step ``t - 1`` (logs it if the trainer did not, folds its
admitted designs into the EMAs, promotes the envs designed in it to live, saves the state into the run directory);
designs of ``t`` join memory and the next generation; plays of ``t`` re-score their env from its play window (its
plays in this regeneration period, so a replay in a later one re-scores it anew);
:meth:`Curriculum.end_step` logs ``t``. Live envs and the designs about to go live are never evicted from memory.
"""

from __future__ import annotations

import json
import os
import random
import time
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from spade_envs.browse.step_log import cut_after
from spade_envs.design.designer import stored_copy
from spade_envs.design.measure import training_seed
from spade_envs.design.memory import EnvMemory
from spade_envs.design.memory_record import MemoryRecord
from spade_envs.design.rewards import SkillEMA
from spade_envs.design.seed_secret import parse_secret, resumed_secret, run_secret
from spade_envs.envs.contract import is_win
from spade_envs.envs.skills import SKILLS
from spade_envs.envs.spec import EnvSpec

__all__ = ["POOL_STATE_FILES", "Curriculum", "CurriculumConfig", "TaskSource"]

#: What a checkpoint holds of the curriculum: the memory, and the live envs, sampler states and seed secret.
POOL_STATE_FILES = ("memory.jsonl", "pool_state.json")


class TaskSource(Protocol):
    """Agent tasks that do not come from memory (the RLVE baseline's procedural envs and their difficulty windows)."""

    def agent_task(self, step: int, slot: int) -> dict[str, Any]: ...
    def record(self, task: dict[str, Any], outcome: float, fault: str | None) -> None: ...
    def metrics(self) -> dict[str, float]: ...
    def state_dict(self) -> dict[str, Any]: ...
    def load_state_dict(self, state: dict[str, Any]) -> None: ...


@dataclass(frozen=True)
class CurriculumConfig:
    """The schedule knobs the state machine reads (the ``spade:`` block's names).

    ``seed_secret``: a pinned seed secret (``spade.seed_secret``, :mod:`spade_envs.design.seed_secret`); ``None`` draws
    one
    at a fresh start. A resume keeps the checkpoint's.
    """

    setting: str
    seed: int
    regen_every: int
    envs_per_regen: int
    skills: tuple[str, ...]
    active_per_regen: int | None
    memory_replay_fraction: float
    use_memory: bool
    lp_fast_ema: float
    lp_slow_ema: float
    seed_secret: bytes | None = field(default=None, repr=False)

    @classmethod
    def from_spade(cls, spade: dict[str, Any]) -> CurriculumConfig:
        """From the recipe's ``spade:`` block (a plain dict)."""
        lp = spade.get("learning_potential") or {}
        setting = spade["setting"]
        return cls(setting=setting, seed=int(spade["seed"]), regen_every=int(spade["regen_every"]),
                   envs_per_regen=int(spade["envs_per_regen"]),
                   skills=tuple(spade["skills"]["names"] or SKILLS[setting]),
                   active_per_regen=spade["skills"]["active_per_regen"],
                   memory_replay_fraction=float(spade["memory_replay_fraction"]),
                   use_memory=bool((spade.get("memory") or {}).get("enable", True)),
                   lp_fast_ema=float(lp.get("fast_ema", 0.98)),
                   lp_slow_ema=float(lp.get("slow_ema", 0.85)),
                   seed_secret=parse_secret(spade.get("seed_secret")))  # fmt: skip


class Curriculum:
    """The env pool's state and its transitions (one owner: the env-pool actor, or a test driving it)."""

    def __init__(self, config: CurriculumConfig, memory: EnvMemory, run_dir: str | Path | None,
                 tasks: TaskSource | None = None, clock: Callable[[], float] = time.time) -> None:  # fmt: skip
        """``memory``: the run's memory (seeded, or restored); ``tasks``: the RLVE baseline's task source, if any.

        ``run_dir``: where the state is saved every step and the metrics rows are appended; ``None`` keeps both in
        memory only (the simulator, which runs thousands of steps and reads the returned metrics). ``clock`` stamps
        the metrics rows (a test passes a fixed one to compare files byte for byte).
        """
        self.config = config
        self.secret = run_secret(config.seed_secret)  # keys every training seed; the checkpoint keeps it
        self.memory = memory
        self.run_dir = None if run_dir is None else Path(run_dir)
        self.rlve = tasks
        self.clock = clock
        self.rng = random.Random(config.seed)
        self.np_rng = np.random.default_rng(config.seed)
        self.lp_fast = SkillEMA(config.lp_fast_ema)
        self.lp_slow = SkillEMA(config.lp_slow_ema)
        self.live: list[str] = [r.env_id for r in memory if r.setting == config.setting and r.playable]
        self.generation: list[str] = []
        self.window: dict[str, list[float]] = {}  # env id -> [wins, count] of its training plays in this period
        self.events: list[dict[str, Any]] = []
        self.current_step = -1
        self.logged: set[int] = set()
        self.agent_tasks: dict[tuple[int, int], dict[str, Any]] = {}
        self.lp_folded: set[int] = set()

    # -- designer side --------------------------------------------------------------------------------------------
    def active_skills(self, step: int) -> list[str]:
        """The skills of this regeneration: ``active_per_regen`` of the configured ones, in turn (all when null)."""
        names = list(self.config.skills)
        k = self.config.active_per_regen or len(names)
        regen = step // max(1, self.config.regen_every)
        return [names[(regen * k + i) % len(names)] for i in range(min(k, len(names)))]

    def design_skill(self, step: int, design: int) -> str:
        """The skill design ``design`` of regeneration ``step`` builds for: the active skills in turn."""
        skills = self.active_skills(step)
        return skills[design % len(skills)]

    def register_design(self, step: int, outcome: dict[str, Any]) -> str | None:
        """Record one designer sample; an admitted env joins memory and the next generation of live envs."""
        self.events.append({"step": step, "kind": "design", **{k: v for k, v in outcome.items() if k != "source"}})
        if not outcome["valid"]:
            return None
        setting = self.config.setting
        spec = EnvSpec(env_id="", setting=setting, skill=outcome["skill"], source=outcome["source"],
                       doc_id=outcome.get("doc_id"), created_step=step)  # fmt: skip
        env_id = f"{setting}-{outcome['skill']}-{spec.sha256[:12]}"
        spec = replace(spec, env_id=env_id)
        plays = len(outcome["seeds"])
        if env_id in self.memory:  # the same source admitted again (e.g. samples of one row converged): re-score it
            last = self.memory.get(env_id).last_played_step
            status = outcome.get("hint_failure") or "ok"
            self.memory.update_stats(
                env_id, outcome["win_rate"], outcome["regret"], plays, max(step, last), status=status
            )
        else:
            # the regret the reward counted, and the hint's status (hint_leak / hint_failed envs stay playable)
            record = MemoryRecord(spec=spec, win_rate=outcome["win_rate"], regret=outcome["regret"], plays=plays,
                                  last_played_step=step, status=outcome.get("hint_failure") or "ok")  # fmt: skip
            before = len(self.memory)
            if self.memory.add(record, keep={*self.live, *self.generation}):
                self.events[-1]["evicted"] = len(self.memory) == before  # memory was full: the least useful went
            else:  # an AST-level copy: the stored env is re-scored and goes live instead
                env_id = stored_copy(self.memory, outcome["source"]).env_id
        if env_id not in self.generation:
            self.generation.append(env_id)
        return env_id

    def advance(self, step: int) -> None:
        """First task of a new step: log the finished step, promote the envs designed in it, save the state."""
        if step <= self.current_step:
            return
        if self.current_step >= 0 and self.current_step not in self.logged:
            self.step_metrics(self.current_step)
        self._fold_learning_potential(self.current_step)
        self.agent_tasks = {k: v for k, v in self.agent_tasks.items() if k[0] >= step}
        self.events = [e for e in self.events if e["step"] >= step]  # earlier steps are logged and folded
        if self._period(step) != self._period(self.current_step):  # a new period: an env played in it, live or
            self.window = {}  # replayed, is measured anew (memory.py: "Replays re-score the env")
        self.window = {k: v for k, v in self.window.items() if k in self.memory}  # evicted: never played again
        if self.generation:  # envs designed at step K are played from step K + 1 on
            self.live = list(self.generation)
            self.generation = []
        if self.run_dir is not None:
            self.save_state(self.run_dir)
        self.current_step = step

    def _fold_learning_potential(self, step: int) -> None:
        """After a step: fold its admitted designs' win rates (per skill) into the fast and slow EMAs, once."""
        if step < 0 or step in self.lp_folded:
            return
        self.lp_folded.add(step)
        means: dict[str, list[float]] = defaultdict(list)
        for e in self.events:
            if e["step"] == step and e["kind"] == "design" and e["valid"] and "win_rate" in e:
                means[e["skill"]].append(float(e["win_rate"]))
        self.lp_fast.update(means)
        self.lp_slow.update(means)

    def _period(self, step: int) -> int:
        """The regeneration period of ``step``, the steps one generation is live (step 0, the seed envs': -1).

        Designs of step ``K`` (a multiple of ``regen_every``) are live from ``K + 1`` to ``K + regen_every``.
        """
        return (step - 1) // max(1, self.config.regen_every)

    # -- agent side -----------------------------------------------------------------------------------------------
    def agent_task(self, step: int, slot: int) -> dict[str, Any]:
        """The env and seed of agent row ``slot`` at ``step``: live envs round-robin, plus memory replay."""
        self.advance(step)
        if (step, slot) in self.agent_tasks:  # every session of a row plays the same env and seed (one GRPO group)
            return self.agent_tasks[(step, slot)]
        if self.rlve is not None:
            self.agent_tasks[(step, slot)] = self.rlve.agent_task(step, slot)
            return self.agent_tasks[(step, slot)]
        replay = self.config.memory_replay_fraction
        if self.config.use_memory and replay > 0 and self.rng.random() < replay and len(self.memory) > 0:
            picked = self.memory.sample_replay(1, step, self.np_rng)
            env_id = picked[0].env_id if picked else self.live[slot % len(self.live)]
        else:
            env_id = self.live[(step * 7919 + slot) % len(self.live)]
        record = self.memory.get(env_id)
        # hashed and keyed as measurement seeds are: no tell between them, none an env can recompute
        seed = training_seed(self.config.seed, step, slot, secret=self.secret)
        task = {"env_id": env_id, "source": record.spec.source, "setting": record.setting, "seed": seed,
                "skill": record.skill, "step": step}  # fmt: skip
        self.agent_tasks[(step, slot)] = task
        return task

    def record_play(self, env_id: str, step: int, outcome: float, fault: str | None, slot: int | None = None) -> None:
        """An agent training play finished: re-score the env in memory (win rate over its plays in this period).

        A play window spans one regeneration period (:meth:`_period`: the steps a generation is live), so the win
        rate a live env earns is the mean of its live plays, and a replay in a later period replaces it with the mean
        of the replay's plays, as :meth:`EnvMemory.update_stats` documents: the agent that earned the old one is gone.

        Wins only (outcome 1, :func:`~spade_envs.envs.contract.is_win`), as the designer reward counts them: an env that
        pays partial credit for every loss is labelled by the wins it gives, never "learnable" at 0.5.

        With the RLVE baseline the play instead counts in its env's difficulty window (``slot`` names its task).
        """
        self.record_plays(env_id, step, [outcome], [fault], slot)

    def record_plays(
        self, env_id: str, step: int, outcomes: Sequence[float], faults: Sequence[str | None], slot: int | None = None
    ) -> None:
        """Several training plays of ``env_id`` finished (the simulator reports a row's sessions at once).

        The same as :meth:`record_play` for each in turn, with one memory update: the env's play window takes them
        all, then memory re-scores the env from it.
        """
        task = self.agent_tasks.get((step, slot)) if self.rlve is not None else None
        ok = 0.0, 0
        for outcome, fault in zip(outcomes, faults, strict=True):
            self.events.append({"step": step, "kind": "play", "env_id": env_id, "outcome": outcome, "fault": fault})
            if task is not None:
                self.rlve.record(task, outcome, fault)  # type: ignore[union-attr]
            if fault is None:
                ok = ok[0] + float(is_win(outcome)), ok[1] + 1
        if not ok[1] or env_id not in self.memory:  # faults only, or evicted since the play started
            return
        window = self.window.setdefault(env_id, [0.0, 0])
        window[0] += ok[0]
        window[1] += ok[1]
        last = self.memory.get(env_id).last_played_step  # plays of one step may finish in any order
        self.memory.update_stats(env_id, window[0] / window[1], None, ok[1], max(step, last))  # plays accumulate

    # -- reporting and checkpoints -------------------------------------------------------------------------------
    def end_step(self, batch_metrics: dict[str, float] | None = None) -> dict[str, float]:
        """The trainer's step is over (all its loops finished): its metrics, for verl's logger and the JSONL.

        ``batch_metrics`` (per-role rewards and advantages, computed by the trainer) join the JSONL row.
        """
        if self.current_step < 0 or self.current_step in self.logged:
            return {}
        metrics = self.step_metrics(self.current_step, batch_metrics)
        self._fold_learning_potential(self.current_step)  # all its designs are in: a checkpoint now keeps the fold
        return metrics

    def save_state(self, folder: str | Path) -> str:
        """Write :data:`POOL_STATE_FILES` into ``folder`` (the run dir, or a verl checkpoint folder)."""
        folder_path = Path(folder)
        self.memory.save(folder_path / "memory.jsonl")
        step = self.current_step
        folded = step < 0 or step in self.lp_folded
        state = {"live": self.live, "generation": self.generation, "rng": _jsonable(self.rng.getstate()),
                 "np_rng": self.np_rng.bit_generator.state, "lp_fast": self.lp_fast.state_dict()["values"],
                 "lp_slow": self.lp_slow.state_dict()["values"],
                 "rlve_window": self.rlve.state_dict() if self.rlve is not None else None,
                 # the play windows set memory win rates; the step's designs until the EMAs have folded them
                 "window": self.window, "step": step, "logged": step in self.logged,
                 "unfolded": [] if folded else [e for e in self.events if e["step"] == step and e["kind"] == "design"],
                 "seed_secret": self.secret.hex(),  # a resume replays the same seeds
                 }  # fmt: skip
        tmp = folder_path / "pool_state.json.tmp"
        tmp.unlink(missing_ok=True)  # created afresh, owner-only: it holds the seed secret
        with os.fdopen(os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600), "w", encoding="utf-8") as f:
            f.write(json.dumps(state))
        tmp.replace(folder_path / "pool_state.json")
        return str(folder)

    def load_state(self, state: dict[str, Any], where: str = "pool_state.json") -> None:
        """Restore what :meth:`save_state` wrote (the memory is restored by its owner, before this).

        The run directory's ``spade_metrics.jsonl`` is cut back to the checkpoint's step, so the steps a crashed run
        logged after its checkpoint are not logged twice.
        """
        known = {r.env_id for r in self.memory}
        missing = sorted(set(state["live"]) - known)
        if missing:
            raise ValueError(f"{where} names live envs that its memory.jsonl lacks: {missing[:3]}")
        self.secret = resumed_secret(state.get("seed_secret"), self.config.seed_secret, where)
        self.live = list(state["live"]) or self.live
        self.generation = [e for e in state["generation"] if e in known]
        if self.rlve is not None and state.get("rlve_window"):
            self.rlve.load_state_dict(state["rlve_window"])
        self.lp_fast = SkillEMA(self.lp_fast.alpha, state.get("lp_fast"))
        self.lp_slow = SkillEMA(self.lp_slow.alpha, state.get("lp_slow"))
        self.rng.setstate(_tuples(state["rng"]))
        self.np_rng.bit_generator.state = state["np_rng"]
        self.window = {k: [float(v[0]), int(v[1])] for k, v in state.get("window", {}).items()}
        if "step" in state:  # written since the step, the windows and the unfolded designs were checkpointed
            step = self.current_step = int(state["step"])
            self.events = list(state["unfolded"])
            self.lp_folded = set() if self.events else {step}
            # verl checkpoints a step before its metrics: the crashed run's row of that step, if any, is the one
            logged = self._truncate_metrics(step)
            self.logged = {step} if state["logged"] or logged else set()

    def _truncate_metrics(self, last: int) -> bool:
        """Drop the rows of steps after ``last`` from the run directory's metrics file (atomically); ``last`` kept?

        An unfinished last row (a crash during its append) is dropped with a warning; a bad row before it is an error.
        """
        if self.run_dir is None:
            return False
        return last in cut_after(self.run_dir / "spade_metrics.jsonl", "spade/step", last)

    def step_metrics(self, step: int, batch_metrics: dict[str, float] | None = None) -> dict[str, float]:
        """Metrics of ``step`` (validity, failure codes, regret, win rates, faults, diversity), logged as JSONL."""
        self.logged.add(step)
        events = [e for e in self.events if e["step"] == step]
        designs = [e for e in events if e["kind"] == "design"]
        plays = [e for e in events if e["kind"] == "play"]
        metrics: dict[str, float] = {"spade/step": step, "spade/live_envs": len(self.live),
                                     "spade/memory_size": len(self.memory),
                                     "spade/distinct_ast_hashes": len({r.ast_hash for r in self.memory})}  # fmt: skip
        metrics["spade/memory/evictions"] = sum(bool(e.get("evicted")) for e in designs)
        ages = [step - self.memory.get(e).created_step for e in self.live if e in self.memory]
        if ages:  # how long the envs played now have been live (built-ins count from step 0)
            metrics["spade/live_envs/age_mean"] = float(np.mean(ages))
            metrics["spade/live_envs/age_max"] = max(ages)
        if designs:
            valid = [d for d in designs if d["valid"]]
            metrics["spade/propose/validity_rate"] = len(valid) / len(designs)
            for d in designs:
                if not d["valid"]:
                    key = f"spade/propose/failure/{d['code']}"
                    metrics[key] = metrics.get(key, 0) + 1
            if valid:
                metrics["spade/propose/regret_mean"] = float(np.mean([d["regret"] for d in valid]))
                metrics["spade/propose/win_rate_mean"] = float(np.mean([d["win_rate"] for d in valid]))
                for d in valid:
                    key = f"spade/propose/skill/{d['skill']}"
                    metrics[key] = metrics.get(key, 0) + 1
                leaks = [d for d in valid if d.get("hint_failure") == "hint_leak"]
                metrics["spade/propose/hint_leak_rate"] = len(leaks) / len(valid)
        if self.rlve is not None:
            metrics.update({f"spade/{k}": v for k, v in self.rlve.metrics().items()})
        for skill in SKILLS[self.config.setting]:
            fast, slow = self.lp_fast.get(skill), self.lp_slow.get(skill)
            if fast is not None and slow is not None:  # the learning-potential signal: fast minus slow EMA
                metrics[f"spade/lp/gap/{skill}"] = fast - slow
        if plays:
            ok = [p for p in plays if p["fault"] is None]
            metrics["spade/solve/env_fault_rate"] = 1 - len(ok) / len(plays)
            if ok:
                metrics["spade/solve/win_rate"] = float(np.mean([p["outcome"] >= 1.0 for p in ok]))
                metrics["spade/solve/plays"] = len(ok)  # the win rate's sample size (make learn's interval)
                metrics["spade/solve/outcome_mean"] = float(np.mean([p["outcome"] for p in ok]))
        if self.run_dir is not None:
            with (self.run_dir / "spade_metrics.jsonl").open("a", encoding="utf-8") as f:
                f.write(json.dumps({"time": self.clock(), **(batch_metrics or {}), **metrics}) + "\n")
        return metrics

    def finish(self) -> str:
        """End of training: log the last step and save the state; returns the memory path."""
        if self.run_dir is None:
            raise ValueError("finish() saves into the run directory; this curriculum has none (run_dir=None)")
        if self.current_step >= 0 and self.current_step not in self.logged:
            self.step_metrics(self.current_step)
        self.save_state(self.run_dir)
        return str(self.run_dir / "memory.jsonl")


def seed_memory(memory: EnvMemory, specs: Sequence[EnvSpec]) -> EnvMemory:
    """A fresh run's memory: the seed envs (built-ins, or a fixed pool) at an uninformed win rate of 0.5."""
    for spec in specs:
        memory.add(MemoryRecord(spec=spec, win_rate=0.5, plays=0, last_played_step=0))
    return memory


def _jsonable(value: Any) -> Any:
    return [_jsonable(v) for v in value] if isinstance(value, (tuple, list)) else value


def _tuples(value: Any) -> Any:
    return tuple(_tuples(v) for v in value) if isinstance(value, list) else value
