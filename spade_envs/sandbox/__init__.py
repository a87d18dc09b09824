"""Run untrusted environment code in killable, isolated worker processes (see ``docs/sandbox.md``)."""

from spade_envs.sandbox.batch import call_many
from spade_envs.sandbox.client import AsyncSandboxEnv, RemoteEnv, SandboxedEnv, step_all
from spade_envs.sandbox.config import ISOLATION_LEVELS, SandboxConfig
from spade_envs.sandbox.errors import (
    SANDBOX_FAILURE_CODES,
    EnvCrashed,
    EnvRaised,
    EnvTimeout,
    OutputTooLarge,
    ProtocolViolation,
    SandboxError,
    SandboxUnavailable,
)
from spade_envs.sandbox.pool import WorkerPool, probe_isolation

__all__ = [
    "ISOLATION_LEVELS",
    "SANDBOX_FAILURE_CODES",
    "AsyncSandboxEnv",
    "EnvCrashed",
    "EnvRaised",
    "EnvTimeout",
    "OutputTooLarge",
    "ProtocolViolation",
    "RemoteEnv",
    "SandboxConfig",
    "SandboxError",
    "SandboxUnavailable",
    "SandboxedEnv",
    "WorkerPool",
    "call_many",
    "probe_isolation",
    "step_all",
]
