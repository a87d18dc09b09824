"""The environment pool: one named Ray actor holding the corpus, the environment memory and the live envs.

Agent loops run in many processes; this actor is where they meet. The designer loop asks it for a design task
(skill, document, memory exemplars) and registers what it admitted; the env agent loop asks it which live env and
seed to play and reports the outcome. The state and its transitions are ``spade_envs.curriculum.Curriculum`` (the
same class the full-length tests drive); this module adds the run directory, the corpus, the seed envs and the
designer prompts. Memory and pool state are saved atomically at every step and restored on resume.
"""

from __future__ import annotations

import json
import logging
import random
import shutil
import time
from pathlib import Path
from typing import Any

import numpy as np

from recipe.spade.rlve_tasks import RLVETasks
from spade_envs.browse.run_record import RECORD_FILE, RecordCaps, RunRecord
from spade_envs.browse.step_log import cut_after
from spade_envs.builtin import BUILTINS, builtin_spec
from spade_envs.curriculum import POOL_STATE_FILES, Curriculum, CurriculumConfig, TaskSource, seed_memory
from spade_envs.design.corpus import Corpus, truncate_words
from spade_envs.design.designer import exemplars_for_prompt
from spade_envs.design.memory import EnvMemory, MemoryConfig
from spade_envs.design.prompts import VARIANT_WEIGHTS, builtin_example, concept_ideas, designer_messages, exemplar_cuts
from spade_envs.design.rewards import SkillEMA
from spade_envs.envs.skills import DOMAINS, SKILLS
from spade_envs.envs.spec import EnvSpec

__all__ = [
    "ACTOR_NAME",
    "BATCHES_FILE",
    "POOL_STATE_FILES",
    "RUN_FILES",
    "SpadeEnvPool",
    "check_memory_capacity",
    "end_env_pool",
    "start_env_pool",
]

ACTOR_NAME = "spade_env_pool"
#: The trainer's audit of every trained row (``spade.dump_batches``), one line per row, keyed by verl's global step.
BATCHES_FILE = "batches.jsonl"
#: What a run writes into ``spade.run_dir`` that a later fresh start must not pick up.
RUN_FILES = (*POOL_STATE_FILES, "spade_metrics.jsonl", RECORD_FILE, BATCHES_FILE)

logger = logging.getLogger(__name__)


class SpadeEnvPool:
    """State shared by all agent loops of a run (instantiate as a named Ray actor: :data:`ACTOR_NAME`).

    The state and its transitions are :class:`~spade_envs.curriculum.Curriculum` (``self.state``); this class adds
    what needs the run's config: the run directory, the corpus, the seed envs and the designer prompts.
    """

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
            self.state_path.chmod(0o600)  # it holds the run's seed secret (spade_envs/design/seed_secret.py)
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
            from spade_envs.cli.preflight import rlve_timeouts_check

            check = rlve_timeouts_check(spade)  # RLVE's generator timeout against the sandbox's (docs/baselines.md)
            if check.status == "fail":
                raise ValueError(f"{check.detail} -> {check.fix}")
        if self.memory_path.exists():
            memory = EnvMemory.load(self.memory_path)  # resume: the same memory the run left
            _warn_on_drift(memory.config, MemoryConfig.from_dict(memory_cfg))
        else:
            memory = seed_memory(EnvMemory(MemoryConfig.from_dict(memory_cfg)), self._seed_specs())
        tasks = RLVETasks(rlve, spade["seed"]) if rlve.get("enable") else None
        self.state = Curriculum(CurriculumConfig.from_spade(spade), memory, self.run_dir, tasks)
        if restore_from is not None:
            self.state.load_state(json.loads(self.state_path.read_text(encoding="utf-8")), str(self.state_path))
        self.recorder = RunRecord(self.run_dir, RecordCaps.from_dict(spade.get("record")))
        if restore_from is not None and self.state.current_step >= 0:  # steps after the checkpoint run again
            self.recorder.truncate_after(self.state.current_step)
            # verl's global step G trains schedule step G - 1 (one step per batch, in order: main_spade checks)
            cut_after(self.run_dir / BATCHES_FILE, "global_step", self.state.current_step + 1)
        _check_capacity(memory.config.capacity, len(self.state.live), spade["envs_per_regen"])
        self.tasks: dict[tuple[int, int], dict[str, Any]] = {}
        self.example = builtin_example(self.setting)

    @property
    def memory(self) -> EnvMemory:
        return self.state.memory

    @property
    def live(self) -> list[str]:
        return self.state.live

    @property
    def generation(self) -> list[str]:
        return self.state.generation

    @property
    def rlve(self) -> TaskSource | None:
        return self.state.rlve

    @property
    def lp_fast(self) -> SkillEMA:
        return self.state.lp_fast

    @property
    def lp_slow(self) -> SkillEMA:
        return self.state.lp_slow

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

    def ready(self) -> bool:
        """Nothing to do: a first call that returns once the constructor has run (or raises its error)."""
        return True

    def seed_secret(self) -> bytes:
        """The run's seed secret, for the designer loops' validation and measurement seeds (never for env code)."""
        return self.state.secret

    # -- designer side --------------------------------------------------------------------------------------------
    def designer_task(self, step: int, design: int) -> dict[str, Any]:
        """What design ``design`` of regeneration ``step`` should build: skill, document (or concepts), prompt.

        Every design is its own task, as in the paper: the designer loop numbers designs ``slot x n + session``, so
        the ``rollout.n`` sessions of a designer row build from different documents (and, by rotation, skills). Its
        own RNG makes a design's task independent of the order in which the loops ask.
        """
        self.state.advance(step)
        self.tasks = {k: v for k, v in self.tasks.items() if k[0] >= step}
        if (step, design) in self.tasks:
            return self.tasks[(step, design)]
        rng = random.Random(f"{self.cfg['seed']}:{step}:{design}")
        skill = self.state.design_skill(step, design)
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

    def register_design(self, step: int, outcome: dict[str, Any]) -> str | None:
        """Record one designer sample; an admitted env joins memory and the next generation of live envs."""
        return self.state.register_design(step, outcome)

    def record(self, entries: list[dict[str, Any]]) -> None:
        """Append entries to the run record (``spade.record``; this actor is its one writer)."""
        for entry in entries:
            self.recorder.write(entry)

    # -- agent side -----------------------------------------------------------------------------------------------
    def agent_task(self, step: int, slot: int) -> dict[str, Any]:
        """The env and seed of agent row ``slot`` at ``step``: live envs round-robin, plus memory replay."""
        return self.state.agent_task(step, slot)

    def record_play(self, env_id: str, step: int, outcome: float, fault: str | None, slot: int | None = None) -> None:
        """An agent training play finished: re-score its env (or, with RLVE, count it in its difficulty window)."""
        self.state.record_play(env_id, step, outcome, fault, slot)

    # -- reporting and checkpoints -------------------------------------------------------------------------------
    def end_step(self, batch_metrics: dict[str, float] | None = None) -> dict[str, float]:
        """The trainer's step is over: its metrics (``batch_metrics`` from the trainer join the JSONL row)."""
        return self.state.end_step(batch_metrics)

    def save_state(self, folder: str) -> str:
        """Write :data:`POOL_STATE_FILES` into ``folder`` (the run dir, or a verl checkpoint folder)."""
        return self.state.save_state(folder)

    def step_metrics(self, step: int, batch_metrics: dict[str, float] | None = None) -> dict[str, float]:
        """Metrics of ``step``, logged as JSONL (:meth:`Curriculum.step_metrics`)."""
        return self.state.step_metrics(step, batch_metrics)

    def finish(self) -> str:
        """End of training: log the last step and save memory; returns the memory path."""
        return self.state.finish()


