"""The designer pipeline with an external model: document -> environment -> validation -> hint -> regret.

Each step is a function the verl recipe reuses (prompt building, admission, hint vetting, paired measurement);
:func:`generate` chains them with any OpenAI-compatible endpoint playing both roles, which builds a
fixed-environment pool (like the paper's baseline pools) without GPU training.
"""

from __future__ import annotations

import json
import random
import sys
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from spade_envs.agent_play import Sampling, model_policy
from spade_envs.corpus import Corpus, truncate_words
from spade_envs.episode import play
from spade_envs.extract import extract_code
from spade_envs.hints import tool_call_values, vet_hint
from spade_envs.llm import ChatClient, ChatError
from spade_envs.memory import EnvMemory, MemoryConfig, MemoryRecord
from spade_envs.prompts import VARIANT_WEIGHTS, Exemplar, builtin_example, designer_messages, hint_messages
from spade_envs.rewards import RewardConfig, WindowStats, designer_reward, failure_penalty, paired_regret
from spade_envs.sandbox import RemoteEnv, SandboxError, WorkerPool
from spade_envs.skills import DOMAINS, SKILLS
from spade_envs.spec import EnvSpec
from spade_envs.validate import ValidationConfig, ValidationReport, validate_source

__all__ = ["DesignOutcome", "GenerateConfig", "admit", "exemplars_for_prompt", "generate", "measure", "vet_env_hint"]

_SNIPPET_CHARS = 2000


