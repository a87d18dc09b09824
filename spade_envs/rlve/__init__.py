"""RLVE's verifiable environments as SPADE environments, with RLVE's adaptive difficulty (the paper's baseline).

API for the env pool (framework-free; nothing here runs RLVE code in the calling process)::

    from spade_envs.rlve import RLVEEnvSet, SlidingWindow, SlidingWindowConfig

    envs = RLVEEnvSet.from_names("official16")     # or "all", or ["Sorting", "SAT"]; unknown id -> UnknownRLVEEnv
    window = SlidingWindow(envs.env_ids, SlidingWindowConfig(window_attempts=128, accuracy=0.9, width=4))
    rng = random.Random(run_seed)
    for env_id in envs.env_ids:                    # the paper: 16 envs per step, 16 plays of one instance each
        inst = envs.instance(env_id, window.sample(env_id, rng), seed=rng.randrange(2**31))
        # each play: RemoteEnv(inst.source, pool); reset(inst.seed); step(extract_command(reply))
        window.record(env_id, inst.difficulty, successes=wins, attempts=16)   # win = outcome 1 (RLVE passed)
    metrics.update(window.metrics())              # rlve/h/<env>, rlve/l/<env>, rlve/h_mean
    checkpoint["rlve_window"] = window.state_dict()   # window.load_state_dict(...) on resume

``inst.source`` is ordinary env source (one class, ``max_turns = 1``, games setting): the sandbox worker imports
the one RLVE module it needs from the venv's read-only site-packages. ``inst.spec()`` is the same source as an
:class:`~spade_envs.envs.spec.EnvSpec` (id ``rlve_<env>_d<level>``, skill = the RLVE id) for code that keeps specs.
``rlve-gym`` must be installed.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from spade_envs.rlve.catalog import (
    OFFICIAL16,
    RLVECatalogError,
    RLVEEntry,
    UnknownRLVEEnv,
    gym_root,
    rlve_catalog,
)
from spade_envs.rlve.source import RLVEInstance, rlve_source
from spade_envs.rlve.window import SlidingWindow, SlidingWindowConfig

__all__ = [
    "OFFICIAL16",
    "RLVECatalogError",
    "RLVEEntry",
    "RLVEEnvSet",
    "RLVEInstance",
    "SET_NAMES",
    "SlidingWindow",
    "SlidingWindowConfig",
    "UnknownRLVEEnv",
    "gym_root",
    "rlve_catalog",
    "rlve_source",
]

#: Named sets :meth:`RLVEEnvSet.from_names` accepts besides a list of ids.
SET_NAMES = ("official16", "all")


@dataclass(frozen=True)
class RLVEEnvSet:
    """An ordered set of RLVE environments, checked against the installed rlve-gym at construction."""

    entries: tuple[RLVEEntry, ...]
    generate_timeout_s: int = 10

    @classmethod
    def from_names(cls, names: str | Sequence[str], generate_timeout_s: int = 10) -> RLVEEnvSet:
        """``"official16"``, ``"all"`` or a list of RLVE ids; an unknown id raises :class:`UnknownRLVEEnv`."""
        catalog = rlve_catalog()
        if isinstance(names, str):
            if names == "official16":
                ids: Sequence[str] = OFFICIAL16
            elif names == "all":
                ids = tuple(catalog)
            else:
                raise ValueError(f"unknown RLVE set {names!r}: use one of {SET_NAMES} or a list of ids")
        else:
            ids = tuple(names)
        if not ids:
            raise ValueError("an RLVE set needs at least one environment")
        if len(set(ids)) != len(ids):
            raise ValueError(
                f"an RLVE set names an environment twice: {sorted(i for i in set(ids) if ids.count(i) > 1)}"
            )
        for env_id in ids:
            if not isinstance(env_id, str) or env_id not in catalog:
                raise UnknownRLVEEnv(str(env_id), tuple(catalog))
        return cls(tuple(catalog[i] for i in ids), generate_timeout_s)

    @property
    def env_ids(self) -> tuple[str, ...]:
        return tuple(e.env_id for e in self.entries)

    def __len__(self) -> int:
        return len(self.entries)

    def source(self, env_id: str, difficulty: int) -> str:
        """Env source of ``env_id`` at ``difficulty`` (the same for every seed)."""
        for entry in self.entries:
            if entry.env_id == env_id:
                return rlve_source(entry, difficulty, self.generate_timeout_s)
        raise KeyError(f"{env_id!r} is not in this RLVE set")

    def instance(self, env_id: str, difficulty: int, seed: int) -> RLVEInstance:
        """The problem ``seed`` of ``env_id`` at ``difficulty``, ready for the sandbox."""
        if isinstance(seed, bool) or not isinstance(seed, int):
            raise ValueError(f"seed must be an int, got {seed!r}")
        return RLVEInstance(env_id, difficulty, seed, self.source(env_id, difficulty))
