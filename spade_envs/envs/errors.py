"""Typed errors of the environment contract.

Callers (validation, the sandbox, the recipe) must be able to tell an environment that is broken apart from an
agent that plays badly: only the latter may ever be scored as an agent failure.
"""

from __future__ import annotations


class SpadeEnvError(Exception):
    """Base class of every error raised by ``spade_envs``."""


class InvalidEnvSource(SpadeEnvError):
    """Environment source text cannot be turned into an environment class.

    ``code`` is a short machine-readable reason (``syntax_error``, ``no_env_class``, ``several_env_classes``,
    ``exec_error``, ``missing_method``) that validation maps onto a designer penalty.
    """

    def __init__(self, code: str, message: str) -> None:
        super().__init__(f"[{code}] {message}")
        self.code = code
        self.message = message


class ContractViolation(SpadeEnvError):
    """An environment returned something the contract forbids.

    ``code`` is ``bad_types`` (wrong types or shapes) or ``nonfinite_reward`` (NaN or infinite reward).
    """

    def __init__(self, message: str, code: str = "bad_types") -> None:
        super().__init__(message)
        self.code = code


class ToolError(SpadeEnvError):
    """Raised *by a tool-use environment* inside a ``tool_<name>`` method to report an expected tool failure.

    The message is shown to the agent as the tool's output (``Error: <message>``); the episode goes on. Any other
    exception escaping a tool is an environment fault, not an agent mistake.
    """
