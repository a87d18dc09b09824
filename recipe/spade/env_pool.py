"""The environment pool: one named Ray actor holding the corpus, the environment memory and the live envs.

Agent loops run in many processes; this actor is where they meet. The designer loop asks it for a design task
(skill, document, memory exemplars) and registers what it admitted; the env agent loop asks it which live env and
seed to play and reports the outcome. Memory is saved atomically at every regeneration and restored on resume.
"""

from __future__ import annotations

import json
import logging
import random
import shutil
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

import numpy as np

from recipe.spade.rlve_tasks import RLVETasks
from spade_envs.builtin import BUILTINS, builtin_spec
from spade_envs.corpus import Corpus, truncate_words
from spade_envs.designer import exemplars_for_prompt
from spade_envs.memory import EnvMemory, MemoryConfig, MemoryRecord
from spade_envs.prompts import VARIANT_WEIGHTS, builtin_example, concept_ideas, designer_messages, exemplar_cuts
from spade_envs.rewards import SkillEMA
from spade_envs.skills import DOMAINS, SKILLS
from spade_envs.spec import EnvSpec

__all__ = ["ACTOR_NAME", "POOL_STATE_FILES", "RUN_FILES", "SpadeEnvPool", "start_env_pool"]

ACTOR_NAME = "spade_env_pool"
#: What a checkpoint holds of the pool: the memory, and the live envs plus sampler states.
POOL_STATE_FILES = ("memory.jsonl", "pool_state.json")
#: What a run writes into ``spade.run_dir`` that a later fresh start must not pick up.
RUN_FILES = (*POOL_STATE_FILES, "spade_metrics.jsonl")

logger = logging.getLogger(__name__)


