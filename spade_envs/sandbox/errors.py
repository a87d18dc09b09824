"""Typed failures of sandboxed environments, so callers can tell an env fault from an agent's mistake.

None of these may ever be scored as an agent failure: they say the *environment* (or its worker) is broken.
"""

from __future__ import annotations

from spade_envs.errors import SpadeEnvError

__all__ = [
    "EnvCrashed",
    "EnvRaised",
    "EnvTimeout",
    "OutputTooLarge",
    "ProtocolViolation",
    "SandboxError",
    "SandboxUnavailable",
]


class SandboxError(SpadeEnvError):
    """Base of every sandbox failure. ``kind`` is a stable short name for metrics and designer penalties."""

    kind = "sandbox_error"


class EnvRaised(SandboxError):
    """Env code raised an exception (or returned something the contract forbids); the worker is still alive.

    ``code`` refines the reason: ``exception``, ``bad_types``, ``nonfinite_reward``, or, when loading failed, an
    :class:`~spade_envs.errors.InvalidEnvSource` code such as ``syntax_error`` or ``no_env_class``.
    """

    kind = "env_raised"

    def __init__(self, message: str, code: str = "exception") -> None:
        super().__init__(message)
        self.code = code


class EnvTimeout(SandboxError):
    """A call overran its time budget (soft alarm or host deadline)."""

    kind = "env_timeout"


class EnvCrashed(SandboxError):
    """The worker died or was killed (segfault, ``os._exit``, CPU or memory limit, host deadline)."""

    kind = "env_crashed"


class ProtocolViolation(SandboxError):
    """The worker sent something that is not a valid reply to the current request (forged or garbled)."""

    kind = "protocol_violation"


class OutputTooLarge(SandboxError):
    """A reply or a string in it exceeded its size cap."""

    kind = "output_too_large"


class SandboxUnavailable(SandboxError):
    """The requested isolation level does not work on this machine."""

    kind = "sandbox_unavailable"
