"""Why a designed environment (or its hint) was rejected: one stable code per reason, and one mapping onto them.

Validation reports these codes, the designer reward maps each to a (negative) penalty from config, memory stores
them, and metrics count them. Keeping them in one table keeps all four in step. :func:`fault_code` is the *one*
mapping of what an environment does wrong while it is played (sandbox errors, contract violations, deadlines)
onto these codes: validation, hint vetting, ``spade-envs generate`` and the recipe's measurement plays all use it,
so the same fault costs the designer the same penalty on every path.
"""

from __future__ import annotations

from spade_envs.envs.errors import ContractViolation, InvalidEnvSource

__all__ = ["FAILURE_CODES", "HINT_FAILURE_CODES", "PLAY_PHASES", "describe", "fault_code"]

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
    "nondeterministic": "one seed gave different observations, solutions or step transcripts (in one worker or two)",
    "first_episode_differs": "an episode played first in a fresh worker, in training's call order, differs from its "
    "replay in validation's worker (the env counts episodes or watches the call order)",
    "step_raised": "step raised on a probe action",
    "step_bad_types": "step did not return (str, number, bool, bool, dict), or a tool returned no str",
    "nonfinite_reward": "step returned a NaN or infinite reward",
    "bad_tools": "tools() did not return well-formed OpenAI function schemas",
    "no_solution": "solution() raised, or returned nothing, not a list of str, or an over-long action",
    "solution_too_long": "solution() needs more turns than the training turn cap allows",
    "solution_does_not_win": "replaying solution() does not win for some seed",
    "do_nothing_wins": "an agent that does nothing wins",
    "random_wins": "an agent acting at random wins",
    "timeout": "a call exceeded its time budget",
    "validation_budget": "validation as a whole ran past its wall-clock budget",
    "crashed": "the worker died (segfault, exit, memory or CPU limit)",
    "machine_fault": "no sandbox worker could be had (no free slot in time, a start failure, the pool shut down): "
    "the machine's condition, never the design's; such samples are excluded from every update",
    "output_too_large": "a reply exceeded its size cap",
    "protocol_violation": "the worker broke the protocol (forged or garbled replies)",
    "audit_rejected": "the optional LLM audit judged the environment impossible",
    "unpaired": "the hinted and unhinted arms saw different first observations on the same seed",
    "prompt_too_long": "the designer prompt does not fit rollout.prompt_length even without its document and "
    "exemplars (never sent, never trained)",
}

#: Hint failures: the env is fine, but its privileged hint is unusable.
HINT_FAILURE_CODES: dict[str, str] = {
    "hint_failed": "no usable hint was produced (empty, too long, or generation failed)",
    "hint_leak": "the hint gives away the answer or concrete values of the initial state",
}

#: Where a fault happened: it decides between e.g. ``reset_raised`` and ``step_raised``.
PLAY_PHASES = ("load", "reset", "step", "solution", "tools")

# sandbox error kinds (spade_envs.sandbox.errors.SandboxError.kind) -> code, whatever the phase
_KIND_CODES = {
    "env_timeout": "timeout",
    "env_crashed": "crashed",
    "protocol_violation": "protocol_violation",
    "output_too_large": "output_too_large",
    "sandbox_error": "crashed",
    "sandbox_unavailable": "machine_fault",
    "episode_deadline": "timeout",
}
_RAISED = {"load": "construct_failed", "reset": "reset_raised", "step": "step_raised", "solution": "no_solution",
           "tools": "bad_tools"}  # fmt: skip
_BAD_TYPES = {"load": "construct_failed", "reset": "reset_bad_types", "step": "step_bad_types",
              "solution": "no_solution", "tools": "bad_tools"}  # fmt: skip
_LOAD_CODES = frozenset(
    {"syntax_error", "exec_error", "no_env_class", "several_env_classes", "missing_method", "construct_failed"}
)


def fault_code(fault: BaseException | str, phase: str = "step") -> str:
    """The failure code of an environment fault seen while playing it; never raises.

    ``fault`` is the exception (a sandbox error, :class:`~spade_envs.envs.errors.ContractViolation`, an episode
    deadline) or a sandbox error's ``kind`` string (``env_timeout``, ``env_raised``, ... as the recipe's episodes
    record it). ``phase`` is one of :data:`PLAY_PHASES`. Unknown faults count as ``crashed``: whatever an env
    does while it is played is the designer's failure, never an exception in the caller.
    """
    if phase not in _RAISED:
        phase = "step"
    if isinstance(fault, str):
        if fault in _KIND_CODES:
            return _KIND_CODES[fault]
        if fault == "env_raised":
            return _RAISED[phase]
        return fault if fault in FAILURE_CODES else "crashed"
    code = getattr(fault, "code", None)
    if isinstance(fault, InvalidEnvSource) or (code in _LOAD_CODES and getattr(fault, "kind", "") == "env_raised"):
        return code if code in _LOAD_CODES else "construct_failed"
    if isinstance(fault, ContractViolation) or getattr(fault, "kind", None) == "env_raised":
        if code == "nonfinite_reward":
            return "nonfinite_reward"
        if code == "bad_types" or isinstance(fault, ContractViolation):
            return _BAD_TYPES[phase]
        return _RAISED[phase]
    kind = getattr(fault, "kind", None)
    if isinstance(kind, str) and kind in _KIND_CODES:
        return _KIND_CODES[kind]
    return "crashed"


def describe(code: str) -> str:
    """Human-readable reason for a failure code; ``KeyError`` names the known codes otherwise."""
    table = FAILURE_CODES | HINT_FAILURE_CODES
    if code not in table:
        raise KeyError(f"unknown failure code {code!r}; known: {', '.join(table)}")
    return table[code]
