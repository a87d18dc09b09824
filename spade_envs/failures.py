"""Why a designed environment (or its hint) was rejected: one stable code per reason.

Validation reports these codes, the designer reward maps each to a (negative) penalty from config, memory stores
them, and metrics count them. Keeping them in one table keeps all four in step.
"""

from __future__ import annotations

__all__ = ["FAILURE_CODES", "HINT_FAILURE_CODES", "describe"]

#: Environment failures, in the order validation checks them.
FAILURE_CODES: dict[str, str] = {
    "no_code_block": "the response has no complete python code block outside <think>",
    "syntax_error": "the code does not parse",
    "exec_error": "executing the module raised",
    "no_env_class": "no class whose name ends in 'Env'",
    "several_env_classes": "more than one class whose name ends in 'Env'",
    "missing_method": "the class lacks reset, step or solution",
    "construct_failed": "the class cannot be constructed without arguments, or has no positive int max_turns",
    "wrong_setting": "a game was expected and a tool-use environment was given, or the reverse",
    "reset_raised": "reset raised for some seed",
    "reset_bad_types": "reset did not return (non-empty str, dict)",
    "nondeterministic": "the same seed gave different observations or solutions",
    "step_raised": "step raised on a probe action",
    "step_bad_types": "step did not return (str, number, bool, bool, dict), or a tool returned no str",
    "nonfinite_reward": "step returned a NaN or infinite reward",
    "no_solution": "solution() raised, or returned nothing or not a list of str",
    "solution_does_not_win": "replaying solution() does not win for some seed",
    "do_nothing_wins": "an agent that does nothing wins",
    "random_wins": "an agent acting at random wins",
    "timeout": "a call exceeded its time budget",
    "crashed": "the worker died (segfault, exit, memory or CPU limit)",
    "output_too_large": "a reply exceeded its size cap",
    "protocol_violation": "the worker broke the protocol (forged or garbled replies)",
    "audit_rejected": "the optional LLM audit judged the environment impossible",
}

#: Hint failures: the env is fine, but its privileged hint is unusable.
HINT_FAILURE_CODES: dict[str, str] = {
    "hint_failed": "no usable hint was produced (empty, too long, or generation failed)",
    "hint_leak": "the hint gives away the answer or concrete values of the initial state",
}


def describe(code: str) -> str:
    """Human-readable reason for a failure code; ``KeyError`` names the known codes otherwise."""
    table = FAILURE_CODES | HINT_FAILURE_CODES
    if code not in table:
        raise KeyError(f"unknown failure code {code!r}; known: {', '.join(table)}")
    return table[code]
