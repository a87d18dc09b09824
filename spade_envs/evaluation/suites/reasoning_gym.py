r"""Reasoning-Gym, reported as four groups: RG-Math, RG-Algorithmic, RG-Cognition, RG-Logic.

Reasoning-Gym generates its tasks procedurally, so nothing is downloaded. By default a group is the paper's split
(:mod:`~spade_envs.evaluation.rg_split`: 31 / 36 / 24 / 9 tasks, each built with its A.3 "hard" dataset config, with
the split file's protocol: 8 episodes, 2 turns, T 0.6, 8192 tokens). ``split="modules"`` is the older alternative:
Reasoning-Gym's own modules with every curriculum attribute at its top level.

Protocol: each task is one item; each sample is one *episode* on its own generated instance (seeded by the
sample index), up to ``turns`` attempts: after a wrong answer the model is told so and tries again. An episode
is won when an attempt scores 1.0 under the task's own ``score_answer``; the group score is the pooled win rate.
The answer is the last complete ``\boxed{}`` of the visible text (outside ``<think>``), as for AIME; an attempt
without one has no answer and scores 0 without calling the scorer, so a response cut off at ``max_tokens`` cannot
win (some scorers accept any text: ``game_of_life_halting`` scores every non-empty answer 1.0).

``score_answer`` runs in a scorer process with a hard deadline (:mod:`~spade_envs.evaluation.scorer_pool`): some
scorers evaluate the answer (``simple_integration`` on ``10**10**10``) and would otherwise freeze the run. The
process rebuilds the task's dataset from its pickled config (datasets themselves can be megabytes or unpicklable)
and keeps it. A timeout counts as a wrong attempt and is logged; a task that fails to generate fails each of its
samples with the reason, and the rest of the group still runs.
"""

from __future__ import annotations

import hashlib
import logging
import pickle
import threading
import time
from pathlib import Path
from typing import Any

from spade_envs.design.extract import split_thinking
from spade_envs.envs.llm import ChatClient
from spade_envs.evaluation.answers import last_boxed
from spade_envs.evaluation.records import Item, SampleRecord, Sampling
from spade_envs.evaluation.rg_split import MODULE_GROUPS, SPLITS, build_config, paper_split, rg_tasks
from spade_envs.evaluation.scorer_pool import ScorerError, ScorerRaised, ScorerTimeout, shared_pool
from spade_envs.evaluation.suite import MissingDependency, Suite

__all__ = ["GROUPS", "ReasoningGymSuite", "rg_tasks"]

#: The ``modules`` alternative's grouping (kept under its old name).
GROUPS = MODULE_GROUPS
log = logging.getLogger(__name__)
#: Paper split: how often an instance that fails to generate is drawn again, and the seed shift of each redraw.
REDRAWS = 3
REDRAW_SEED_STEP = 7_919_113
#: Hard deadline of one ``score_answer`` call.
SCORE_TIMEOUT_S = 30.0
_PRELOAD = ("reasoning_gym",)
_WORKER_DATASETS: dict[tuple[str, str], Any] = {}  # filled only inside scorer processes
INSTRUCTION = "Reason step by step, then put your final answer within \\boxed{}."
RETRY = "That answer is not correct. Think again and give your final answer within \\boxed{}."


def _reasoning_gym() -> Any:
    try:
        import reasoning_gym.factory as factory
    except ImportError as exc:
        raise MissingDependency("the Reasoning-Gym suites need it: pip install reasoning-gym==0.1.25") from exc
    return factory


def _score_in_worker(task: str, config_blob: bytes, answer: str, entry: dict[str, Any]) -> float:
    """Runs in a scorer process: the task's ``score_answer`` on a dataset rebuilt from its config (kept per process)."""
    key = (task, hashlib.sha256(config_blob).hexdigest())
    dataset = _WORKER_DATASETS.get(key)
    if dataset is None:
        cls = _reasoning_gym().DATASETS[task][0]
        dataset = _WORKER_DATASETS[key] = cls(pickle.loads(config_blob))
    return float(dataset.score_answer(answer, entry))


def _paper_sampling() -> Sampling:
    """The split file's protocol; it names no top-p, so none is applied (1.0)."""
    protocol = paper_split().protocol
    return Sampling(n_samples=int(protocol["episodes"]), temperature=float(protocol["temperature"]),
                    top_p=float(protocol.get("top_p", 1.0)), max_tokens=int(protocol["max_tokens"]))  # fmt: skip


