"""Typed failures of sandboxed environments, so callers can tell an env fault from an agent's mistake.

None of these may ever be scored as an agent failure: they say the *environment* (or its worker, or the pool) is
broken. Every error carries ``kind`` (its class, stable for metrics) and ``code`` (the precise reason, one of
:data:`SANDBOX_FAILURE_CODES`, the one table of them).
"""

from __future__ import annotations

from spade_envs.envs.errors import SpadeEnvError

__all__ = [
    "SANDBOX_FAILURE_CODES",
    "EnvCrashed",
    "EnvRaised",
    "EnvTimeout",
    "OutputTooLarge",
    "ProtocolViolation",
    "SandboxError",
    "SandboxUnavailable",
]

#: Every ``code`` a :class:`SandboxError` can carry, with its meaning; ``EnvRaised`` may also carry the loader's
#: codes from :data:`spade_envs.envs.failures.FAILURE_CODES`. A worker's reply naming any other code reads
# ``exception``.
SANDBOX_FAILURE_CODES: dict[str, str] = {
    # EnvRaised (also with the loader's codes of spade_envs.envs.failures, e.g. syntax_error, no_env_class)
    "exception": "env code raised an exception",
    "bad_types": "env code returned something of the wrong type or shape, or text that is not valid Unicode",
    "nonfinite_reward": "env code returned a NaN or infinite reward",
    "hardening_failed": "the worker could not apply its isolation level (reported at start-up)",
    # EnvTimeout
    "soft_timeout": "the in-worker alarm interrupted a call (the worker survives)",
    "call_timeout": "a call did not answer before the host's deadline; the worker was killed",
    "write_timeout": "the worker did not take the request before the deadline; the worker was killed",
    "episode_wall_budget": "the worker used up its wall-clock budget for the episode (episode_wall_s)",
    "start_timeout": "the worker did not start in time",
    # EnvCrashed
    "worker_died": "the worker process died (segfault, exit, CPU or memory limit, parent gone)",
    "worker_unusable": "a call was made on a worker that was already killed",
    # ProtocolViolation
    "garbled_reply": "the reply is not one JSON object (bad UTF-8 or JSON, NaN, a huge number, nested too deep)",
    "wrong_seq": "the reply answers another request",
    "unsolicited_data": "the worker sent data nobody asked for",
    "trickled_reply": "the reply came in pieces smaller than the worker writes (env code made the pipe a packet pipe)",
    "invalid_result": "the reply's result fails the host's checks for its method",
    "host_check_failed": "checking a reply raised an unexpected error on the host; the worker was killed",
    "bad_request": "the caller's request cannot be encoded as JSON (NaN, a non-JSON object); the worker is untouched",
    # OutputTooLarge
    "output_too_large": "a string in a reply exceeded max_observation_chars (the worker survives)",
    "reply_too_large": "a reply line exceeded max_response_bytes; the worker was killed",
    "request_too_large": "a request exceeded max_request_bytes",
    "episode_output_budget": "an episode's replies exceeded max_episode_reply_bytes; the worker was killed",
    # SandboxUnavailable
    "no_level": "no isolation level works on this machine",
    "acquire_timeout": "no worker slot became free within acquire_timeout_s (max_workers busy)",
    "spawn_failed": "the worker process could not be started",
    "pool_closed": "the worker pool is shut down",
}


class SandboxError(SpadeEnvError):
    """Base of every sandbox failure. ``kind`` names the class for metrics; ``code`` the precise reason."""

    kind = "sandbox_error"
    default_code = "exception"

    def __init__(self, message: str = "", code: str | None = None) -> None:
        super().__init__(message)
        self.code = code or self.default_code


class EnvRaised(SandboxError):
    """Env code raised an exception (or returned something the contract forbids); the worker is still alive.

    ``code`` refines the reason: ``exception``, ``bad_types``, ``nonfinite_reward``, or, when loading failed, an
    :class:`~spade_envs.envs.errors.InvalidEnvSource` code such as ``syntax_error`` or ``no_env_class``.
    """

    kind = "env_raised"
    default_code = "exception"


class EnvTimeout(SandboxError):
    """A call overran its time budget (soft alarm, host deadline, or the episode's wall-clock budget)."""

    kind = "env_timeout"
    default_code = "call_timeout"


class EnvCrashed(SandboxError):
    """The worker died or was killed (segfault, ``os._exit``, CPU or memory limit, host deadline)."""

    kind = "env_crashed"
    default_code = "worker_died"


class ProtocolViolation(SandboxError):
    """The worker sent something that is not a valid reply to the current request (forged or garbled)."""

    kind = "protocol_violation"
    default_code = "invalid_result"


class OutputTooLarge(SandboxError):
    """A reply or a string in it exceeded its size cap."""

    kind = "output_too_large"
    default_code = "output_too_large"


class SandboxUnavailable(SandboxError):
    """No worker could be had: no isolation level works, no slot became free in time, or the pool is closed."""

    kind = "sandbox_unavailable"
    default_code = "no_level"