class SpadeEnvPool:
    """State shared by all agent loops of a run (instantiate as a named Ray actor: :data:`ACTOR_NAME`)."""

    def __init__(self, spade: dict[str, Any], restore_from: str | None = None) -> None:
        """``restore_from``: a checkpoint's ``spade/`` folder to resume from; ``None`` starts a fresh run.

        A fresh start never reads the run directory: files a crashed or finished run left there
        (:data:`RUN_FILES`) are moved into ``run_dir/stale-<time>/`` first, so two runs never mix.
        """
        self.cfg = spade
        self.setting: str = spade["setting"]
        self.run_dir = Path(spade["run_dir"])
        self.run_dir.mkdir(parents=True, exist_ok=True)
        self.memory_path = self.run_dir / "memory.jsonl"
        self.state_path = self.run_dir / "pool_state.json"
        if restore_from is None:
            self._set_aside_leftovers()
        else:
            for name in POOL_STATE_FILES:
                shutil.copyfile(Path(restore_from) / name, self.run_dir / name)
        self.rng = random.Random(spade["seed"])
        self.np_rng = np.random.default_rng(spade["seed"])
        self.corpus = Corpus.load(spade["corpus"]) if spade.get("corpus") else None
        grounding = spade["designer"]["grounding"]
        if grounding not in ("corpus", "concepts"):
            raise ValueError(f"spade.designer.grounding must be corpus or concepts, got {grounding!r}")
        designing = not spade["fixed_env"]["enable"]
        if self.setting == "games" and self.corpus is None and designing and grounding == "corpus":
            raise ValueError(
                "spade.corpus is required to design games from documents (or set spade.designer.grounding=concepts "
                "for the no-corpus ablation, or enable spade.fixed_env)"
            )
        _check_skills(self.setting, spade["skills"])
        memory_cfg = dict(spade.get("memory") or {})
        self.use_memory = bool(memory_cfg.pop("enable", True))
        if not self.use_memory and spade["memory_replay_fraction"] > 0:
            raise ValueError("spade.memory_replay_fraction > 0 needs spade.memory.enable=true (replay plays memory)")
        rlve = spade["fixed_env"].get("rlve") or {}
        if rlve.get("enable") and not spade["fixed_env"]["enable"]:
            raise ValueError("spade.fixed_env.rlve.enable needs spade.fixed_env.enable=true (a baseline: no designer)")
        if rlve.get("enable"):
            from spade_envs.preflight import rlve_timeouts_check

            check = rlve_timeouts_check(spade)  # RLVE's generator timeout against the sandbox's (docs/baselines.md)
            if check.status == "fail":
                raise ValueError(f"{check.detail} -> {check.fix}")
        self.rlve = RLVETasks(rlve, spade["seed"]) if rlve.get("enable") else None
        lp = spade.get("learning_potential") or {}
        self.lp_fast = SkillEMA(float(lp.get("fast_ema", 0.98)))
        self.lp_slow = SkillEMA(float(lp.get("slow_ema", 0.85)))
        if self.memory_path.exists():
            self.memory = EnvMemory.load(self.memory_path)  # resume: the same memory the run left
        else:
            self.memory = EnvMemory(MemoryConfig.from_dict(memory_cfg))
            for spec in self._seed_specs():
                self.memory.add(MemoryRecord(spec=spec, win_rate=0.5, plays=0, last_played_step=0))
        self.live: list[str] = [r.env_id for r in self.memory if r.setting == self.setting and r.playable]
        self.generation: list[str] = []
        if restore_from is not None:
            self._load_state(json.loads(self.state_path.read_text(encoding="utf-8")))
        self.window: dict[str, list[float]] = defaultdict(list)
        self.events: list[dict[str, Any]] = []
        self.current_step = -1
        self.logged: set[int] = set()
        self.tasks: dict[tuple[int, int], dict[str, Any]] = {}
        self.agent_tasks: dict[tuple[int, int], dict[str, Any]] = {}
        self.lp_folded: set[int] = set()
        self.example = builtin_example(self.setting)

    def _set_aside_leftovers(self) -> None:
        leftovers = [self.run_dir / name for name in RUN_FILES if (self.run_dir / name).exists()]
        if not leftovers:
            return
        stale = self.run_dir / time.strftime("stale-%Y%m%d-%H%M%S", time.gmtime())
        stale.mkdir(exist_ok=True)
        for path in leftovers:
            path.replace(stale / path.name)
        logger.warning("spade: fresh start; %s left by an earlier run moved to %s", [p.name for p in leftovers], stale)

    def _seed_specs(self) -> list[EnvSpec]:
        """The built-ins of the setting, or the envs of a fixed pool directory (``spade-envs generate`` output)."""
        pool_dir = self.cfg["fixed_env"].get("pool_dir")
        if pool_dir:
            manifest = Path(pool_dir) / "manifest.jsonl"
            specs = []
            for line in manifest.read_text(encoding="utf-8").splitlines():
                row = json.loads(line)
                if row.get("valid"):
                    source = (Path(pool_dir) / "envs" / f"{row['env_id']}.py").read_text(encoding="utf-8")
                    specs.append(EnvSpec(row["env_id"], self.setting, row["skill"], source, doc_id=row.get("doc_id")))
            if not specs:
                raise ValueError(f"{manifest} lists no valid environment")
            return specs
        return [builtin_spec(e.name) for e in BUILTINS if e.setting == self.setting]

    # -- designer side --------------------------------------------------------------------------------------------
    def designer_task(self, step: int, design: int) -> dict[str, Any]:
        """What design ``design`` of regeneration ``step`` should build: skill, document (or concepts), prompt.

        Every design is its own task, as in the paper: the designer loop numbers designs ``slot x n + session``, so
        the ``rollout.n`` sessions of a designer row build from different documents (and, by rotation, skills). Its
        own RNG makes a design's task independent of the order in which the loops ask.
        """
        self._advance(step)
        if (step, design) in self.tasks:
            return self.tasks[(step, design)]
        rng = random.Random(f"{self.cfg['seed']}:{step}:{design}")
        skill = self._active_skills(step)[design % len(self._active_skills(step))]
        concepts: list[str] = []
        doc = text = None
        if self.cfg["designer"]["grounding"] == "concepts":
            concepts = concept_ideas(rng)
        elif self.corpus is not None:
            doc = self.corpus.sample(rng)
            text = truncate_words(doc.text, self.cfg["corpus_words"] or self.corpus.config.max_words(self.setting))
        domain = variant = None
        if self.setting == "tool_use":
            domain = rng.choice(DOMAINS)
            variant = rng.choices(list(VARIANT_WEIGHTS), weights=list(VARIANT_WEIGHTS.values()))[0]
        exemplars = []
        if self.use_memory:
            exemplars = exemplars_for_prompt(
                self.memory, self.setting, skill, np.random.default_rng(rng.getrandbits(64))
            )
        # without a document the example is always shown: the new game must differ from it
        example = self.example if self.cfg["designer"]["show_example"] or concepts else None
        messages = designer_messages(self.setting, text, skill, domain=domain, variant=variant, exemplars=exemplars,
                                     example_source=example, concepts=concepts)  # fmt: skip
        task = {"setting": self.setting, "skill": skill, "doc_id": doc.doc_id if doc else None, "domain": domain,
                "variant": variant, "messages": messages, "lp_slow": self.lp_slow.get(skill),
                "document": text, "cuts": exemplar_cuts(exemplars)}  # what the loop may shorten, drop  # fmt: skip
        self.tasks[(step, design)] = task
        return task

    def _active_skills(self, step: int) -> list[str]:
        """The skills of this regeneration: ``spade.skills.names`` (or all), ``active_per_regen`` of them in turn."""
        names = list(self.cfg["skills"]["names"] or SKILLS[self.setting])
        k = self.cfg["skills"]["active_per_regen"] or len(names)
        regen = step // max(1, self.cfg["regen_every"])
        return [names[(regen * k + i) % len(names)] for i in range(min(k, len(names)))]

    def register_design(self, step: int, outcome: dict[str, Any]) -> str | None:
        """Record one designer sample; an admitted env joins memory and the next generation of live envs."""
        self.events.append({"step": step, "kind": "design", **{k: v for k, v in outcome.items() if k != "source"}})
        if not outcome["valid"]:
            return None
        spec = EnvSpec(env_id="", setting=self.setting, skill=outcome["skill"], source=outcome["source"],
                       doc_id=outcome.get("doc_id"), created_step=step)  # fmt: skip
        env_id = f"{self.setting}-{outcome['skill']}-{spec.sha256[:12]}"
        spec = EnvSpec(**{**spec.to_dict(), "env_id": env_id})
        plays = len(outcome["seeds"])
        if env_id in self.memory:  # the same source admitted again (e.g. samples of one row converged): re-score it
            last = self.memory.get(env_id).last_played_step
            self.memory.update_stats(env_id, outcome["win_rate"], outcome["raw_regret"], plays, max(step, last))
        else:
            record = MemoryRecord(spec=spec, win_rate=outcome["win_rate"], regret=outcome["raw_regret"],
                                  plays=plays, last_played_step=step)  # fmt: skip
            if not self.memory.add(record):  # an AST-level duplicate: the stored env keeps its id and is re-scored
                return None
        if env_id not in self.generation:
            self.generation.append(env_id)
        return env_id

    def _advance(self, step: int) -> None:
        """First task of a new step: log the finished step, promote the envs designed in it, save memory."""
        if step <= self.current_step:
            return
        if self.current_step >= 0 and self.current_step not in self.logged:
            self.step_metrics(self.current_step)
        self._fold_learning_potential(self.current_step)
        self.tasks = {k: v for k, v in self.tasks.items() if k[0] >= step}
        self.agent_tasks = {k: v for k, v in self.agent_tasks.items() if k[0] >= step}
        if self.generation:  # envs designed at step K are played from step K + 1 on
            self.live = list(self.generation)
            self.generation = []
        self.save_state(str(self.run_dir))
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

    # -- agent side -----------------------------------------------------------------------------------------------
    def agent_task(self, step: int, slot: int) -> dict[str, Any]:
        """The env and seed of agent row ``slot`` at ``step``: live envs round-robin, plus memory replay."""
        self._advance(step)
        if (step, slot) in self.agent_tasks:  # every session of a row plays the same env and seed (one GRPO group)
            return self.agent_tasks[(step, slot)]
        if self.rlve is not None:
            self.agent_tasks[(step, slot)] = self.rlve.agent_task(step, slot)
            return self.agent_tasks[(step, slot)]
        replay = self.cfg["memory_replay_fraction"]
        if self.use_memory and replay > 0 and self.rng.random() < replay and len(self.memory) > 0:
            picked = self.memory.sample_replay(1, step, self.np_rng)
            env_id = picked[0].env_id if picked else self.live[slot % len(self.live)]
        else:
            env_id = self.live[(step * 7919 + slot) % len(self.live)]
        record = self.memory.get(env_id)
        seed = (self.cfg["seed"] * 1_000_003 + step * 10_007 + slot) % (2**31 - 1)
        task = {"env_id": env_id, "source": record.spec.source, "setting": record.setting, "seed": seed,
                "skill": record.skill, "step": step}  # fmt: skip
        self.agent_tasks[(step, slot)] = task
        return task

    def record_play(self, env_id: str, step: int, outcome: float, fault: str | None, slot: int | None = None) -> None:
        """An agent training play finished: re-score the env in memory (win rate over its plays so far).

        With the RLVE baseline the play instead counts in its env's difficulty window (``slot`` names its task).
        """
        self.events.append({"step": step, "kind": "play", "env_id": env_id, "outcome": outcome, "fault": fault})
        if self.rlve is not None and (step, slot) in self.agent_tasks:
            self.rlve.record(self.agent_tasks[(step, slot)], outcome, fault)
        if fault is not None:
            return
        if env_id not in self.memory:  # evicted since the play started: nothing to re-score
            return
        self.window[env_id].append(outcome)
        plays = self.window[env_id]
        last = self.memory.get(env_id).last_played_step  # plays of one step may finish in any order
        self.memory.update_stats(env_id, sum(plays) / len(plays), None, 1, max(step, last))  # plays accumulate

    # -- reporting and checkpoints -------------------------------------------------------------------------------
    def end_step(self, batch_metrics: dict[str, float] | None = None) -> dict[str, float]:
        """The trainer's step is over (all its loops finished): its metrics, for verl's logger and the JSONL.

        ``batch_metrics`` (per-role rewards and advantages, computed by the trainer) join the JSONL row.
        """
        if self.current_step < 0 or self.current_step in self.logged:
            return {}
        return self.step_metrics(self.current_step, batch_metrics)

    def save_state(self, folder: str) -> str:
        """Write :data:`POOL_STATE_FILES` into ``folder`` (the run dir, or a verl checkpoint folder)."""
        folder_path = Path(folder)
        self.memory.save(folder_path / "memory.jsonl")
        state = {"live": self.live, "generation": self.generation, "rng": _jsonable(self.rng.getstate()),
                 "np_rng": self.np_rng.bit_generator.state, "lp_fast": self.lp_fast.state_dict()["values"],
                 "lp_slow": self.lp_slow.state_dict()["values"],
                 "rlve_window": self.rlve.state_dict() if self.rlve is not None else None}  # fmt: skip
        tmp = folder_path / "pool_state.json.tmp"
        tmp.write_text(json.dumps(state), encoding="utf-8")
        tmp.replace(folder_path / "pool_state.json")
        return folder

    def _load_state(self, state: dict[str, Any]) -> None:
        known = {r.env_id for r in self.memory}
        missing = sorted(set(state["live"]) - known)
        if missing:
            raise ValueError(f"{self.state_path} names live envs that {self.memory_path} lacks: {missing[:3]}")
        self.live = list(state["live"]) or self.live
        self.generation = [e for e in state["generation"] if e in known]
        if self.rlve is not None and state.get("rlve_window"):
            self.rlve.load_state_dict(state["rlve_window"])
        self.lp_fast = SkillEMA(self.lp_fast.alpha, state.get("lp_fast"))
        self.lp_slow = SkillEMA(self.lp_slow.alpha, state.get("lp_slow"))
        self.rng.setstate(_tuples(state["rng"]))
        self.np_rng.bit_generator.state = state["np_rng"]

    def step_metrics(self, step: int, batch_metrics: dict[str, float] | None = None) -> dict[str, float]:
        """Metrics of ``step`` (validity, failure codes, regret, win rates, faults, diversity), logged as JSONL."""
        self.logged.add(step)
        events = [e for e in self.events if e["step"] == step]
        designs = [e for e in events if e["kind"] == "design"]
        plays = [e for e in events if e["kind"] == "play"]
        metrics: dict[str, float] = {"spade/step": step, "spade/live_envs": len(self.live),
                                     "spade/memory_size": len(self.memory),
                                     "spade/distinct_ast_hashes": len({r.ast_hash for r in self.memory})}  # fmt: skip
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
        for skill in SKILLS[self.setting]:
            fast, slow = self.lp_fast.get(skill), self.lp_slow.get(skill)
            if fast is not None and slow is not None:  # the learning-potential signal: fast minus slow EMA
                metrics[f"spade/lp/gap/{skill}"] = fast - slow
        if plays:
            ok = [p for p in plays if p["fault"] is None]
            metrics["spade/solve/env_fault_rate"] = 1 - len(ok) / len(plays)
            if ok:
                metrics["spade/solve/win_rate"] = float(np.mean([p["outcome"] >= 1.0 for p in ok]))
                metrics["spade/solve/outcome_mean"] = float(np.mean([p["outcome"] for p in ok]))
        with (self.run_dir / "spade_metrics.jsonl").open("a", encoding="utf-8") as f:
            f.write(json.dumps({"time": time.time(), **(batch_metrics or {}), **metrics}) + "\n")
        return metrics

    def finish(self) -> str:
        """End of training: log the last step and save memory; returns the memory path."""
        if self.current_step >= 0 and self.current_step not in self.logged:
            self.step_metrics(self.current_step)
        self.save_state(str(self.run_dir))
        return str(self.memory_path)


