"""Admissibility of a designed environment: every check runs the code in sandbox workers, never in-process.

:func:`validate_source` returns a :class:`ValidationReport` with exactly one failure code (from
:data:`spade_envs.envs.failures.FAILURE_CODES`) when the environment is rejected, so the designer reward can charge the
penalty configured for that reason. Checks run cheapest first and stop at the first failure.

What validation promises the trainer:

* **the training turn cap holds**: the solution must win within ``min(env.max_turns, cap)`` turns; a larger
  declared ``max_turns`` is clamped, never trusted (a solution that needs more turns is ``solution_too_long``);
* **seeds the designer cannot know**: the solution seeds are drawn per validation from the run's seed and a
  per-validation key (recorded in the report), keyed by the run's seed secret (never recorded:
  :mod:`spade_envs.design.seed_secret`), and the do-nothing and random agents also play extra unseen seeds;
* **the same seed is the same episode everywhere**: a second, *different* worker replays every seed and every
  baseline episode, and reset observations, solutions and step transcripts must match the first worker's (an env
  that iterates a set or reads the global RNG would give each arm of a paired measurement another instance);
* **validation plays as training does**: every training or measurement play is the first episode of a fresh worker
  (load, ``reset``, ``tools()`` for tool use, steps; nothing else first). The solution, do-nothing and random
  episodes are played that way too and must match their replays in validation's long-lived worker, else
  ``first_episode_differs`` (an env that counts episodes or watches the call order is honest only in validation);
  every load, here and in training, goes through one loader path (:mod:`spade_envs.envs.loader`: one file name, one
  module name, the same globals and command line), so nothing in the env's own process names its context;
* **bounded cost**: a wall-clock budget per validation on top of the sandbox's per-call deadlines.
"""

from __future__ import annotations

import functools
import hashlib
import json
import random
import re
import time
from collections.abc import Callable, Sequence
from typing import Any

from spade_envs.design.seed_secret import keyed_digest, run_secret
from spade_envs.design.validation_config import DEFAULT_PROBES, ValidationConfig, ValidationReport
from spade_envs.envs.contract import check_reset_output
from spade_envs.envs.episode import (
    MAX_ACTION_CHARS,
    EpisodeDeadline,
    EpisodeResult,
    check_tools,
    command_text,
    do_nothing_policy,
    play,
    random_policy,
    solution_policy,
    turn_limit,
)
from spade_envs.envs.errors import SpadeEnvError
from spade_envs.envs.failures import FAILURE_CODES, fault_code
from spade_envs.play.first_episode import first_episode_plan, play_first
from spade_envs.sandbox.client import RemoteEnv
from spade_envs.sandbox.errors import SandboxError
from spade_envs.sandbox.pool import WorkerPool

__all__ = ["DEFAULT_PROBES", "ValidationConfig", "ValidationReport", "Rejected", "draw_seeds", "validate_source"]

_DIGITS = re.compile(r"\d+")


class Rejected(Exception):
    """Internal: a check failed with ``code``."""

    def __init__(self, code: str, reason: str) -> None:
        super().__init__(reason)
        assert code in FAILURE_CODES, code
        self.code, self.reason = code, reason


def draw_seeds(run_seed: int, key: str, source: str, n: int, *, secret: bytes) -> list[int]:
    """``n`` distinct seeds in [1, 2**31) from the run's seed, a per-validation key and the source's sha256.

    Keyed by the run's ``secret`` (:mod:`spade_envs.design.seed_secret`): the source is the env's own and the run seed
    is
    public, so without it an env could recompute the seeds it is validated on.
    """
    material = f"{run_seed}\0{key}\0".encode() + hashlib.sha256(source.encode("utf-8", "surrogatepass")).digest()
    rng = random.Random(int.from_bytes(keyed_digest(secret, material)[:8], "big"))
    return rng.sample(range(1, 2**31), n)


