"""The skills and domains environments are designed for, with the descriptions designer prompts show."""

from __future__ import annotations

__all__ = ["DOMAINS", "SKILLS", "skill_description"]

SKILLS: dict[str, dict[str, str]] = {
    "games": {
        "mathematical_reasoning": "solve problems and equations whose answers must be computed, not guessed",
        "logical_deduction": "draw conclusions from premises and rules revealed during play",
        "spatial_reasoning": "track positions, directions and spatial relations on a map or grid",
        "pattern_recognition": "infer the rule behind sequences of numbers, symbols or text",
        "optimization": "find the best solution under constraints, not just a feasible one",
        "causal_inference": "discover cause-effect relations by intervening and observing",
    },
    "tool_use": {
        "api_orchestration": "chain state-changing calls where each call needs the result of the previous one",
        "data_retrieval": "query first, aggregate the results, then answer or act precisely",
        "state_modification": "bring the world into a required state through dependent mutations",
        "error_recovery": "notice failed calls, work out why, fix the cause and retry",
        "tool_selection": "choose the right tool among similar ones and ignore distractors",
        "multi_step_workflows": "follow an ordered pipeline that reuses earlier results across requests",
    },
}

DOMAINS: tuple[str, ...] = (
    "retail",
    "travel",
    "telecom",
    "banking",
    "calendar",
    "filesystem",
    "cart",
    "crm",
    "smart_home",
    "task_tracker",
)


def skill_description(setting: str, skill: str) -> str:
    """Description of ``skill`` in ``setting``; a clear ``KeyError`` names the known skills otherwise."""
    try:
        return SKILLS[setting][skill]
    except KeyError:
        known = ", ".join(f"{s}/{k}" for s, ks in SKILLS.items() for k in ks)
        raise KeyError(f"unknown skill {setting}/{skill}; known: {known}") from None
