"""The twelve built-in environments: six games and six tool-use worlds, one per skill.

Each lives in its own source file in exactly the form a designer must produce, so they serve as prompt exemplars,
as the fixed-environment baseline pool and as test fixtures. They are trusted code: loading them in-process is
fine, unlike generated environments.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from importlib import resources

import gymnasium

from spade_envs.envs.gym_adapter import TextEnv
from spade_envs.envs.loader import load_env_class
from spade_envs.envs.spec import EnvSpec

__all__ = ["BUILTINS", "BuiltinEntry", "builtin", "builtin_source", "builtin_spec", "load_builtin", "register_builtins"]


@dataclass(frozen=True)
class BuiltinEntry:
    """Catalogue row: class name, setting, skill, domain (tool use only) and source file in this package."""

    name: str
    setting: str
    skill: str
    path: str
    domain: str = ""


BUILTINS: tuple[BuiltinEntry, ...] = (
    BuiltinEntry("VaultCodeEnv", "games", "mathematical_reasoning", "games/vault_code.py"),
    BuiltinEntry("DeductionGridEnv", "games", "logical_deduction", "games/deduction_grid.py"),
    BuiltinEntry("FogCourierEnv", "games", "spatial_reasoning", "games/fog_courier.py"),
    BuiltinEntry("SequenceOracleEnv", "games", "pattern_recognition", "games/sequence_oracle.py"),
    BuiltinEntry("SurveyRouteEnv", "games", "optimization", "games/survey_route.py"),
    BuiltinEntry("SwitchboardEnv", "games", "causal_inference", "games/switchboard.py"),
    BuiltinEntry("TripBookingEnv", "tool_use", "api_orchestration", "tool_use/trip_booking.py", "travel"),
    BuiltinEntry("CrmReportEnv", "tool_use", "data_retrieval", "tool_use/crm_report.py", "crm"),
    BuiltinEntry("SmartHomeSceneEnv", "tool_use", "state_modification", "tool_use/smart_home_scene.py", "smart_home"),
    BuiltinEntry(
        "BankTransferRecoveryEnv", "tool_use", "error_recovery", "tool_use/bank_transfer_recovery.py", "banking"
    ),
    BuiltinEntry("TaskTriageEnv", "tool_use", "tool_selection", "tool_use/task_triage.py", "task_tracker"),
    BuiltinEntry("RetailAfterSalesEnv", "tool_use", "multi_step_workflows", "tool_use/retail_after_sales.py", "retail"),
)
_BY_NAME = {e.name: e for e in BUILTINS}


def builtin(name: str) -> BuiltinEntry:
    """Catalogue entry by class name; the error lists the known names."""
    try:
        return _BY_NAME[name]
    except KeyError:
        raise KeyError(f"no built-in environment {name!r}; known: {', '.join(_BY_NAME)}") from None


def builtin_source(name: str) -> str:
    """The source text of a built-in, as shipped in the package."""
    return resources.files(__package__).joinpath(builtin(name).path).read_text(encoding="utf-8")


@cache
def load_builtin(name: str) -> type:
    """The environment class of a built-in, loaded from its source through the same loader generated code uses."""
    return load_env_class(builtin_source(name))


def builtin_spec(name: str) -> EnvSpec:
    """The :class:`EnvSpec` of a built-in (no provenance: it was written by hand)."""
    entry = builtin(name)
    return EnvSpec(
        env_id=f"builtin/{entry.name}",
        setting=entry.setting,
        skill=entry.skill,
        source=builtin_source(name),
        metadata={"domain": entry.domain} if entry.domain else {},
    )


def _make_builtin(name: str, max_turns: int | None = None) -> TextEnv:
    return TextEnv(load_builtin(name), max_turns=max_turns)


def register_builtins() -> list[str]:
    """Register ``spade_envs/<ClassName>-v0`` with gymnasium for every built-in (idempotent); return the ids."""
    ids = []
    for entry in BUILTINS:
        env_id = f"spade_envs/{entry.name}-v0"
        if env_id not in gymnasium.registry:
            gymnasium.register(id=env_id, entry_point=_make_builtin, kwargs={"name": entry.name})
        ids.append(env_id)
    return ids