class _Run:
    """One validation: the deadline, and fault mapping for every worker call."""

    def __init__(self, budget_s: float) -> None:
        self.deadline = time.monotonic() + budget_s
        self.budget_s = budget_s

    def call(self, phase: str, fn: Callable[[], Any]) -> Any:
        """Run one worker call; map env and sandbox failures onto failure codes (:func:`fault_code`)."""
        self.check_budget()
        try:
            return fn()
        except EpisodeDeadline as exc:
            raise Rejected("validation_budget", f"validation ran past its {self.budget_s:g} s budget") from exc
        except (SandboxError, SpadeEnvError) as exc:
            raise Rejected(fault_code(exc, phase), str(exc) or type(exc).__name__) from exc
        except (ArithmeticError, LookupError, TypeError, ValueError, RecursionError) as exc:
            # a reply the host could not even take apart: the worker (env code) broke the protocol
            raise Rejected("protocol_violation", f"malformed {phase} reply: {type(exc).__name__}: {exc}") from exc

    def remote_env(self, source: str, pool: WorkerPool) -> RemoteEnv:
        """Load ``source`` in a worker; the wait for a pool slot is part of the budget.

        A slot not free before the deadline raises ``SandboxUnavailable`` (``acquire_timeout``): ``machine_fault``,
        the machine's condition, never charged to the design.
        """
        worker = pool.acquire(timeout=max(0.0, self.deadline - time.monotonic()))
        return RemoteEnv(source, pool, worker=worker)

    def check_budget(self) -> None:
        if time.monotonic() > self.deadline:
            raise Rejected("validation_budget", f"validation ran past its {self.budget_s:g} s budget")

    def play(self, env: RemoteEnv, policy: Callable[[str, int], str], seed: int, cap: int) -> EpisodeResult:
        return self.call("step", lambda: play(env, policy, seed, cap, setting=env.setting, deadline=self.deadline))


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
    key: str = "",
    on_loaded: Callable[[], None] | None = None,
) -> ValidationReport:
    """Validate ``source`` in fresh sandbox workers; ``setting`` (if given) must match the env's own.

    ``key`` names this validation (e.g. ``"step 12 slot 3 attempt 1"``): with ``config.seed`` and ``config.secret``
    it decides the drawn seeds. ``audit`` is the optional LLM audit for tool use: called last, with the source; it
    should reject only impossible environments. An audit that raises is recorded and the environment accepted, so a
    flaky judge cannot veto valid code. ``on_loaded`` is called once the env has loaded in the sandbox with the
    expected setting, before the checks that take most of the time (the recipe starts the hint's generation then).
    """
    config = config or ValidationConfig()
    report = ValidationReport(ok=False, run_seed=config.seed, key=key)
    secret = run_secret(config.secret)  # a fresh one when the config holds none
    drawn = draw_seeds(config.seed, key, source, (0 if config.seeds else config.n_seeds) + config.probe_seeds,
                       secret=secret)  # fmt: skip
    report.seeds = list(config.seeds) if config.seeds else drawn[: config.n_seeds]
    report.probe_seeds = [s for s in drawn[len(drawn) - config.probe_seeds :] if s not in report.seeds]
    started = time.perf_counter()
    run = _Run(config.budget_s)
    envs: list[RemoteEnv] = []
    try:
        env = run.call("load", lambda: run.remote_env(source, pool))
        envs.append(env)
        report.class_name, report.setting = env.class_name, env.setting
        report.declared_max_turns = env.max_turns
        report.max_turns = run.call("load", lambda: turn_limit(env.max_turns, config.max_turns))
        report.checks.append("loaded")
        if setting is not None and setting != env.setting:
            raise Rejected("wrong_setting", f"expected a {setting} environment, got {env.setting}")
        if on_loaded is not None:
            on_loaded()
        _check_resets(run, env, report.seeds, report)
        transcripts = _check_episodes(run, env, config, report)
        if config.cross_worker:
            env.close()  # one worker at a time: concurrent validations can never hold every slot and wait
            other = run.call("load", lambda: run.remote_env(source, pool))
            envs.append(other)
            _check_other_worker(run, other, config, report, transcripts)
        if config.first_episode_seeds:
            _check_first_episodes(run, source, pool, config, report, transcripts)
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
        for env in envs:
            env.close()
        report.duration_s = time.perf_counter() - started
    return report


def _reset(run: _Run, env: RemoteEnv, seed: int) -> str:
    return run.call("reset", lambda: check_reset_output(tuple(env.reset(seed))))[0]


