"""Admissibility of a designed environment: every check runs the code in a sandbox worker, never in-process.

:func:`validate_source` returns a :class:`ValidationReport` with exactly one failure code (from
:data:`spade_envs.failures.FAILURE_CODES`) when the environment is rejected, so the designer reward can charge the
penalty configured for that reason. Checks run cheapest first and stop at the first failure.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from spade_envs.episode import do_nothing_policy, play, random_policy, solution_policy
from spade_envs.errors import ContractViolation
from spade_envs.failures import FAILURE_CODES
from spade_envs.sandbox.client import RemoteEnv
from spade_envs.sandbox.errors import (
    EnvCrashed,
    EnvRaised,
    EnvTimeout,
    OutputTooLarge,
    ProtocolViolation,
    SandboxError,
)
from spade_envs.sandbox.pool import WorkerPool

__all__ = ["ValidationConfig", "ValidationReport", "Rejected", "validate_source"]

#: Actions every environment must survive: empty, numbers, words, a box, tool-use markup, junk.
DEFAULT_PROBES = (
    "",
    "1",
    "42",
    "test",
    "look",
    "\\boxed{7}",
    '<tool_call>{"name": "x"}</tool_call>',
    "<answer>x</answer>",
)

_LOAD_CODES = {
    "syntax_error",
    "exec_error",
    "no_env_class",
    "several_env_classes",
    "missing_method",
    "construct_failed",
}
_SANDBOX_CODES: dict[type, str] = {
    EnvTimeout: "timeout",
    EnvCrashed: "crashed",
    OutputTooLarge: "output_too_large",
    ProtocolViolation: "protocol_violation",
}


@dataclass(frozen=True)
class ValidationConfig:
    """What validation tries. More seeds catch more broken generators but cost more worker calls.

    Attributes:
        seeds: episodes that must reset cleanly, be deterministic, and be won by ``solution()``.
        random_episodes: random-agent episodes per seed (a random win rejects the env).
        probe_actions: actions sent after ``reset`` that must not raise or return wrong types.
    """

    seeds: tuple[int, ...] = (0, 1, 2)
    random_episodes: int = 2
    probe_actions: tuple[str, ...] = DEFAULT_PROBES

    @classmethod
    def from_dict(cls, data: dict[str, Any] | None) -> ValidationConfig:
        data = dict(data or {})
        known = {"seeds", "random_episodes", "probe_actions"}
        if set(data) - known:
            raise ValueError(f"unknown validation option(s) {sorted(set(data) - known)}; known: {sorted(known)}")
        for key in ("seeds", "probe_actions"):
            if key in data:
                data[key] = tuple(data[key])
        config = cls(**data)
        if not config.seeds:
            raise ValueError("validation needs at least one seed")
        return config


@dataclass
class ValidationReport:
    """Outcome of validation. ``code`` is ``None`` exactly when ``ok``; ``reason`` is one line for people."""

    ok: bool
    code: str | None = None
    reason: str = ""
    class_name: str = ""
    setting: str = ""
    max_turns: int = 0
    solution_turns: list[int] = field(default_factory=list)
    checks: list[str] = field(default_factory=list)
    duration_s: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


class Rejected(Exception):
    """Internal: a check failed with ``code``."""

    def __init__(self, code: str, reason: str) -> None:
        super().__init__(reason)
        assert code in FAILURE_CODES, code
        self.code, self.reason = code, reason


def _call(error_code: str, fn: Callable[[], Any]) -> Any:
    """Run one worker call; map env and sandbox failures onto failure codes."""
    try:
        return fn()
    except EnvRaised as exc:
        if exc.code in _LOAD_CODES:
            raise Rejected(exc.code, str(exc)) from exc
        if exc.code == "nonfinite_reward":
            raise Rejected("nonfinite_reward", str(exc)) from exc
        if exc.code == "bad_types" and error_code.endswith("_raised"):
            raise Rejected(error_code.replace("_raised", "_bad_types"), str(exc)) from exc
        raise Rejected(error_code, str(exc)) from exc
    except ContractViolation as exc:
        code = "nonfinite_reward" if exc.code == "nonfinite_reward" else error_code.replace("_raised", "_bad_types")
        raise Rejected(code if code in FAILURE_CODES else error_code, str(exc)) from exc
    except SandboxError as exc:
        raise Rejected(_SANDBOX_CODES.get(type(exc), "crashed"), str(exc)) from exc


def _first_line(text: str) -> str:
    lines = [line for line in text.strip().splitlines() if line.strip()]
    return (lines[-1] if lines else text)[:300]


def validate_source(
    source: str,
    pool: WorkerPool,
    config: ValidationConfig | None = None,
    *,
    setting: str | None = None,
    audit: Callable[[str], bool] | None = None,
    filename: str = "<generated env>",
) -> ValidationReport:
    """Validate ``source`` in a fresh sandbox worker; ``setting`` (if given) must match the env's own.

    ``audit`` is the optional LLM audit for tool use: called last, with the source; it should reject only
    impossible environments. An audit that raises is recorded and the environment accepted, so a flaky judge
    cannot veto valid code.
    """
    config = config or ValidationConfig()
    report = ValidationReport(ok=False)
    started = time.perf_counter()
    env: RemoteEnv | None = None
    try:
        env = _call("construct_failed", lambda: RemoteEnv(source, pool, filename))
        report.class_name, report.setting, report.max_turns = env.class_name, env.setting, env.max_turns
        report.checks.append("loaded")
        if setting is not None and setting != env.setting:
            raise Rejected("wrong_setting", f"expected a {setting} environment, got {env.setting}")
        _check_resets(env, config, report)
        _check_probes(env, config, report)
        _check_solution_and_baselines(env, config, report)
        if audit is not None and env.setting == "tool_use":
            try:
                verdict = audit(source)
            except Exception as exc:  # noqa: BLE001  (a broken judge must not veto valid code)
                report.checks.append(f"audit errored ({type(exc).__name__}); accepted")
            else:
                if not verdict:
                    raise Rejected("audit_rejected", "the LLM audit judged the environment impossible")
                report.checks.append("audit")
        report.ok = True
    except Rejected as rejected:
        report.code, report.reason = rejected.code, _first_line(rejected.reason)
    finally:
        if env is not None:
            env.close()
        report.duration_s = time.perf_counter() - started
    return report


def _check_resets(env: RemoteEnv, config: ValidationConfig, report: ValidationReport) -> None:
    first = {seed: _call("reset_raised", lambda s=seed: env.reset(s))[0] for seed in config.seeds}
    report.checks.append("reset")
    seed, other = config.seeds[0], max(config.seeds) + 1
    obs_a = _call("reset_raised", lambda: env.reset(seed))[0]
    actions_a = _solution(env)
    _call("reset_raised", lambda: env.reset(other))
    obs_b = _call("reset_raised", lambda: env.reset(seed))[0]
    actions_b = _solution(env)
    if not first[seed] == obs_a == obs_b or actions_a != actions_b:
        raise Rejected("nondeterministic", f"reset({seed}) gave different observations or solutions across resets")
    report.checks.append("deterministic")


def _check_probes(env: RemoteEnv, config: ValidationConfig, report: ValidationReport) -> None:
    _call("reset_raised", lambda: env.reset(config.seeds[0]))
    for action in config.probe_actions:
        _, _, terminated, truncated, _ = _call("step_raised", lambda a=action: env.step(a))
        if terminated or truncated:
            _call("reset_raised", lambda: env.reset(config.seeds[0]))
    report.checks.append("probes")


def _solution(env: RemoteEnv) -> list[str]:
    actions = _call("no_solution", env.solution)
    if not actions:
        raise Rejected("no_solution", "solution() returned an empty list")
    return actions


def _check_solution_and_baselines(env: RemoteEnv, config: ValidationConfig, report: ValidationReport) -> None:
    tools: Sequence[dict[str, Any]] | None = None
    if env.setting == "tool_use":
        _call("reset_raised", lambda: env.reset(config.seeds[0]))
        tools = _call("step_raised", env.tools)
    for seed in config.seeds:
        _call("reset_raised", lambda s=seed: env.reset(s))
        actions = _solution(env)
        result = _call("step_raised", lambda s=seed, a=actions: play(env, solution_policy(a, env.setting), s,
                                                                      setting=env.setting))  # fmt: skip
        if not result.won:
            raise Rejected(
                "solution_does_not_win",
                f"seed {seed}: replaying solution() ({len(actions)} actions) ended with outcome {result.outcome:g}",
            )
        report.solution_turns.append(result.turns)
    report.checks.append("solution")
    for seed in config.seeds:
        idle = _call("step_raised", lambda s=seed: play(env, do_nothing_policy(env.setting), s, setting=env.setting))
        if idle.won:
            raise Rejected("do_nothing_wins", f"seed {seed}: an agent that does nothing won")
    report.checks.append("do_nothing")
    for seed in config.seeds:
        for episode in range(config.random_episodes):
            policy = random_policy(random.Random(seed * 1000 + episode), env.setting, list(tools) if tools else None)
            played = _call("step_raised", lambda s=seed, p=policy: play(env, p, s, setting=env.setting))
            if played.won:
                raise Rejected("random_wins", f"seed {seed}: an agent acting at random won")
    report.checks.append("random")
