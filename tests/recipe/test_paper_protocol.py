"""Every paper launcher and ablation is the paper's run: its composed config carries each number of the paper's table.

Each launcher runs with ``DRY_RUN=1`` (``test_launchers.py``'s machinery: the overrides it prints, composed against
verl 0.9.1's config, and the budget line it prints). The paper's numbers are written once, in ``RUNS`` and
``ABLATIONS`` below; ``test_every_column_of_the_table_is_checked`` proves that changing any of them fails the check.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from functools import cache

import pytest
from test_launchers import SHARED, budget_line, composed, dry_run

from recipe.spade.advantages import step_designer_scale


@dataclass(frozen=True)
class Run:
    """One paper run: the columns of the paper's settings table, plus the ablation switches (§10)."""

    model: str
    steps: int
    designs: int  # designs (envs) per regeneration
    batch: int  # global batch: trained samples per step
    n: int  # plays per env per step (rollout.n)
    regen: int  # regeneration interval (steps)
    hint_plays: int  # hinted plays per env; the recipe measures hint_plays / 2 plays per arm (no hint / hint)
    hint_tokens: int
    designer_tokens: int
    reward: str  # designer reward variant (the paper's regret_based is the recipe's "regret")
    kl: float  # low-variance KL loss coefficient; 0: no KL loss
    thinking: bool  # the paper's agent thinks (8B): spade.agent.thinking, per-turn samples; the designer does not
    active_skills: int | None  # skills active per regeneration; None: all of them
    audit_and_compact: bool  # tool-use validator audit and compact filter
    corpus_words: int
    temperature: float  # agent sampling temperature
    rollout_memory: float  # rollout engine memory fraction
    # The ablation switches, at the main runs' values.
    grounding: str = "corpus"
    memory: bool = True
    designer_train: bool = True
    skills: tuple[str, ...] | None = None  # None: the setting's six


# The paper's runs. Source: ../shared/notes/spade-reference.md §9 (settings table: rollouts, envs / global batch /
# plays per env per step, regeneration, hint plays / hint tokens, reward, KL, thinking, designer max tokens, skills,
# validator + compact filter, corpus words; "Other settings": tool 4B temperature 0.7; parallelism: rollout memory
# fraction 0.7, tool-use 30B 0.85) and §10 (budget per step: 24 designs, 192 samples, 24 designer + 168 agent).
# fmt: off
RUNS = {
    #                                model                               steps designs batch n   regen hint hint_tok designer reward    KL     think  active audit  words temp mem  # noqa: E501
    "run_spade_games_4b.sh":     Run("Qwen/Qwen3-4B-Instruct-2507",      400,  24,     192,  8,  4,    16,  4096,    16384,   "blend",  0.0,   False, 3,     False, 6000, 0.6, 0.7),  # noqa: E501
    "run_spade_games_8b.sh":     Run("Qwen/Qwen3-8B",                    400,  24,     192,  8,  4,    16,  4096,    20480,   "blend",  0.005, True,  3,     False, 6000, 0.6, 0.7),  # noqa: E501
    "run_spade_games_30b.sh":    Run("Qwen/Qwen3-30B-A3B-Instruct-2507", 400,  24,     192,  8,  4,    16,  4096,    16384,   "blend",  0.0,   False, 3,     False, 6000, 0.6, 0.7),  # noqa: E501
    "run_spade_tool_use_4b.sh":  Run("Qwen/Qwen3-4B-Instruct-2507",      500,  16,     256,  16, 32,   4,   512,     16384,   "regret", 0.005, False, None,  True,  4000, 0.7, 0.7),  # noqa: E501
    "run_spade_tool_use_8b.sh":  Run("Qwen/Qwen3-8B",                    400,  24,     192,  8,  8,    16,  2048,    20480,   "blend",  0.005, True,  None,  True,  4000, 0.6, 0.7),  # noqa: E501
    "run_spade_tool_use_30b.sh": Run("Qwen/Qwen3-30B-A3B-Instruct-2507", 400,  24,     192,  8,  8,    16,  2048,    16384,   "blend",  0.005, False, None,  True,  4000, 0.6, 0.85),  # noqa: E501
}
# The ablations, each over the games 30B run: what changes (§10's ablation table).
ABLATIONS = {
    "ablations/no_corpus.sh": {"grounding": "concepts"},
    "ablations/no_memory.sh": {"memory": False},
    "ablations/no_designer_training.sh": {"designer_train": False, "memory": False},
    "ablations/two_skills.sh": {"skills": ("mathematical_reasoning", "pattern_recognition"), "active_skills": 2},
    "ablations/solve_rate.sh": {"reward": "solve_rate"},
    "ablations/learning_potential.sh": {"reward": "learning_potential"},
    "ablations/regret_based.sh": {"reward": "regret"},
}
# Shared by every run (§9 "Shared settings" and §1 / §5): config path -> value.
SHARED_SETTINGS = {
    "actor_rollout_ref.actor.optim.lr": 1e-6,
    "actor_rollout_ref.actor.optim.weight_decay": 0.1,
    "actor_rollout_ref.actor.optim.betas": [0.9, 0.98],
    "actor_rollout_ref.actor.clip_ratio_low": 0.2,
    "actor_rollout_ref.actor.clip_ratio_high": 0.28,
    "actor_rollout_ref.actor.entropy_coeff": 0,
    "algorithm.rollout_correction.rollout_is": "token",  # TIS, Slime's defaults (what verl does with them:
    "algorithm.rollout_correction.rollout_is_threshold": 2.0,  # test_engine_receives.py)
    "algorithm.adv_estimator": "grpo",
    "algorithm.norm_adv_by_std_in_grpo": False,
    "algorithm.use_kl_in_reward": False,
    "actor_rollout_ref.rollout.top_p": 0.95,
    "actor_rollout_ref.rollout.top_k": 20,
    "spade.max_turns": 25,
    "spade.turn_tokens": 8192,
    "spade.memory.capacity": 200,
    "spade.learning_potential.fast_ema": 0.98,
    "spade.learning_potential.slow_ema": 0.85,
    "trainer.save_freq": 16,
}
# fmt: on
# The main commands that are the paper runs under their older names.
ALIASES = {
    "run_spade_30b.sh": "run_spade_games_30b.sh",
    "run_spade_8b.sh": "run_spade_games_8b.sh",
    "run_spade_4b.sh": "run_spade_games_4b.sh",
}  # fmt: skip


