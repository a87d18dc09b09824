"""``make learn MODE=spade``: SPADE's designer signal with a real learning agent, through the recipe's self-play path.

A 135M model cannot design (``recipe.spade.laptop.design_validity``), so the designer is a **stand-in**
(``rollout.name=hf_ladder``, ``recipe/spade/cpu/ladder_designer.py``) that writes starter-ladder rungs as difficulty
levels, each level once per step; everything after the design is the recipe's own: validation in the sandbox, the
hint written by the real model, the paired no-hint / hint / placebo plays by the real agent, the designer reward,
and the agent's GRPO update on the live levels. The launcher (``examples/run_spade_tiny_cpu.sh``) runs in self-play
mode (no ``fixed_env``); the designer's samples never train the model (``spade.designer.train=false``: they are
the stand-in's text). Per step and level this prints the no-hint win rate, the regret the reward credits and the
designer reward, read from the run record (``spade/run_record.jsonl``: design and scores entries) as the trainer
writes it. It shows the reward tracking a learning agent; it does not show a model learning to design.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

from omegaconf import DictConfig, OmegaConf

from recipe.spade.laptop.learn_stats import thread_env
from recipe.spade.laptop.process_group import process_group
from spade_envs.envs.contract import is_win

__all__ = ["LevelStep", "level_steps", "load_config", "main", "spade_command"]

_ROOT = Path(__file__).resolve().parents[3]
CONFIG = _ROOT / "recipe" / "spade" / "config" / "learn_spade.yaml"
LAUNCHER = _ROOT / "examples" / "run_spade_tiny_cpu.sh"
_CLASS = re.compile(r"^class (\w+)", re.MULTILINE)
SHOWS = ("What this shows: the recipe's designer reward (validation, the model's hint, paired no-hint / hint / placebo "
         "plays, the blend of difficulty plateau and credited regret) computed from a real agent's plays of each level "
         "while that agent trains; whether the agent improved is in the per-step lines above (a FAST run's few steps "
         "and plays per arm are too few to show it). What it does not show: a model learning to design. The designs "
         "are a scripted stand-in (ladder rungs, hf_ladder), never trained on; a learning designer needs a "
         "code-capable model on a GPU.")  # fmt: skip


@dataclass(frozen=True)
class LevelStep:
    """One level's design at one step: its paired plays, the credited regret and the designer reward."""

    step: int
    level: str
    verdict: str
    code: str | None
    no_hint: list[float]
    hint: list[float]
    placebo: list[float]
    win_rate: float | None
    regret: float | None
    reward: float | None


