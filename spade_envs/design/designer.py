"""The designer pipeline with an external model: document -> environment -> validation -> hint -> regret.

Each step is a function the verl recipe reuses (prompt building, admission, hint vetting, paired measurement);
:func:`generate` chains them with any OpenAI-compatible endpoint playing both roles, which builds a
fixed-environment pool (like the paper's baseline pools) without GPU training.
"""

from __future__ import annotations

import functools
import json
import random
import sys
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

from spade_envs.design.ast_hash import normalized_ast_hash
from spade_envs.design.corpus import Corpus, truncate_words
from spade_envs.design.extract import extract_code
from spade_envs.design.measure import (
    HintVetting,
    measure,
    measure_arm,
    measurement_seeds,
    unpaired_seeds,
    vet_env_hint,
    vet_hint_on_seeds,
)
from spade_envs.design.memory import EnvMemory, MemoryConfig, MemoryRecord
from spade_envs.design.placebo import placebo_hint
from spade_envs.design.prompts import VARIANT_WEIGHTS, Exemplar, builtin_example, designer_messages, hint_messages
from spade_envs.design.rewards import RewardConfig, WindowStats, credited_regret, designer_reward, failure_penalty
from spade_envs.design.seed_secret import run_secret
from spade_envs.design.validate import ValidationConfig, ValidationReport, validate_source
from spade_envs.envs.failures import HINT_FAILURE_CODES
from spade_envs.envs.llm import ChatClient, ChatError
from spade_envs.envs.skills import DOMAINS, SKILLS
from spade_envs.envs.spec import EnvSpec
from spade_envs.play.agent_play import Sampling
from spade_envs.sandbox import WorkerPool

__all__ = [
    "DesignOutcome",
    "GenerateConfig",
    "admit",
    "exemplar_snippet",
    "exemplars_for_prompt",
    "generate",
    "measure",
    "stored_copy",
    "vet_env_hint",
]

_SNIPPET_CHARS = 2000