@dataclass(frozen=True)
class GenerateConfig:
    """Knobs of :func:`generate`. Sampling defaults follow the paper (designer 0.6, hint writer 0.3)."""

    setting: str = "games"
    n_envs: int = 4
    max_attempts: int = 5
    plays_per_arm: int = 4
    seed: int = 0
    multi_turn: bool = False
    designer: Sampling = Sampling(temperature=0.6, top_p=0.95, max_tokens=16384)
    hint_writer: Sampling = Sampling(temperature=0.3, top_p=0.9, max_tokens=1024)
    agent: Sampling = Sampling(temperature=0.6, top_p=0.95, max_tokens=4096)
    reward: RewardConfig = field(default_factory=RewardConfig)
    validation: ValidationConfig = field(default_factory=ValidationConfig)
    memory: MemoryConfig = field(default_factory=MemoryConfig)

    def __post_init__(self) -> None:
        if self.setting not in SKILLS:
            raise ValueError(f"setting must be one of {sorted(SKILLS)}, got {self.setting!r}")
        for name in ("n_envs", "max_attempts", "plays_per_arm"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1, got {getattr(self, name)}")


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
    win_rate: float | None = None
    regret: float | None = None
    designer_reward: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def exemplars_for_prompt(memory: EnvMemory, setting: str, skill: str, rng: np.random.Generator) -> list[Exemplar]:
    """Memory exemplars in the form the designer prompt shows (snippets cut at a line boundary)."""
    chosen = memory.exemplars(skill, setting, rng)
    shown = []
    for kind, items in (("positive", chosen.positives), ("negative", chosen.negatives)):
        for item in items:
            source = item.record.spec.source
            snippet = source if len(source) <= _SNIPPET_CHARS else source[: source.rfind("\n", 0, _SNIPPET_CHARS)]
            shown.append(Exemplar(snippet, skill, item.record.win_rate, item.record.regret, kind, item.reason))
    return shown


def admit(
    response: str, pool: WorkerPool, setting: str, config: ValidationConfig | None = None
) -> tuple[str | None, ValidationReport]:
    """Extract the code from a designer response and validate it in the sandbox; ``(source or None, report)``."""
    extraction = extract_code(response)
    if extraction.code is None:
        return None, ValidationReport(ok=False, code="no_code_block", reason=extraction.reason)
    report = validate_source(extraction.code, pool, config, setting=setting)
    return (extraction.code if report.ok else None), report


def vet_env_hint(
    source: str, hint_text: str, pool: WorkerPool, setting: str, seeds: list[int]
) -> tuple[str | None, str | None, str]:
    """Clean a written hint and check it leaks nothing of the instances it will be shown on.

    Returns ``(hint or None, failure code or None, reason)``. Leakage is checked against every measured seed:
    games against the solution's answer tokens, tool use against concrete values of the initial state.
    """
    env = RemoteEnv(source, pool)
    try:
        for seed in seeds:
            obs, _ = env.reset(seed)
            actions = env.solution()
            if setting == "games":
                result = vet_hint(hint_text, setting, solution_actions=actions, visible_text=obs)
            else:
                visible = json.dumps(env.tools())
                result = vet_hint(hint_text, setting, initial_values=tool_call_values(actions), visible_text=visible)
            if result.hint is None:
                return None, result.failure, result.reason
        return result.hint, None, ""
    finally:
        env.close()


def measure(
    source: str,
    pool: WorkerPool,
    client: ChatClient,
    setting: str,
    seeds: list[int],
    hint: str | None,
    sampling: Sampling,
) -> list[float]:
    """Outcomes of the model playing ``source`` once per seed (with ``hint`` on the first observation, if given)."""
    env = RemoteEnv(source, pool)
    try:
        tools = None
        if setting == "tool_use":
            env.reset(seeds[0])
            tools = env.tools()
        outcomes = []
        for seed in seeds:
            policy = model_policy(client, setting, tools=tools, hint=hint, sampling=sampling)
            outcomes.append(play(env, policy, seed, setting=setting).outcome)
        return outcomes
    finally:
        env.close()


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
    computed by :func:`spade_envs.rewards.designer_reward`.
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
        source, report = admit(_complete(client, messages, config.designer), pool, setting, config.validation)
    except ChatError as exc:
        outcome.reason = f"designer call failed: {exc}"
        return outcome
    if source is None:
        outcome.reason = f"{report.code}: {report.reason}"
        outcome.designer_reward = failure_penalty(config.reward, report.code or "crashed")
        return outcome
    spec = EnvSpec(env_id="", setting=setting, skill=skill, source=source, doc_id=outcome.doc_id, created_step=0,
                   metadata={"domain": domain, "variant": variant} if domain else {})  # fmt: skip
    outcome.valid, outcome.code, outcome.env_id = True, source, f"{setting}-{skill}-{spec.sha256[:12]}"
    spec = EnvSpec(**{**spec.to_dict(), "env_id": outcome.env_id})
    seeds = [config.seed * 1000 + slot * config.plays_per_arm + i for i in range(config.plays_per_arm)]
    outcome.seeds = seeds
    try:
        hint_text = _complete(client, hint_messages(setting, source), config.hint_writer)
        hint, outcome.hint_failure, hint_reason = vet_env_hint(source, hint_text, pool, setting, seeds)
    except ChatError as exc:
        hint, outcome.hint_failure, hint_reason = None, "hint_failed", str(exc)
    outcome.hint = hint
    play_failure = None
    try:
        outcome.no_hint = measure(source, pool, client, setting, seeds, None, config.agent)
        if hint is not None:
            outcome.hinted = measure(source, pool, client, setting, seeds, hint, config.agent)
    except SandboxError as exc:
        play_failure = {"EnvTimeout": "timeout", "OutputTooLarge": "output_too_large"}.get(
            type(exc).__name__, "crashed"
        )
        outcome.reason = f"env failed during play: {exc}"
    if not outcome.no_hint:
        outcome.no_hint = [0.0]
    window = WindowStats(
        skill=skill,
        outcomes=outcome.no_hint,
        paired_no_hint=outcome.no_hint if outcome.hinted else (),
        paired_hint=outcome.hinted,
        seeds_no_hint=seeds if outcome.hinted else (),
        seeds_hint=seeds if outcome.hinted else (),
        hint_failure=outcome.hint_failure,
        play_failure=play_failure,
    )
    outcome.win_rate = window.mean_outcome
    outcome.regret = paired_regret(outcome.no_hint, outcome.hinted, seeds, seeds) if outcome.hinted else 0.0
    outcome.designer_reward = designer_reward(config.reward, window)
    if hint_reason and not outcome.reason:
        outcome.reason = f"hint: {outcome.hint_failure}: {hint_reason}"
    raw_regret = sum(outcome.hinted) / len(outcome.hinted) - outcome.win_rate if outcome.hinted else 0.0
    memory.add(MemoryRecord(spec=spec, win_rate=outcome.win_rate, regret=raw_regret, plays=len(seeds),
                            last_played_step=0, status=play_failure or "ok"))  # fmt: skip
    return outcome