def _solution(run: _Run, env: RemoteEnv) -> list[str]:
    actions = run.call("solution", env.solution)
    if not isinstance(actions, list) or not actions or not all(isinstance(a, str) for a in actions):
        raise Rejected("no_solution", f"solution() must return a non-empty list of str, got {actions!r:.80}")
    longest = max(len(a) for a in actions)
    if longest > MAX_ACTION_CHARS:
        raise Rejected("no_solution", f"a solution action has {longest} characters; the cap is {MAX_ACTION_CHARS}")
    return actions


def _check_resets(run: _Run, env: RemoteEnv, seeds: list[int], report: ValidationReport) -> None:
    """Every seed resets with the right types, and again identically after another episode in the same worker."""
    first = {seed: (_reset(run, env, seed), _solution(run, env)) for seed in seeds}
    report.checks.append("reset")
    for seed in seeds:
        _reset(run, env, max(seeds) + 1)
        again = (_reset(run, env, seed), _solution(run, env))
        if again != first[seed]:
            raise Rejected("nondeterministic", f"reset({seed}) gave different observations or solutions across resets")
    report.checks.append("deterministic")


def _probe_transcript(run: _Run, env: RemoteEnv, seed: int, actions: Sequence[str]) -> list[Any]:
    transcript: list[Any] = [_reset(run, env, seed)]
    for action in actions:
        result = run.call("step", lambda a=action: env.step(a))
        transcript.append(list(result[:4]))
        if result[2] or result[3]:
            transcript.append(_reset(run, env, seed))
    return transcript


def _mutated_policy(actions: list[str], seed: int, setting: str) -> Callable[[str, int], str]:
    """The solution with every number replaced by another of the same length, cycled until the episode ends.

    It reaches the wrong-move branches (where a stray global RNG or set order hides) that the solution never
    takes, on every turn, so a random branch shows within a few turns. Deterministic in ``seed`` and the turn.
    """

    def policy(obs: str, turn: int) -> str:
        rng = random.Random(seed * 1009 + turn)
        action = _DIGITS.sub(lambda m: str(rng.randrange(10 ** len(m.group()))).zfill(len(m.group())),
                             actions[turn % len(actions)])  # fmt: skip
        return solution_policy([action], setting)(obs, 0)

    return policy


def _check_episodes(run: _Run, env: RemoteEnv, config: ValidationConfig, report: ValidationReport) -> dict:
    """Probes, solution, do-nothing and random play in the first worker; returns the transcripts to compare."""
    cap, seeds = config.max_turns, report.seeds
    tools: list[dict[str, Any]] | None = None
    if env.setting == "tool_use":
        _reset(run, env, seeds[0])
        tools = run.call("tools", env.tools)
        why = check_tools(tools)
        if why is not None:
            raise Rejected("bad_tools", why)
        report.checks.append("tools")
    transcripts: dict[tuple, Any] = {("probes",): _probe_transcript(run, env, seeds[0], config.probe_actions)}
    report.checks.append("probes")
    for seed in seeds:
        _reset(run, env, seed)
        actions = _solution(run, env)
        limit = run.call("load", lambda: turn_limit(env.max_turns, cap))
        if len(actions) > limit:
            raise Rejected("solution_too_long", f"seed {seed}: solution() has {len(actions)} actions but episodes "
                           f"last at most {limit} turns (min(max_turns={env.max_turns}, cap={cap}))")  # fmt: skip
        result = run.play(env, solution_policy(actions, env.setting), seed, cap)
        if not result.won:
            unsendable = [i for i, a in enumerate(actions) if env.setting == "games" and command_text(a) is None]
            why = f"; action {unsendable[0]} cannot be written as agent text" if unsendable else ""
            raise Rejected("solution_does_not_win", f"seed {seed}: replaying solution() ({len(actions)} actions) "
                           f"ended with outcome {result.outcome!r} after {result.turns} turns{why}")  # fmt: skip
        report.solution_turns.append(result.turns)
        transcripts[("solution", seed)], transcripts[("actions", seed)] = result.transcript_hash, actions
        transcripts[("mutated", seed)] = run.play(
            env, _mutated_policy(actions, seed, env.setting), seed, cap
        ).transcript_hash
    report.checks.append("solution")
    everywhere = [*seeds, *report.probe_seeds]
    for seed in report.probe_seeds:
        _reset(run, env, seed)  # an unseen seed that does not even reset is a reset fault, not a step fault
    for seed in everywhere:
        idle = run.play(env, do_nothing_policy(env.setting), seed, cap)
        if idle.won:
            raise Rejected("do_nothing_wins", f"seed {seed}: an agent that does nothing won")
        transcripts[("idle", seed)] = idle.transcript_hash
    report.checks.append("do_nothing")
    for seed in everywhere:
        for episode in range(config.random_episodes):
            policy = random_policy(random.Random(seed * 1000 + episode), env.setting, tools)
            played = run.play(env, policy, seed, cap)
            if played.won:
                raise Rejected("random_wins", f"seed {seed}: an agent acting at random won")
            transcripts[("random", seed, episode)] = played.transcript_hash
    report.checks.append("random")
    transcripts[("tools",)] = json.dumps(tools, sort_keys=True) if tools is not None else None
    transcripts[("tool_list",)] = tools  # as the random agent saw it (key order decides its draws)
    return transcripts


