"""verl plugin entry point: importing this module makes verl 0.9.1 able to run on CPU.

verl imports it in every process (driver and Ray workers) through the ``verl.plugins`` entry point this package
declares, or through ``VERL_USE_EXTERNAL_MODULES=recipe.spade.cpu.plugin``. It always registers the ``cpu``
platform and the ``hf`` rollout (harmless on GPU hosts: neither is chosen unless asked for), and applies the
monkeypatches only when ``VERL_PLATFORM=cpu``; there, in a Ray worker, it also takes the importing thread out of
Ray's nice 15 (``worker_priority.py``). Importing it twice is harmless.
"""

from __future__ import annotations

import os

from verl.workers.rollout.replica import RolloutReplicaRegistry

from recipe.spade.cpu import patches, worker_priority
from recipe.spade.cpu import platform as _platform  # noqa: F401  (registers PlatformCPU)


def _load_hf_replica() -> type:
    from recipe.spade.cpu.hf_rollout import HFReplica

    return HFReplica


def _load_scripted_replica() -> type:
    from recipe.spade.cpu.scripted import ScriptedDesignerReplica

    return ScriptedDesignerReplica


def _load_ladder_replica() -> type:
    from recipe.spade.cpu.ladder_designer import LadderDesignerReplica

    return LadderDesignerReplica


def _load_soak_replica() -> type:
    from recipe.spade.cpu.scripted import SoakDesignerReplica

    return SoakDesignerReplica


RolloutReplicaRegistry.register("hf", _load_hf_replica)
RolloutReplicaRegistry.register("hf_scripted", _load_scripted_replica)
RolloutReplicaRegistry.register("hf_soak", _load_soak_replica)
RolloutReplicaRegistry.register("hf_ladder", _load_ladder_replica)
if os.environ.get("VERL_PLATFORM", "").strip().lower() == "cpu":
    patches.apply_all()
    if worker_priority.is_ray_worker_process():
        worker_priority.leave_ray_niceness()