def load_config(fast: bool, overrides: Sequence[str] = ()) -> DictConfig:
    """``learn_spade.yaml`` with ``fast`` folded into ``run`` and dotlist ``overrides`` (``run.steps=4``) applied."""
    cfg = OmegaConf.load(CONFIG)
    if fast:
        cfg.run = OmegaConf.merge(cfg.run, cfg.fast)
    cfg = OmegaConf.merge(cfg, OmegaConf.from_dotlist(list(overrides)))
    if len(cfg.levels) % cfg.run.n:
        raise ValueError(f"the number of levels ({len(cfg.levels)}) must be a multiple of run.n ({cfg.run.n}): "
                         "each designer row makes n designs")  # fmt: skip
    samples = (cfg.run.rows + len(cfg.levels) // cfg.run.n) * cfg.run.n
    if samples % cfg.run.micro_batch:
        raise ValueError(f"run.micro_batch ({cfg.run.micro_batch}) must divide the step's {samples} samples "
                         "((rows + levels / n) x n): verl splits them into equal micro-batches")  # fmt: skip
    return cfg


def spade_command(cfg: DictConfig, model: str, pool_dir: Path, run_dir: Path) -> tuple[list[str], dict[str, str]]:
    """The launcher command and environment: self-play with the ladder stand-in designing every level each step."""
    r = cfg.run
    levels = ",".join(cfg.levels)
    env = {"RUN_DIR": str(run_dir), "STEPS": str(r.steps), "REGEN_EVERY": "1", "ENVS_PER_REGEN": str(len(cfg.levels)),
           "AGENT_ROWS": str(r.rows), "N": str(r.n), "PYTHON": sys.executable, **thread_env(cfg.threads)}  # fmt: skip
    model_args = [f"spade_cpu.tiny_model_dir={run_dir / 'tiny-model'}"] if model == "tiny" else []
    overrides = [
        f"actor_rollout_ref.model.path={model}", *model_args,
        "actor_rollout_ref.rollout.name=hf_ladder", f"++actor_rollout_ref.rollout.custom.ladder_levels=[{levels}]",
        # the levels are the seed envs: step 0's agent rows play them before their first design goes live
        f"spade.fixed_env.pool_dir={pool_dir}",
        "spade.designer.train=false",  # the stand-in's text never trains the model
        f"spade.validation.random_episodes={cfg.random_episodes}",  # learn_spade.yaml says why
        f"spade.plays_per_arm={r.plays_per_arm}", f"spade.turn_tokens={r.turn_tokens}",
        f"spade.hint.max_tokens={r.hint_tokens}",
        f"data.max_prompt_length={r.prompt_length}", f"actor_rollout_ref.rollout.prompt_length={r.prompt_length}",
        f"data.max_response_length={r.response_length}",
        f"actor_rollout_ref.rollout.response_length={r.response_length}",
        f"actor_rollout_ref.actor.ppo_mini_batch_size={r.rows + len(cfg.levels) // r.n}",
        f"actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu={r.micro_batch}",
        f"actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu={r.micro_batch}",
        f"actor_rollout_ref.actor.optim.lr={r.lr}", "actor_rollout_ref.actor.use_kl_loss=false",
        f"algorithm.rollout_correction.bypass_mode={str(bool(r.bypass_old_log_prob)).lower()}",
        f"++actor_rollout_ref.rollout.custom.hf_gather_s={r.gather_s}",
        "+ray_kwargs.ray_init.address=local",  # its own Ray cluster, never another job's
    ]  # fmt: skip
    return ["bash", str(LAUNCHER), *overrides], env


def _entries(record: Path) -> list[dict]:
    if not record.exists():
        return []
    lines = record.read_text(encoding="utf-8").split("\n")
    return [json.loads(line) for line in lines if line.strip()]


def level_steps(record: Path) -> list[LevelStep]:
    """Each design of the run record as a level step (``None`` reward until the step's ``scores`` entry is written).

    The level is the class the design defines; the reward is the designer row's score in the step's scores entry.
    """
    entries = _entries(record)
    rewards = {(e["step"], d["design"]): d["reward"] for e in entries if e.get("kind") == "scores"
               for d in e.get("designer", ())}  # fmt: skip
    out = []
    for e in entries:
        if e.get("kind") != "design":
            continue
        found = _CLASS.search(e.get("source") or "")
        arms = e.get("arms") or {}
        out.append(LevelStep(e["step"], found.group(1) if found else "?", e["verdict"], e.get("code"),
                             arms.get("no_hint") or [], arms.get("hint") or [], arms.get("placebo") or [],
                             e.get("win_rate"), e.get("regret"), rewards.get((e["step"], e["design"]))))  # fmt: skip
    return sorted(out, key=lambda s: s.step)


def _rate(plays: list[float]) -> str:
    return f"{sum(map(is_win, plays))}/{len(plays)}" if plays else "-"  # wins: partial credit is no win


def _num(value: float | None, fmt: str = "+.2f") -> str:
    return "-" if value is None else format(value, fmt)


def step_lines(step: int, levels: Sequence[str], rows: list[LevelStep], agent_win: float | None,
               seconds: float) -> list[str]:  # fmt: skip
    """The step's lines: the agent's training win rate, then per level no-hint / hint / placebo wins, regret, reward."""
    lines = [f"  step {step:2d}  agent training win {_num(agent_win, '.2f')}  {seconds:.0f} s"]
    by_level = {r.level: r for r in rows if r.step == step}
    for level in levels:
        r = by_level.get(level)
        if r is None:
            lines.append(f"    {level:13s} no design this step")
        elif r.verdict != "admitted":
            lines.append(f"    {level:13s} rejected ({r.code}), reward {_num(r.reward)}")
        else:
            lines.append(f"    {level:13s} no-hint {_rate(r.no_hint):>5s} ({_num(r.win_rate, '.2f')})  hint "
                         f"{_rate(r.hint):>5s}  placebo {_rate(r.placebo):>5s}  regret {_num(r.regret)}  "
                         f"designer reward {_num(r.reward)}")  # fmt: skip
    return lines


def _metrics(path: Path, since: float) -> list[dict]:
    rows = _entries(path)
    return [r for r in rows if r.get("time", 0) >= since and "spade/step" in r]


def run(cfg: DictConfig, model: str, pool_dir: Path, run_dir: Path, verbose: bool) -> list[LevelStep]:
    """Run the launcher to the end, printing each finished step; raises ``RuntimeError`` with the log on failure."""
    command, env = spade_command(cfg, model, pool_dir, run_dir)
    log = run_dir / "learn_spade.log"
    spade_dir = run_dir / "spade"
    start = last = time.time()
    printed = 0
    with log.open("w", encoding="utf-8") as out:
        with process_group(command, stdout=out, stderr=subprocess.STDOUT, cwd=_ROOT,
                           env={**os.environ, **env}) as proc:  # fmt: skip
            while True:
                done = proc.poll() is not None
                rows = _metrics(spade_dir / "spade_metrics.jsonl", start)
                for row in rows[printed:]:
                    step = int(row["spade/step"])
                    lines = step_lines(step, cfg.levels, level_steps(spade_dir / "run_record.jsonl"),
                                       row.get("spade/solve/win_rate"), row["time"] - last)  # fmt: skip
                    if not printed:
                        lines[0] += " (incl. start-up)"
                    print("\n".join(lines), flush=True)
                    last, printed = row["time"], printed + 1
                if done:
                    break
                time.sleep(1.0)
    if verbose or proc.returncode != 0:
        tail = log.read_text(encoding="utf-8", errors="replace").splitlines()[-30:]
        print("\n".join(f"    {line[:200]}" for line in tail))
    if proc.returncode != 0:
        raise RuntimeError(f"the MODE=spade run failed (exit {proc.returncode}); full log: {log}")
    return level_steps(spade_dir / "run_record.jsonl")


def summarise(levels: Sequence[str], rows: list[LevelStep], run_dir: Path, wall: float) -> dict:
    """Per level: the no-hint win rate and designer reward at the first and last step; written as JSON too."""
    summary: dict = {"levels": {}, "wall_s": round(wall, 1), "designer": "stand-in (hf_ladder), not the model"}
    print("per level, first -> last step (no-hint win rate; designer reward):")
    for level in levels:
        mine = [r for r in rows if r.level == level and r.verdict == "admitted"]
        summary["levels"][level] = [asdict(r) for r in rows if r.level == level]
        if mine:
            a, b = mine[0], mine[-1]
            print(f"  {level:13s} win {_num(a.win_rate, '.2f')} -> {_num(b.win_rate, '.2f')}; reward "
                  f"{_num(a.reward)} -> {_num(b.reward)} (steps {a.step} -> {b.step})")  # fmt: skip
        else:
            print(f"  {level:13s} never admitted")
    print(SHOWS)
    print(f"total {wall:.0f} s; run record: {run_dir / 'spade' / 'run_record.jsonl'} (spade-envs browse {run_dir})")
    (run_dir / "learn_spade_summary.json").write_text(json.dumps(summary, indent=2) + "\n", encoding="utf-8")
    return summary


def main(run_dir: Path, fast: bool, verbose: bool, overrides: Sequence[str] = ()) -> int:
    """Convert the model once, write the levels as the seed pool, run self-play, summarise."""
    from spade_envs.builtin.ladder import write_ladder_pool

    cfg = load_config(fast, overrides)
    run_dir.mkdir(parents=True, exist_ok=True)
    start = time.time()
    if cfg.model_dir == "tiny":
        model = "tiny"
    else:
        from recipe.spade.cpu.tiny_model import smollm2_from_gguf

        model = str(smollm2_from_gguf(cfg.model_dir))
    pool_dir = write_ladder_pool(run_dir / "pool", list(cfg.levels))
    r = cfg.run
    print(f"make learn MODE=spade: {model} learns; the DESIGNER IS A STAND-IN (hf_ladder: ladder rungs as levels "
          f"{', '.join(cfg.levels)}, each designed once per step, never trained on); {r.steps} steps x {r.rows} "
          f"agent rows x {r.n} samples, {r.plays_per_arm} plays per arm per design, lr {r.lr}; run dir {run_dir}",
          flush=True)  # fmt: skip
    rows = run(cfg, model, pool_dir, run_dir, verbose)
    summarise(list(cfg.levels), rows, run_dir, time.time() - start)
    return 0