def expected(script: str) -> Run:
    if script in RUNS:
        return RUNS[script]
    return dataclasses.replace(RUNS["run_spade_games_30b.sh"], **ABLATIONS[script])


def expected_budget(run: Run) -> str:
    """The budget line of a paper run (§10: a regeneration step trains every design plus the rest as agent samples).

    Samples are counted in episodes and designs; a thinking agent's episodes train one sample per turn, which the
    line says (``agent_samples=per_turn``). Measurement: the paper's ``hint_plays`` per design are our two arms of
    ``hint_plays / 2``; the placebo arm (``spade.hint.placebo``, our deviation) adds a third arm of the same size.
    """
    plays = run.designs * run.hint_plays // 2 * 3
    line = (
        f"budget: designs_per_regen={run.designs} samples_per_step={run.batch} "
        f"agent_samples_regen_step={run.batch - run.designs} measurement_plays_per_regen={plays} measurement_arms=3"
    )
    return f"{line} agent_samples=per_turn" if run.thinking else line


def get(cfg, path: str):
    node = cfg
    for key in path.split("."):
        node = node[key]
    return node


def as_table(cfg) -> dict:
    """The launcher's composed config read back into the table's columns (a readable note where it cannot be)."""
    spade, actor, rollout = cfg.spade, cfg.actor_rollout_ref.actor, cfg.actor_rollout_ref.rollout
    kl = 0.0 if actor.use_kl_loss is False else actor.kl_loss_coef
    if actor.use_kl_loss and actor.kl_loss_type != "low_var_kl":
        kl = f"{actor.kl_loss_coef} ({actor.kl_loss_type})"
    # the thinking agent is the recipe's per-turn mode; the template's global switch stays off (the designer, hint
    # writer and audit do not think, in the paper neither)
    thinking, template = spade.agent.thinking, cfg.data.apply_chat_template_kwargs.get("enable_thinking")
    if template is not False:
        thinking = f"spade.agent.thinking {thinking}, but enable_thinking {template} for every prompt"
    # the designer's tokens must fit in the response (agent_loops caps them at rollout.response_length)
    designer = spade.designer.max_tokens
    if designer > rollout.response_length:
        designer = f"{designer} > response_length {rollout.response_length}"
    audit = spade.audit.enable
    if spade.agent.compact_filter != audit:
        audit = f"audit {audit}, compact filter {spade.agent.compact_filter}"
    grounding = spade.designer.grounding
    if (spade.corpus is None) != (grounding == "concepts"):
        grounding = f"{grounding} with corpus {spade.corpus}"
    return {
        "model": cfg.actor_rollout_ref.model.path,
        "steps": cfg.trainer.total_training_steps,
        "designs": 0 if spade.fixed_env.enable else spade.envs_per_regen,
        "batch": cfg.data.train_batch_size * rollout.n,
        "n": rollout.n,
        "regen": spade.regen_every,
        "hint_plays": 2 * spade.plays_per_arm,
        "hint_tokens": spade.hint.max_tokens,
        "designer_tokens": designer,
        "reward": cfg.reward.reward_kwargs.designer.variant,
        "kl": kl,
        "thinking": thinking,
        "active_skills": spade.skills.active_per_regen,
        "audit_and_compact": audit,
        "corpus_words": spade.corpus_words,
        "temperature": rollout.temperature,
        "rollout_memory": rollout.gpu_memory_utilization,
        "grounding": grounding,
        "memory": spade.memory.enable,
        "designer_train": spade.designer.train,
        "skills": None if spade.skills.names is None else tuple(spade.skills.names),
    }