def _jsonable(value: Any) -> Any:
    return [_jsonable(v) for v in value] if isinstance(value, (tuple, list)) else value


def _tuples(value: Any) -> Any:
    return tuple(_tuples(v) for v in value) if isinstance(value, list) else value


def start_env_pool(spade: dict[str, Any], restore_from: str | None = None) -> Any:
    """Create the run's env pool actor (replacing any left in this Ray job), before any agent loop asks for it.

    The trainer calls this once it knows whether the run resumes, so the pool never guesses from the run directory.
    """
    import ray

    try:
        ray.kill(ray.get_actor(ACTOR_NAME))
    except ValueError:
        pass
    actor = ray.remote(SpadeEnvPool).options(name=ACTOR_NAME, lifetime="detached", num_cpus=0)
    handle = actor.remote(spade, restore_from)
    ray.get(handle.end_step.remote())  # surfaces a constructor error (bad corpus, bad checkpoint) here, clearly
    return handle


def _check_skills(setting: str, skills: dict[str, Any]) -> None:
    """``spade.skills``: known names of the setting, and a positive ``active_per_regen`` (or null for all)."""
    known = list(SKILLS[setting])
    unknown = sorted(set(skills.get("names") or ()) - set(known))
    if unknown:
        raise ValueError(f"spade.skills.names: unknown {setting} skills {unknown}; known: {known}")
    k = skills.get("active_per_regen")
    if k is not None and (not isinstance(k, int) or k < 1):
        raise ValueError(f"spade.skills.active_per_regen must be a positive int or null, got {k!r}")
