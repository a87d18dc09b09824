"""Reasoning-Gym hard tasks, reported as four groups: RG-Math, RG-Algorithmic, RG-Cognition, RG-Logic.

Reasoning-Gym generates its tasks procedurally, so nothing is downloaded. A group's tasks are Reasoning-Gym's
own dataset modules (see :data:`GROUPS`): 33 / 36 / 24 / 9 tasks. The paper reports a 100-task split with 31 / 36
/ 24 / 9; which two math tasks it dropped is not recorded in our notes, so ``exclude`` takes task names to drop.
ARC tasks and ``composite`` are left out. "Hard" sets every curriculum attribute of a task to its top level.

Protocol: each task is one item; each sample is one *episode* on its own generated instance (seeded by the
sample index), up to ``turns`` attempts: after a wrong answer the model is told so and tries again. An episode
is won when an attempt scores 1.0 under the task's own ``score_answer``; the group score is the pooled win rate.

``score_answer`` runs in a scorer process with a hard deadline (:mod:`~spade_envs.evaluation.scorer_pool`): some
scorers evaluate the answer (``simple_integration`` on ``10**10**10``) and would otherwise freeze the run. The
process rebuilds the task's dataset from its pickled config (datasets themselves can be megabytes or unpicklable)
and keeps it. A timeout counts as a wrong attempt and is logged; a task that generates at no level fails each of
its samples with the reason, and the rest of the group still runs.
"""

from __future__ import annotations

import hashlib
import logging
import pickle
import threading
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from spade_envs.contract import extract_command
from spade_envs.evaluation.records import Item, SampleRecord, Sampling
from spade_envs.evaluation.scorer_pool import ScorerError, ScorerRaised, ScorerTimeout, shared_pool
from spade_envs.evaluation.suite import MissingDependency, Suite
from spade_envs.llm import ChatClient

__all__ = ["GROUPS", "ReasoningGymSuite", "rg_tasks"]

#: Reported group -> Reasoning-Gym dataset modules (``reasoning_gym/<module>/``) whose tasks it pools.
GROUPS: dict[str, tuple[str, ...]] = {
    "rg_math": ("arithmetic", "algebra", "geometry", "probability", "graphs"),
    "rg_algorithmic": ("algorithmic", "code"),
    "rg_cognition": ("cognition", "games"),
    "rg_logic": ("logic", "induction"),
}
log = logging.getLogger(__name__)
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


def rg_tasks(group: str, exclude: Iterable[str] = ()) -> list[str]:
    """Sorted Reasoning-Gym task names of ``group`` (a key of :data:`GROUPS`), minus ``exclude``."""
    if group not in GROUPS:
        raise ValueError(f"unknown Reasoning-Gym group {group!r}; known: {sorted(GROUPS)}")
    factory = _reasoning_gym()
    skip = set(exclude)
    return sorted(
        name
        for name, (cls, _config) in factory.DATASETS.items()
        if cls.__module__.split(".")[1] in GROUPS[group] and name not in skip
    )


def _score_in_worker(task: str, config_blob: bytes, answer: str, entry: dict[str, Any]) -> float:
    """Runs in a scorer process: the task's ``score_answer`` on a dataset rebuilt from its config (kept per process)."""
    key = (task, hashlib.sha256(config_blob).hexdigest())
    dataset = _WORKER_DATASETS.get(key)
    if dataset is None:
        cls = _reasoning_gym().DATASETS[task][0]
        dataset = _WORKER_DATASETS[key] = cls(pickle.loads(config_blob))
    return float(dataset.score_answer(answer, entry))


class ReasoningGymSuite(Suite):
    """One Reasoning-Gym group: every task an item, every sample an episode of up to ``turns`` attempts."""

    metric = "win@8"
    default_sampling = Sampling(n_samples=8, temperature=0.6, top_p=0.95, max_tokens=32768)

    def __init__(
        self, group: str, *, tasks: list[str] | None = None, hard: bool = True, turns: int = 2, seed: int = 0
    ) -> None:
        super().__init__()
        if turns < 1:
            raise ValueError(f"turns must be >= 1, got {turns}")
        self.name, self.hard, self.turns, self.seed = group, hard, turns, seed
        self.tasks = tasks if tasks is not None else rg_tasks(group)
        self.score_timeout_s = SCORE_TIMEOUT_S
        self._datasets: dict[str, Any] = {}
        self._configs: dict[str, bytes] = {}
        self._build_s: dict[str, float] = {}
        self._build_errors: dict[str, str] = {}
        self._lock = threading.Lock()

    def load(self, data_dir: Path | None) -> list[Item]:
        factory = _reasoning_gym()
        unknown = sorted(set(self.tasks) - set(factory.DATASETS))
        if unknown:
            raise ValueError(f"unknown Reasoning-Gym task(s) {unknown}")
        import importlib.metadata

        self.provenance = {"reasoning_gym": importlib.metadata.version("reasoning-gym"), "tasks": self.tasks,
                           "hard": self.hard, "turns": self.turns, "seed": self.seed}  # fmt: skip
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
                seed = self.seed * 1_000_003 + sum(map(ord, task))
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
        """The dataset and the generated entry that episode ``sample`` of ``item`` plays."""
        dataset = self.dataset(item.meta["task"], max(n_samples, sample + 1))
        return dataset, dataset[sample]

    def run_sample(self, client: ChatClient, item: Item, sample: int, sampling: Sampling) -> SampleRecord:
        _dataset, entry = self.instance(item, sample, sampling.n_samples)
        messages = [{"role": "user", "content": f"{entry['question']}\n\n{INSTRUCTION}"}]
        best, pred, text, timeouts = 0.0, "", "", 0
        for turn in range(self.turns):
            text = client.complete(
                messages, temperature=sampling.temperature, top_p=sampling.top_p, max_tokens=sampling.max_tokens
            ).text
            pred = extract_command(text)
            score, timed_out = self.score(item.meta["task"], pred, entry)
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
