"""Hint vetting and paired measurement plays: everything the pipeline does with an admitted env after validation.

Nothing here raises because of the environment. Whatever an env does while it is vetted or played (raising on
an unseen seed, hanging, dying, returning garbage) comes back as a failure code from
:func:`spade_envs.envs.failures.fault_code`, which the designer reward turns into its penalty.

Pairing is checked, not assumed: every play records a hash of its first observation
(:func:`~spade_envs.envs.episode.observation_hash`), and :func:`unpaired_seeds` compares the arms seed by seed. A
mismatch is the designer failure ``unpaired``: the two arms did not see the same instance, so their difference is
no regret.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from spade_envs.design.hints import vet_hint
from spade_envs.design.leak_replay import replay_leak, replay_tool_leak
from spade_envs.design.seed_secret import keyed_digest
from spade_envs.envs.contract import check_reset_output
from spade_envs.envs.episode import observation_hash, play
from spade_envs.envs.errors import SpadeEnvError
from spade_envs.envs.failures import fault_code
from spade_envs.envs.llm import ChatClient, ChatError
from spade_envs.play.agent_play import Sampling, model_policy
from spade_envs.sandbox import RemoteEnv, SandboxError, WorkerPool

__all__ = [
    "ArmResult",
    "HintVetting",
    "measure",
    "measure_arm",
    "measurement_seeds",
    "training_seed",
    "unpaired_seeds",
    "vet_env_hint",
    "vet_hint_on_seeds",
]

#: Measurement and training seeds lie in [MEASUREMENT_SEED_LOW, 2**31), both drawn by :func:`measurement_seeds`.
MEASUREMENT_SEED_LOW = 100_000

#: What a misbehaving worker reply can raise on the host besides typed errors (until the host re-checks replies).
_MALFORMED = (ArithmeticError, LookupError, TypeError, ValueError, RecursionError)


@dataclass
class HintVetting:
    """The hint ready to show, or why there is none.

    ``failure`` is a hint code (``hint_failed``, ``hint_leak``: the env stays valid) or an env code from
    :data:`~spade_envs.envs.failures.FAILURE_CODES` (the env broke while being vetted: reject it with that penalty).
    ``first_obs`` maps each vetted seed to the hash of its first observation, the reference both arms must match.
    """

    hint: str | None
    failure: str | None = None
    reason: str = ""
    first_obs: dict[int, str] = field(default_factory=dict)


@dataclass
class ArmResult:
    """One arm of a measurement: an outcome and a first-observation hash per seed played.

    ``fault`` is the env failure code that stopped the arm (``None`` when every play finished); ``agent_error``
    says the model endpoint failed (not the env's fault: the arm is incomplete and must not be scored).
    """

    outcomes: list[float] = field(default_factory=list)
    first_obs: list[str] = field(default_factory=list)
    fault: str | None = None
    reason: str = ""
    agent_error: str | None = None

    @property
    def complete(self) -> bool:
        return self.fault is None and self.agent_error is None


def _fault(exc: BaseException, phase: str) -> tuple[str, str]:
    if isinstance(exc, (SandboxError, SpadeEnvError)):
        return fault_code(exc, phase), str(exc)
    return "protocol_violation", f"malformed {phase} reply: {type(exc).__name__}: {exc}"


def vet_hint_on_seeds(source: str, hint_text: str, pool: WorkerPool, setting: str, seeds: Sequence[int]) -> HintVetting:
    """Clean a written hint and check it leaks nothing of the instances it will be shown on.

    Leakage is checked against every measured seed: games against the solution's answer tokens and the first
    observation, tool use against concrete values of the solution and the tool interface; then, in both settings,
    by replay (a value the hint names that the solution needs leaks, constants included:
    :mod:`spade_envs.design.leak_replay`).
    """
    vetting = HintVetting(None)
    phase = "load"
    try:
        env = RemoteEnv(source, pool)
    except (SandboxError, SpadeEnvError, *_MALFORMED) as exc:
        vetting.failure, vetting.reason = _fault(exc, phase)
        return vetting
    try:
        instances: list[tuple[int, str, list[str]]] = []
        for seed in seeds:
            phase = "reset"
            obs, _ = check_reset_output(tuple(env.reset(seed)))
            vetting.first_obs[seed] = observation_hash(obs)
            phase = "solution"
            actions = env.solution()
            if not isinstance(actions, list) or not all(isinstance(a, str) for a in actions):
                vetting.failure, vetting.reason = "no_solution", f"seed {seed}: solution() is not a list of str"
                return vetting
            instances.append((seed, obs, actions))
        visible_tools = None
        if setting == "tool_use":
            phase = "tools"
            visible_tools = json.dumps(env.tools())
        result = None
        for i, (seed, obs, actions) in enumerate(instances):
            others = [a for j, (_, _, a) in enumerate(instances) if j != i]
            result = vet_hint(hint_text, setting, solution_actions=actions, other_solutions=others,
                              visible_text=obs if setting == "games" else visible_tools)  # fmt: skip
            if result.hint is None:
                vetting.failure, vetting.reason = result.failure, f"seed {seed}: {result.reason}"
                return vetting
        vetting.hint = result.hint if result is not None else None
        if result is None:
            vetting.failure, vetting.reason = "hint_failed", "no seed to vet the hint on"
        else:  # constants and shown values are not exempt: replay what the hint names (leak_replay.py)
            replay = replay_leak if setting == "games" else replay_tool_leak
            for seed, obs, actions in instances:
                phase = "step"  # what the player sees: ordinals in the hint count its things (number_words.py)
                visible = obs if setting == "games" else f"{obs}\n{visible_tools}"
                why = replay(env, result.hint, seed, actions, None, visible)
                if why is not None:
                    vetting.hint, vetting.failure, vetting.reason = None, "hint_leak", f"seed {seed}: {why}"
                    break
        return vetting
    except (SandboxError, SpadeEnvError, *_MALFORMED) as exc:
        vetting.failure, vetting.reason = _fault(exc, phase)
        vetting.hint = None
        return vetting
    finally:
        env.close()


def vet_env_hint(
    source: str, hint_text: str, pool: WorkerPool, setting: str, seeds: list[int]
) -> tuple[str | None, str | None, str]:
    """``(hint or None, failure code or None, reason)`` of :func:`vet_hint_on_seeds` (the older tuple form).

    The failure code may be an env code (:data:`~spade_envs.envs.failures.FAILURE_CODES`): the env broke while its
    hint was vetted, which rejects the env, not just the hint.
    """
    vetting = vet_hint_on_seeds(source, hint_text, pool, setting, seeds)
    return vetting.hint, vetting.failure, vetting.reason


def measure_arm(
    source: str,
    pool: WorkerPool,
    client: ChatClient,
    setting: str,
    seeds: Sequence[int],
    hint: str | None,
    sampling: Sampling,
    *,
    max_turns: int | None = None,
) -> ArmResult:
    """The model plays ``source`` once per seed (``hint`` on the first observation, if given), in one worker.

    Episodes last at most ``min(env.max_turns, max_turns)`` turns. Stops at the first env fault or agent error.
    """
    arm = ArmResult()
    phase = "load"
    try:
        env = RemoteEnv(source, pool)
    except (SandboxError, SpadeEnvError, *_MALFORMED) as exc:
        arm.fault, arm.reason = _fault(exc, phase)
        return arm
    try:
        tools = None
        if setting == "tool_use":
            phase = "reset"
            env.reset(seeds[0])
            phase = "tools"
            tools = env.tools()
        for seed in seeds:
            phase = "step"
            policy = model_policy(client, setting, tools=tools, hint=hint, sampling=sampling)
            result = play(env, policy, seed, max_turns, setting=setting)
            arm.outcomes.append(result.outcome)
            arm.first_obs.append(result.first_obs_hash)
    except ChatError as exc:
        arm.agent_error = str(exc)
    except (SandboxError, SpadeEnvError, *_MALFORMED) as exc:
        arm.fault, arm.reason = _fault(exc, phase)
    finally:
        env.close()
    return arm


def measure(
    source: str,
    pool: WorkerPool,
    client: ChatClient,
    setting: str,
    seeds: list[int],
    hint: str | None,
    sampling: Sampling,
) -> list[float]:
    """Outcomes of :func:`measure_arm` (the older list form); raises ``RuntimeError`` when the arm is incomplete."""
    arm = measure_arm(source, pool, client, setting, seeds, hint, sampling)
    if not arm.complete:
        raise RuntimeError(f"measurement incomplete: {arm.fault or 'agent error'}: {arm.reason or arm.agent_error}")
    return arm.outcomes


def measurement_seeds(run_seed: int, key: str, n: int, *, secret: bytes) -> list[int]:
    """``n`` paired-measurement seeds of one design, hashed from the run seed and the design's ``key``.

    Hashed, not arithmetic: seeds of a progression share residues (``(k x 100000 + i) x 7 + 1`` is always 1 mod 7,
    so an env keyed on ``seed % 7`` was measured on one variant of seven). Keyed by the run's ``secret``
    (:mod:`spade_envs.design.seed_secret`): the run seed and the key forms are public, so an env could otherwise
    recompute
    them. Uniform in ``[MEASUREMENT_SEED_LOW, 2**31)``, fixed by ``(secret, run_seed, key)`` so every worker draws
    the same ones.
    """
    if n < 1:
        raise ValueError(f"need at least one measurement seed, got n={n}")
    span = 2**31 - MEASUREMENT_SEED_LOW
    seeds: list[int] = []
    counter = 0
    while len(seeds) < n:
        digest = keyed_digest(secret, f"{run_seed}\0{key}\0{counter}".encode())
        seed = MEASUREMENT_SEED_LOW + int.from_bytes(digest[:8], "big") % span
        counter += 1
        if seed not in seeds:
            seeds.append(seed)
    return seeds


def training_seed(run_seed: int, step: int, slot: int, *, secret: bytes) -> int:
    """The seed agent row ``slot`` plays at ``step``: a :func:`measurement_seeds` draw under its own key.

    Same hash, same secret, same range as the seeds a design is measured on, so nothing an env can compute from a
    seed (its range, a residue, a recomputed hash) tells it whether it is being measured or trained; an env honest
    on one kind is honest on the other. A pure function of ``(secret, run_seed, step, slot)``: a resumed run, which
    restores the secret from its checkpoint, replays the same seeds.
    """
    return measurement_seeds(run_seed, f"step {step} row {slot}", 1, secret=secret)[0]


def unpaired_seeds(seeds: Sequence[int], *arms: Sequence[str] | Mapping[int, str]) -> list[int]:
    """Seeds on which the arms' first-observation hashes differ (each arm: hashes in seed order, or seed -> hash).

    An empty list means the measurement is paired; otherwise it is the designer failure ``unpaired``.
    """
    by_seed = [arm if isinstance(arm, Mapping) else dict(zip(seeds, arm)) for arm in arms]
    return [s for s in seeds if len({arm[s] for arm in by_seed if s in arm}) > 1]