class ReasoningGymSuite(Suite):
    """One Reasoning-Gym group: every task an item, every sample an episode of up to ``turns`` attempts.

    Args:
        group: ``rg_math``, ``rg_algorithmic``, ``rg_cognition`` or ``rg_logic``.
        tasks: a subset of tasks to run instead of the whole group (each still built as ``split`` says).
        split: ``paper`` (the A.3 configs and the split file's protocol) or ``modules`` (curriculum top levels).
        hard: ``modules`` only: top curriculum levels (``True``) or each task's default config.
        turns: attempts per episode (default: the split file's ``max_turns``; 2 for ``modules``).
        seed: shifts every task's generator seed.
    """

    metric = "win@8"

    def __init__(
        self,
        group: str,
        *,
        tasks: list[str] | None = None,
        split: str = "paper",
        hard: bool = True,
        turns: int | None = None,
        seed: int = 0,
    ) -> None:
        super().__init__()
        if split not in SPLITS:
            raise ValueError(f"unknown Reasoning-Gym split {split!r}; known: {list(SPLITS)}")
        if split == "paper":
            turns = int(paper_split().protocol["max_turns"]) if turns is None else turns
            self.default_sampling = _paper_sampling()
        else:
            turns = 2 if turns is None else turns
            self.default_sampling = Sampling(n_samples=8, temperature=0.6, top_p=0.95, max_tokens=32768)
        if turns < 1:
            raise ValueError(f"turns must be >= 1, got {turns}")
        self.name, self.split, self.hard, self.turns, self.seed = group, split, hard, turns, seed
        self.tasks = list(tasks) if tasks is not None else rg_tasks(group, split)
        self.score_timeout_s = SCORE_TIMEOUT_S
        self._datasets: dict[str, Any] = {}
        self._configs: dict[str, bytes] = {}
        self._build_s: dict[str, float] = {}
        self._build_errors: dict[str, str] = {}
        self._redrawn: dict[tuple[str, int], tuple[Any, dict[str, Any]]] = {}
        self._lock = threading.Lock()

    def task_seed(self, task: str) -> int:
        """The generator seed of ``task`` (fixed per task, so reruns and resumes play the same instances)."""
        return self.seed * 1_000_003 + sum(map(ord, task))

    def load(self, data_dir: Path | None) -> list[Item]:
        """One item per task; with the paper split every task's config is also built and validated.

        So a config that does not construct stops the suite at load, with the task and the key named.
        """
        factory = _reasoning_gym()
        unknown = sorted(set(self.tasks) - set(factory.DATASETS))
        if unknown:
            raise ValueError(f"unknown Reasoning-Gym task(s) {unknown}")
        import importlib.metadata

        self.provenance = {"reasoning_gym": importlib.metadata.version("reasoning-gym"), "split": self.split,
                           "tasks": self.tasks, "turns": self.turns, "seed": self.seed}  # fmt: skip
        if self.split == "paper":
            split = paper_split()
            outside = sorted(set(self.tasks) - set(split.hard_configs))
            if outside:
                raise ValueError(f"task(s) {outside} are not in the paper's Reasoning-Gym split; use split='modules'")
            for task in self.tasks:
                build_config(task, split.config_for(task), self.task_seed(task), 1)
            adapted = {t: split.adaptations[t]["why"] for t in self.tasks if t in split.adaptations}
            self.provenance |= {"split_sha256": split.sha256, "protocol": split.protocol, "adapted": adapted}
        else:
            self.provenance["hard"] = self.hard
        return [Item(task, "", None, {"task": task}) for task in self.tasks]

    def dataset(self, task: str, size: int) -> Any:
        """The task's generator at this suite's difficulty (built once, shared by threads: reads are pure).

        Raises ``RuntimeError`` when the task generates at no level; the failure is kept, so the other samples of
        the task fail at once instead of retrying every level.
        """
        with self._lock:
            if task in self._build_errors:
                raise RuntimeError(self._build_errors[task])
            if task not in self._datasets:
                factory = _reasoning_gym()
                seed = self.task_seed(task)
                started = time.monotonic()
                try:
                    dataset = self._build(factory, task, seed, size)
                except Exception as exc:
                    self._build_errors[task] = str(exc)[:2000]
                    self.provenance.setdefault("failed_tasks", {})[task] = self._build_errors[task]
                    raise
                self._datasets[task] = dataset
                self._configs[task] = pickle.dumps(dataset.config)
                self._build_s[task] = time.monotonic() - started
            return self._datasets[task]

    def _build(self, factory: Any, task: str, seed: int, size: int) -> Any:
        cls, config_cls = factory.DATASETS[task]
        if self.split == "paper":
            return cls(build_config(task, paper_split().config_for(task), seed, size))
        if not (self.hard and factory.has_curriculum(task)):
            return cls(config_cls(seed=seed, size=size))
        curriculum = factory.create_curriculum(task)
        top = max(len(attr.levels) for attr in curriculum.attributes.values())
        errors = []
        for level in range(top - 1, -1, -1):  # some tasks' top levels are invalid configs: step down until one works
            for name, attr in curriculum.attributes.items():
                curriculum.set_attr_level(name, min(level, len(attr.levels) - 1))
            try:
                dataset = cls(curriculum.generate_configuration({"seed": seed, "size": size}))
                dataset[0]
            except Exception as exc:
                errors.append(f"level {level}: {type(exc).__name__}: {exc}")
                continue
            self.provenance.setdefault("levels", {})[task] = level
            return dataset
        raise RuntimeError(f"Reasoning-Gym task {task} generates at no curriculum level: {errors}")

    def instance(self, item: Item, sample: int, n_samples: int) -> tuple[Any, dict[str, Any]]:
        """The dataset and the generated entry that episode ``sample`` of ``item`` plays.

        Some generators give up on some seeds (``knight_swap`` at its suite seed, instance 0: "Failed to generate
        valid puzzle"). With the paper split such an instance is drawn again from the same config at a shifted seed
        (at most :data:`REDRAWS` times, the same every run) and ``provenance.redrawn`` lists it.
        """
        task = item.meta["task"]
        dataset = self.dataset(task, max(n_samples, sample + 1))
        if (task, sample) in self._redrawn:  # a failing generator can take seconds to give up: only once
            return self._redrawn[task, sample]
        try:
            return dataset, dataset[sample]
        except Exception as exc:
            if self.split != "paper":
                raise
            first = f"{type(exc).__name__}: {exc}"
        cls = _reasoning_gym().DATASETS[task][0]
        for redraw in range(1, REDRAWS + 1):
            seed = self.task_seed(task) + redraw * REDRAW_SEED_STEP
            other = cls(build_config(task, paper_split().config_for(task), seed, max(n_samples, sample + 1)))
            try:
                entry = other[sample]
            except Exception:  # noqa: BLE001, S112 (the same generator failure; try the next seed)
                continue
            with self._lock:
                self.provenance.setdefault("redrawn", {}).setdefault(task, {})[str(sample)] = seed
                self._redrawn[task, sample] = (other, entry)
            return other, entry
        raise RuntimeError(f"Reasoning-Gym task {task}: instance {sample} fails to generate at its seed and "
                           f"{REDRAWS} redraws: {first}")  # fmt: skip

    def run_sample(self, client: ChatClient, item: Item, sample: int, sampling: Sampling) -> SampleRecord:
        _dataset, entry = self.instance(item, sample, sampling.n_samples)
        messages = [{"role": "user", "content": f"{entry['question']}\n\n{INSTRUCTION}"}]
        best, pred, text, timeouts = 0.0, "", "", 0
        for turn in range(self.turns):
            text = client.complete(
                messages, temperature=sampling.temperature, top_p=sampling.top_p, max_tokens=sampling.max_tokens
            ).text
            boxed = last_boxed(split_thinking(text)[0])  # as AIME: no complete box in the visible text, no answer
            pred = "" if boxed is None else boxed.strip()
            score, timed_out = (0.0, False) if boxed is None else self.score(item.meta["task"], pred, entry)
            best, timeouts = max(best, score), timeouts + timed_out
            if best >= 1.0 or turn + 1 == self.turns:
                break
            messages += [{"role": "assistant", "content": text}, {"role": "user", "content": RETRY}]
        detail: dict[str, Any] = {"turns": turn + 1, "partial": best}
        if timeouts:
            detail["scorer_timeout"] = timeouts
        return self.record(item, sample, float(best >= 1.0), pred, text, **detail)

    def score(self, task: str, answer: str, entry: dict[str, Any]) -> tuple[float, bool]:
        """``(score_answer's score, timed out)`` in a scorer process; a raising scorer or a timeout scores 0."""
        try:
            blob = self._configs[task]
            # a scorer process rebuilds the dataset on its first call for the task: that time is not the scorer's
            deadline = self.score_timeout_s + 3 * self._build_s[task]
            value = shared_pool(_PRELOAD).call(_score_in_worker, task, blob, answer, entry, timeout_s=deadline)
        except ScorerTimeout:
            log.warning("Reasoning-Gym %s: score_answer timed out after %g s on %.200r: counted wrong", task,
                        self.score_timeout_s, answer)  # fmt: skip
            return 0.0, True
        except (ScorerRaised, ScorerError):  # some scorers raise (or crash) on unparseable answers: wrong answer
            return 0.0, False
        return value, False