def _warn_on_drift(saved: MemoryConfig, asked: MemoryConfig) -> None:
    """A resume keeps the memory's saved settings; say so when ``spade.memory`` now asks for others."""
    changed = {k: (v, getattr(asked, k)) for k, v in vars(saved).items() if getattr(asked, k) != v}
    if changed:
        diff = ", ".join(f"{k} {old!r} (saved) vs {new!r} (config)" for k, (old, new) in changed.items())
        logger.warning("spade: resumed memory keeps its saved settings; spade.memory now differs and is ignored: %s",
                       diff)  # fmt: skip


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
    ray.get(handle.ready.remote())  # surfaces a constructor error (bad corpus, bad checkpoint) here, clearly
    return handle


def end_env_pool() -> bool:
    """Kill this job's env pool actor, if there is one (a persistent cluster would otherwise keep it and its corpus)."""
    import ray

    if not ray.is_initialized():
        return False
    try:
        ray.kill(ray.get_actor(ACTOR_NAME))
    except ValueError:
        return False
    return True


def check_memory_capacity(spade: dict[str, Any]) -> None:
    """The capacity check of a fresh start, before Ray starts (``prepare()``): the seed envs are the built-ins.

    With a fixed pool (``spade.fixed_env.pool_dir``) the pool itself checks at start, once it has read the manifest.
    """
    if not spade["fixed_env"].get("pool_dir"):
        builtins = sum(e.setting == spade["setting"] for e in BUILTINS)
        _check_capacity(int((spade.get("memory") or {}).get("capacity", 1000)), builtins, spade["envs_per_regen"])


def _check_capacity(capacity: int, live: int, per_regen: int) -> None:
    """Memory must hold the live envs, a regeneration's admitted designs (both never evicted) and one more."""
    need = max(live, per_regen) + per_regen + 1
    if capacity < need:
        raise ValueError(
            f"spade.memory.capacity ({capacity}) must be at least {need}: the live envs ({max(live, per_regen)} at "
            f"most) and the spade.envs_per_regen ({per_regen}) designs about to go live are never evicted"
        )


def _check_skills(setting: str, skills: dict[str, Any]) -> None:
    """``spade.skills``: known names of the setting, and a positive ``active_per_regen`` (or null for all)."""
    known = list(SKILLS[setting])
    unknown = sorted(set(skills.get("names") or ()) - set(known))
    if unknown:
        raise ValueError(f"spade.skills.names: unknown {setting} skills {unknown}; known: {known}")
    k = skills.get("active_per_regen")
    if k is not None and (not isinstance(k, int) or k < 1):
        raise ValueError(f"spade.skills.active_per_regen must be a positive int or null, got {k!r}")
