"""The Reasoning-Gym split the paper reports: 100 tasks in four groups, each with its A.3 "hard" dataset config.

The split ships with the package (``data/rg_hard_split.json``, from the Reasoning-Gym paper, arXiv 2505.24760,
Appendix A.3) so a run never reads a path outside it; its SHA-256 goes into ``results.json``. Each task is built
from its ``hard_configs`` entry at the installed reasoning-gym (pinned 0.1.25), not from curriculum levels. A
config that does not construct is a :class:`SplitConfigError` naming the task and the key, unless the file's
optional ``adaptations`` block replaces that task's config and says why.

The older grouping by Reasoning-Gym's own modules (curriculum top levels) stays available as ``split="modules"``.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from spade_envs.envs.errors import SpadeEnvError
from spade_envs.evaluation.suite import MissingDependency

__all__ = [
    "MODULE_GROUPS",
    "SPLIT_FILE",
    "SPLITS",
    "RgSplit",
    "SplitConfigError",
    "build_config",
    "paper_split",
    "rg_tasks",
]

#: The packaged split file.
SPLIT_FILE = Path(__file__).resolve().parent / "data" / "rg_hard_split.json"
#: ``paper``: the A.3 split (default); ``modules``: Reasoning-Gym's own modules at their top curriculum level.
SPLITS = ("paper", "modules")
#: The ``modules`` alternative: reported group -> Reasoning-Gym dataset modules whose tasks it pools.
MODULE_GROUPS: dict[str, tuple[str, ...]] = {
    "rg_math": ("arithmetic", "algebra", "geometry", "probability", "graphs"),
    "rg_algorithmic": ("algorithmic", "code"),
    "rg_cognition": ("cognition", "games"),
    "rg_logic": ("logic", "induction"),
}
_PROTOCOL_KEYS = {"episodes", "max_turns", "temperature", "max_tokens", "top_p"}


class SplitConfigError(SpadeEnvError):
    """A task of the split is unknown to the installed reasoning-gym, or its config does not construct."""


@dataclass(frozen=True)
class RgSplit:
    """The parsed split file: groups in file order, per-task configs, the shared protocol, and the file's checksum."""

    groups: dict[str, list[str]]
    hard_configs: dict[str, dict[str, Any]]
    protocol: dict[str, Any]
    adaptations: dict[str, dict[str, Any]]
    sha256: str

    def config_for(self, task: str) -> dict[str, Any]:
        """The config overrides of ``task``: its adaptation if the file has one, else its ``hard_configs`` entry."""
        if task in self.adaptations:
            return dict(self.adaptations[task]["config"])
        return dict(self.hard_configs[task])


def _reasoning_gym() -> Any:
    try:
        import reasoning_gym.factory as factory
    except ImportError as exc:
        raise MissingDependency("the Reasoning-Gym suites need it: pip install reasoning-gym==0.1.25") from exc
    return factory


def parse_split(path: Path) -> RgSplit:
    """Read and check a split file (every task in exactly one group, with a config; a known protocol)."""
    raw = path.read_bytes()
    data = json.loads(raw)
    groups = {name: list(tasks) for name, tasks in data["groups"].items()}
    configs, protocol = data["hard_configs"], dict(data["protocol"])
    listed = [task for tasks in groups.values() for task in tasks]
    twice = sorted({t for t in listed if listed.count(t) > 1})
    if twice:
        raise SplitConfigError(f"{path}: task(s) {twice} are in more than one group")
    without = sorted(set(listed) - set(configs))
    if without:
        raise SplitConfigError(f"{path}: task(s) {without} have no hard_configs entry")
    unknown = sorted(set(protocol) - _PROTOCOL_KEYS)
    if unknown:
        raise SplitConfigError(f"{path}: unknown protocol key(s) {unknown}; known: {sorted(_PROTOCOL_KEYS)}")
    adaptations = data.get("adaptations", {})
    for task, adaptation in adaptations.items():
        if not isinstance(adaptation.get("config"), dict) or not adaptation.get("why"):
            raise SplitConfigError(f"{path}: the adaptation of {task} needs a 'config' mapping and a 'why'")
    return RgSplit(groups, configs, protocol, adaptations, hashlib.sha256(raw).hexdigest())


@functools.cache
def paper_split() -> RgSplit:
    """The packaged paper split (parsed once)."""
    return parse_split(SPLIT_FILE)


def rg_tasks(group: str, split: str = "paper") -> list[str]:
    """The tasks of ``group``: the split file's list in its order (``paper``), or sorted module tasks (``modules``)."""
    if split not in SPLITS:
        raise ValueError(f"unknown Reasoning-Gym split {split!r}; known: {list(SPLITS)}")
    if group not in MODULE_GROUPS:
        raise ValueError(f"unknown Reasoning-Gym group {group!r}; known: {sorted(MODULE_GROUPS)}")
    if split == "paper":
        return list(paper_split().groups[group])
    factory = _reasoning_gym()
    return sorted(
        name
        for name, (cls, _config) in factory.DATASETS.items()
        if cls.__module__.split(".")[1] in MODULE_GROUPS[group]
    )


def build_config(task: str, overrides: dict[str, Any], seed: int, size: int) -> Any:
    """``task``'s config class built from ``overrides`` plus ``seed`` and ``size``, and validated.

    Raises :class:`SplitConfigError` naming the task and the key that fails: a key the config class lacks, or the
    first key that alone makes construction or validation fail (all keys when none fails alone).
    """
    factory = _reasoning_gym()
    if task not in factory.DATASETS:
        raise SplitConfigError(f"Reasoning-Gym task {task!r} does not exist in reasoning-gym {_version()}")
    config_cls = factory.DATASETS[task][1]
    known = {f.name for f in dataclasses.fields(config_cls)}
    unknown = sorted(set(overrides) - known)
    if unknown:
        raise SplitConfigError(f"Reasoning-Gym task {task}: config key(s) {unknown} do not exist in "
                               f"{config_cls.__name__} at reasoning-gym {_version()}")  # fmt: skip
    try:
        return _construct(config_cls, overrides, seed, size)
    except Exception as exc:  # noqa: BLE001 (any failure of the library's own checks is reported with its key)
        culprits = [key for key in overrides if _fails(config_cls, {key: overrides[key]}, seed, size)]
        keys = culprits[:1] or sorted(overrides)
        raise SplitConfigError(f"Reasoning-Gym task {task}: its config does not construct at reasoning-gym "
                               f"{_version()}; failing key {keys}: {type(exc).__name__}: {exc}") from exc  # fmt: skip


def _construct(config_cls: Any, overrides: dict[str, Any], seed: int, size: int) -> Any:
    config = config_cls(**{**overrides, "seed": seed, "size": size})
    if hasattr(config, "validate"):
        config.validate()
    return config


def _fails(config_cls: Any, overrides: dict[str, Any], seed: int, size: int) -> bool:
    try:
        _construct(config_cls, overrides, seed, size)
    except Exception:  # noqa: BLE001
        return True
    return False


def _version() -> str:
    import importlib.metadata

    return importlib.metadata.version("reasoning-gym")