@dataclass(frozen=True)
class GenerateConfig:
    """Knobs of :func:`generate`. Sampling defaults follow the paper (designer 0.6, hint writer 0.3).

    ``max_turns`` is the training turn cap: validation requires the solution to fit it and measurement plays stop
    at it; it (and ``seed``) override the ``validation`` config's cap and run seed. ``placebo``: also play a
    content-free hint of the real hint's shape (:mod:`spade_envs.design.placebo`) and credit regret only beyond it;
    ``False`` restores the paper's two arms. ``secret``: the seed secret that keys the validation and measurement
    seeds (:mod:`spade_envs.design.seed_secret`); ``None`` draws a fresh one here, a pinned one replays a run's seeds.
    """

    setting: str = "games"
    n_envs: int = 4
    max_attempts: int = 5
    plays_per_arm: int = 4
    seed: int = 0
    max_turns: int = 25
    multi_turn: bool = False
    placebo: bool = True
    designer: Sampling = Sampling(temperature=0.6, top_p=0.95, max_tokens=16384)
    hint_writer: Sampling = Sampling(temperature=0.3, top_p=0.9, max_tokens=1024)
    agent: Sampling = Sampling(temperature=0.6, top_p=0.95, max_tokens=4096)
    reward: RewardConfig = field(default_factory=RewardConfig)
    validation: ValidationConfig = field(default_factory=ValidationConfig)
    memory: MemoryConfig = field(default_factory=MemoryConfig)
    secret: bytes | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        if self.setting not in SKILLS:
            raise ValueError(f"setting must be one of {sorted(SKILLS)}, got {self.setting!r}")
        for name in ("n_envs", "max_attempts", "plays_per_arm", "max_turns"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1, got {getattr(self, name)}")
        # one turn cap, one run seed and one seed secret for validation and measurement alike
        object.__setattr__(self, "secret", run_secret(self.secret))
        object.__setattr__(self, "validation", replace(self.validation, max_turns=self.max_turns, seed=self.seed,
                                                       secret=self.secret))  # fmt: skip


@dataclass
class DesignOutcome:
    """One designer sample: what was asked, what came back, and what it earned."""

    slot: int
    attempt: int
    skill: str
    doc_id: str | None
    domain: str | None = None
    variant: str | None = None
    valid: bool = False
    code: str | None = None
    reason: str = ""
    env_id: str | None = None
    hint: str | None = None
    hint_failure: str | None = None
    seeds: list[int] = field(default_factory=list)
    no_hint: list[float] = field(default_factory=list)
    hinted: list[float] = field(default_factory=list)
    placebo: list[float] = field(default_factory=list)
    win_rate: float | None = None
    regret: float | None = None
    designer_reward: float = 0.0
    failure: str | None = None
    measured: bool = False
    validation_seeds: list[int] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def exemplars_for_prompt(memory: EnvMemory, setting: str, skill: str, rng: np.random.Generator) -> list[Exemplar]:
    """Memory exemplars in the form the designer prompt shows (snippets cut at a line boundary)."""
    chosen = memory.exemplars(skill, setting, rng)
    shown = []
    for kind, items in (("positive", chosen.positives), ("negative", chosen.negatives)):
        for item in items:
            snippet = exemplar_snippet(item.record.spec.source)
            shown.append(Exemplar(snippet, skill, item.record.win_rate, item.record.regret, kind, item.reason))
    return shown


def stored_copy(memory: EnvMemory, source: str) -> MemoryRecord | None:
    """The stored record whose code is ``source`` up to cosmetics (:func:`~.ast_hash.normalized_ast_hash`).

    A designer that re-emits an exemplar or a built-in (with new comments or local names) made nothing new: the
    stored env is re-measured and goes live in its place (the copy earns what the stored env earns today).
    """
    digest = normalized_ast_hash(source)
    return next((r for r in memory if r.ast_hash == digest), None)


def exemplar_snippet(source: str, limit: int = _SNIPPET_CHARS) -> str:
    """At most ``limit`` characters of ``source``, cut at the last line break inside them when there is one."""
    if len(source) <= limit:
        return source
    cut = source.rfind("\n", 0, limit)
    return source[: cut if cut > 0 else limit]


def admit(
    response: str,
    pool: WorkerPool,
    setting: str,
    config: ValidationConfig | None = None,
    *,
    key: str = "",
    audit: Callable[[str], bool] | None = None,
    on_loaded: Callable[[str], None] | None = None,
) -> tuple[str | None, ValidationReport]:
    """Extract the code from a designer response and validate it in the sandbox; ``(source or None, report)``.

    ``key`` names the validation (e.g. ``"step 4 slot 2"``); with ``config.seed`` and ``config.secret`` it draws
    the validation seeds.
    ``audit``: the optional LLM audit of tool-use environments; ``on_loaded``: called with the code once it has
    loaded in the sandbox (see :func:`~spade_envs.design.validate.validate_source`).
    """
    extraction = extract_code(response)
    code = extraction.code
    if code is None:
        return None, ValidationReport(ok=False, code="no_code_block", reason=extraction.reason)
    loaded = None if on_loaded is None else functools.partial(on_loaded, code)
    report = validate_source(code, pool, config, setting=setting, key=key, audit=audit, on_loaded=loaded)
    return (code if report.ok else None), report


def _complete(client: ChatClient, messages: list[dict[str, str]], sampling: Sampling) -> str:
    return client.complete(
        messages, temperature=sampling.temperature, top_p=sampling.top_p, max_tokens=sampling.max_tokens
    ).text


def generate(
    client: ChatClient,
    corpus: Corpus | None,
    pool: WorkerPool,
    config: GenerateConfig,
    out_dir: str | Path,
    memory: EnvMemory | None = None,
    progress: Callable[[str], None] | None = None,
) -> list[DesignOutcome]:
    """Design ``config.n_envs`` admissible environments and score each designer sample.

    Writes ``out_dir/envs/<env_id>.py`` for every admitted env, ``out_dir/manifest.jsonl`` with one line per
    designer sample (rejected ones included, with their penalty), and ``out_dir/memory.jsonl``. The same model
    plays each env ``plays_per_arm`` times without and with the hint on paired seeds, and the designer reward is
    computed by :func:`spade_envs.design.rewards.designer_reward`.
    """
    say = progress or (lambda line: print(line, file=sys.stderr, flush=True))
    out = Path(out_dir)
    (out / "envs").mkdir(parents=True, exist_ok=True)
    memory = memory or EnvMemory(config.memory)
    rng = random.Random(config.seed)
    np_rng = np.random.default_rng(config.seed)
    skills = list(SKILLS[config.setting])
    example = builtin_example(config.setting)
    outcomes: list[DesignOutcome] = []
    with (out / "manifest.jsonl").open("a", encoding="utf-8") as manifest:
        for slot in range(config.n_envs):
            skill = skills[slot % len(skills)]
            for attempt in range(config.max_attempts):
                outcome = _design_once(client, corpus, pool, config, memory, rng, np_rng, slot, attempt, skill, example)
                if outcome.valid:
                    (out / "envs" / f"{outcome.env_id}.py").write_text(outcome.code or "", encoding="utf-8")
                manifest.write(json.dumps(outcome.to_dict()) + "\n")
                manifest.flush()
                outcomes.append(outcome)
                status = (
                    f"valid: win rate {outcome.win_rate:.2f}, regret {outcome.regret:.2f}"
                    if outcome.measured
                    else f"valid, not measured ({outcome.reason})"
                    if outcome.valid
                    else f"rejected ({outcome.reason})"
                )
                say(f"[{slot + 1}/{config.n_envs}] {skill} attempt {attempt + 1}: {status}; "
                    f"designer reward {outcome.designer_reward:+.2f}")  # fmt: skip
                if outcome.valid:
                    break
    memory.save(out / "memory.jsonl")
    return outcomes


def _design_once(
    client: ChatClient,
    corpus: Corpus | None,
    pool: WorkerPool,
    config: GenerateConfig,
    memory: EnvMemory,
    rng: random.Random,
    np_rng: np.random.Generator,
    slot: int,
    attempt: int,
    skill: str,
    example: str,
) -> DesignOutcome:
    setting = config.setting
    document = corpus.sample(rng) if corpus is not None else None
    domain = variant = None
    if setting == "tool_use":
        domain = rng.choice(DOMAINS)
        variant = rng.choices(list(VARIANT_WEIGHTS), weights=list(VARIANT_WEIGHTS.values()))[0]
    if setting == "games" and document is None:
        raise ValueError("the games designer needs a corpus document")
    text = truncate_words(document.text, corpus.config.max_words(setting)) if corpus and document else None
    messages = designer_messages(setting, text, skill, domain=domain, variant=variant,
                                 multi_turn=config.multi_turn and setting == "tool_use",
                                 exemplars=exemplars_for_prompt(memory, setting, skill, np_rng),
                                 example_source=example)  # fmt: skip
    outcome = DesignOutcome(slot, attempt, skill, document.doc_id if document else None, domain, variant)
    try:
        response = _complete(client, messages, config.designer)
    except ChatError as exc:
        outcome.reason = f"designer call failed: {exc}"
        return outcome
    key = f"slot {slot} attempt {attempt}"
    source, report = admit(response, pool, setting, config.validation, key=key)
    if source is None:
        outcome.reason = f"{report.code}: {report.reason}"
        if report.code != "machine_fault":  # no worker could be had: the machine's condition, nothing to charge
            outcome.designer_reward = failure_penalty(config.reward, report.code or "crashed")
        return outcome
    spec = EnvSpec(env_id="", setting=setting, skill=skill, source=source, doc_id=outcome.doc_id, created_step=0,
                   metadata={"domain": domain, "variant": variant} if domain else {})  # fmt: skip
    outcome.valid, outcome.code, outcome.env_id = True, source, f"{setting}-{skill}-{spec.sha256[:12]}"
    outcome.validation_seeds = report.seeds + report.probe_seeds
    spec = EnvSpec(**{**spec.to_dict(), "env_id": outcome.env_id})
    # hashed per design like the recipe's (measure.measurement_seeds): consecutive integers always held two even
    # and two odd seeds, so an env keyed on seed parity was measured at a win rate of exactly 0.5; keyed by the
    # secret, or an env could recompute them from the public run seed and key
    seeds = measurement_seeds(config.seed, key, config.plays_per_arm, secret=config.secret)
    outcome.seeds = seeds
    try:
        hint_text = _complete(client, hint_messages(setting, source), config.hint_writer)
    except ChatError as exc:
        vetting = HintVetting(None, "hint_failed", f"hint writer call failed: {exc}")
    except RecursionError:  # valid code nested deeper than the code view's AST walk recurses (a 600-term 1+1+...)
        vetting = HintVetting(None, "hint_failed", "the hint writer's view of the code recursed too deep")
    else:
        vetting = vet_hint_on_seeds(source, hint_text, pool, setting, seeds)
    if vetting.failure in HINT_FAILURE_CODES or vetting.failure is None:
        outcome.hint, outcome.hint_failure = vetting.hint, vetting.failure
        if vetting.failure:
            outcome.reason = f"hint: {vetting.failure}: {vetting.reason}"
    else:  # the env itself broke while its hint was vetted (e.g. reset raised on a measurement seed)
        return _env_failed(outcome, config, memory, spec, vetting.failure, f"during hint vetting: {vetting.reason}")
    hints = [None] if outcome.hint is None else [None, outcome.hint]
    if outcome.hint is not None and config.placebo:
        hints.append(placebo_hint(outcome.hint, outcome.env_id or ""))
    arms = [measure_arm(source, pool, client, setting, seeds, h, config.agent, max_turns=config.max_turns)
            for h in hints]  # fmt: skip
    for arm in arms:
        if arm.fault is not None:
            return _env_failed(outcome, config, memory, spec, arm.fault, f"during measurement: {arm.reason}")
        if arm.agent_error is not None:  # the endpoint failed, not the env: admitted but not scored
            outcome.reason = f"measurement incomplete: agent call failed: {arm.agent_error}"
            return outcome
    outcome.no_hint = arms[0].outcomes
    outcome.hinted = arms[1].outcomes if len(arms) > 1 else []
    outcome.placebo = arms[2].outcomes if len(arms) > 2 else []
    unpaired = unpaired_seeds(seeds, vetting.first_obs, *(arm.first_obs for arm in arms))
    if unpaired:
        why = f"seed {unpaired[0]}: the arms (and hint vetting) saw different first observations"
        return _env_failed(outcome, config, memory, spec, "unpaired", why)
    outcome.measured = True
    window = WindowStats(
        skill=skill,
        outcomes=outcome.no_hint,
        paired_no_hint=outcome.no_hint if outcome.hinted else (),
        paired_hint=outcome.hinted,
        seeds_no_hint=seeds if outcome.hinted else (),
        seeds_hint=seeds if outcome.hinted else (),
        hint_failure=outcome.hint_failure,
        paired_placebo=outcome.placebo,
    )
    outcome.win_rate = window.win_rate  # wins only: partial credit is no win (spade_envs.design.rewards)
    outcome.regret = credited_regret(config.reward, window)  # placebo, hint failure and feasibility gates applied
    outcome.designer_reward = designer_reward(config.reward, window)
    memory.add(MemoryRecord(spec=spec, win_rate=outcome.win_rate, regret=outcome.regret, plays=len(seeds),
                            last_played_step=0, status=outcome.hint_failure or "ok"))  # fmt: skip
    return outcome


def _env_failed(
    outcome: DesignOutcome, config: GenerateConfig, memory: EnvMemory, spec: EnvSpec, code: str, reason: str
) -> DesignOutcome:
    """An admitted env broke after validation: the designer sample gets the code's penalty, the pool no env.

    Memory keeps an unplayable, unmeasured record (``plays=0``) for statistics and deduplication; it never
    overwrites a stored playable copy of the same code.
    """
    outcome.valid, outcome.failure = False, code
    outcome.reason = f"{code}: {reason}"
    outcome.no_hint, outcome.hinted, outcome.placebo, outcome.win_rate, outcome.regret = [], [], [], None, None
    # no worker could be had (machine_fault): the machine's condition, nothing to charge
    outcome.designer_reward = 0.0 if code == "machine_fault" else failure_penalty(config.reward, code)
    memory.add(MemoryRecord(spec=spec, win_rate=0.0, regret=0.0, plays=0, last_played_step=0, status=code))
    return outcome