def _check_first_episodes(run: _Run, source: str, pool: WorkerPool, config: ValidationConfig,
                          report: ValidationReport, expected: dict) -> None:  # fmt: skip
    """Solution, do-nothing and first random episode of ``first_episode_seeds`` seeds, each first in a fresh worker.

    The seeds are drawn per validation, so the designer cannot aim a first-episode trick at the unchecked ones.
    """
    tools = expected[("tool_list",)]
    seeds = report.seeds[: config.first_episode_seeds]
    solutions = {s: expected[("actions", s)] for s in seeds}
    plan = first_episode_plan(report.setting, seeds, min(1, config.random_episodes), solutions, tools)
    for key, what, policy in plan:
        fresh = run.call("step", functools.partial(play_first, source, pool, policy, key[1],
                                                   config.max_turns, report.setting, run.deadline))  # fmt: skip
        if fresh.transcript_hash != expected[key]:
            raise Rejected("first_episode_differs", f"seed {key[1]}: the {what} episode played first in a fresh "
                           "worker (as training plays) differs from its replay in validation's worker")  # fmt: skip
    report.checks.append("first_episode")


def _check_other_worker(
    run: _Run, env: RemoteEnv, config: ValidationConfig, report: ValidationReport, expected: dict
) -> None:
    """Replay everything in a different worker: any difference means the same seed is not the same episode."""
    cap = config.max_turns
    tools = run.call("tools", env.tools) if env.setting == "tool_use" else None

    def differ(what: str, seed: int | None = None) -> Rejected:
        where = f"seed {seed}: " if seed is not None else ""
        return Rejected("nondeterministic", f"{where}a second worker saw a different {what} than the first "
                        "(set iteration order, hash(), the global RNG or the clock decide the episode)")  # fmt: skip

    if (json.dumps(tools, sort_keys=True) if tools is not None else None) != expected[("tools",)]:
        raise differ("tool list")
    if _probe_transcript(run, env, report.seeds[0], config.probe_actions) != expected[("probes",)]:
        raise differ("probe transcript", report.seeds[0])
    for seed in report.seeds:
        _reset(run, env, seed)
        actions = _solution(run, env)
        result = run.play(env, solution_policy(actions, env.setting), seed, cap)
        if result.transcript_hash != expected[("solution", seed)]:
            raise differ("first observation, solution or solution transcript", seed)
        mutated = run.play(env, _mutated_policy(actions, seed, env.setting), seed, cap)
        if mutated.transcript_hash != expected[("mutated", seed)]:
            raise differ("transcript for near-solution actions", seed)
    for seed in [*report.seeds, *report.probe_seeds]:
        if run.play(env, do_nothing_policy(env.setting), seed, cap).transcript_hash != expected[("idle", seed)]:
            raise differ("do-nothing transcript", seed)
        for episode in range(config.random_episodes):
            policy = random_policy(random.Random(seed * 1000 + episode), env.setting, tools)
            if run.play(env, policy, seed, cap).transcript_hash != expected[("random", seed, episode)]:
                raise differ("random-agent transcript", seed)
    report.checks.append("cross_worker")