def mismatches(cfg, budget: str, run: Run) -> list[str]:
    """Every column of ``run`` that the composed config or its budget line contradicts."""
    got = as_table(cfg)
    assert set(got) == {f.name for f in dataclasses.fields(Run)}, "a column of the table is not checked"
    problems = [f"{name}: the launcher's {value!r}, the paper's {getattr(run, name)!r}"
                for name, value in got.items() if value != getattr(run, name)]  # fmt: skip
    if budget != expected_budget(run):
        problems.append(f"budget: the launcher's {budget!r}, the paper's {expected_budget(run)!r}")
    problems += [f"{path}: the launcher's {get(cfg, path)!r}, the paper's {value!r}"
                 for path, value in SHARED_SETTINGS.items() if get(cfg, path) != value]  # fmt: skip
    return problems


@cache
def plan(script: str):
    """The launcher's composed config and budget line."""
    config_name, overrides = dry_run(script, **SHARED)
    return composed(config_name, overrides), budget_line(script, **SHARED)


@pytest.mark.parametrize("script", [*RUNS, *ABLATIONS])
def test_launcher_is_the_papers_run(script):
    assert mismatches(*plan(script), expected(script)) == []


@pytest.mark.parametrize("script", RUNS)
def test_the_designer_advantage_scale_is_the_papers(script):
    """§6: scale = min(50, n_actor / n_env x R), n_actor the 192 (tool 4B: 256) agent plays of a step: 32 for games."""
    run = RUNS[script]
    config, _ = plan(script)
    assert step_designer_scale(config, run.designs) == min(50.0, run.batch / run.designs * run.regen)
    assert step_designer_scale(config, run.designs) == (32.0 if script.startswith("run_spade_games") else 50.0)


def test_the_games_30b_budget_is_the_issues():
    assert expected_budget(RUNS["run_spade_games_30b.sh"]) == (
        "budget: designs_per_regen=24 samples_per_step=192 agent_samples_regen_step=168 "
        "measurement_plays_per_regen=576 measurement_arms=3"
    )


@pytest.mark.parametrize("field", [f.name for f in dataclasses.fields(Run)])
def test_every_column_of_the_table_is_checked(field):
    """A launcher that drifts from any number of the table fails (here the table drifts, one column at a time)."""
    run = RUNS["run_spade_games_30b.sh"]
    value = getattr(run, field)
    other = {bool: lambda v: not v, int: lambda v: v + 1, float: lambda v: v + 0.1, str: lambda v: v + "x",
             type(None): lambda v: 2, tuple: lambda v: None}[type(value)](value)  # fmt: skip
    problems = mismatches(*plan("run_spade_games_30b.sh"), dataclasses.replace(run, **{field: other}))
    assert any(p.startswith(f"{field}:") for p in problems), problems


@pytest.mark.parametrize("script", ABLATIONS)
def test_an_ablation_changes_only_its_switches(script):
    """An ablation's overrides differ from the games 30B run's in its switches and its experiment name, nothing else."""
    base = set(dry_run("run_spade_games_30b.sh", **SHARED)[1])
    changed = {o.split("=", 1)[0] for o in set(dry_run(script, **SHARED)[1]) ^ base}
    switch_keys = {
        "grounding": {"spade.designer.grounding", "spade.corpus"}, "memory": {"spade.memory.enable"},
        "designer_train": {"spade.designer.train"}, "skills": {"spade.skills.names"},
        "active_skills": {"spade.skills.active_per_regen"}, "reward": {"reward.reward_kwargs.designer.variant"},
    }  # fmt: skip
    assert changed == set().union(*(switch_keys[k] for k in ABLATIONS[script])) | {"trainer.experiment_name"}


@pytest.mark.parametrize(("alias", "script"), ALIASES.items())
def test_the_older_commands_are_the_games_runs(alias, script):
    assert dry_run(alias, **SHARED) == dry_run(script, **SHARED)
    assert budget_line(alias, **SHARED) == budget_line(script, **SHARED)


def test_the_8b_thinking_agent_needs_per_turn_samples_and_the_templates_switch_together():
    """Issue 15: without per-turn samples, or with every prompt thinking (the designer too), it is not the run."""
    config_name, overrides = dry_run("run_spade_games_8b.sh", **SHARED)
    for pin in ("spade.agent.thinking=", "++data.apply_chat_template_kwargs.enable_thinking="):
        kept = [o for o in overrides if not o.startswith(pin)]
        assert len(kept) == len(overrides) - 1, f"the launcher has no single {pin}"
        problems = mismatches(composed(config_name, kept), budget_line("run_spade_games_8b.sh", **SHARED),
                              RUNS["run_spade_games_8b.sh"])  # fmt: skip
        assert any(p.startswith("thinking:") for p in problems), problems
