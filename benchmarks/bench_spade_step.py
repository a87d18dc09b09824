"""Seconds per SPADE step vs plain GRPO on the same tiny model, batch and token budget (CPU backend, verl's V1 trainer).

Run: ``.venv/bin/python benchmarks/bench_spade_step.py [--steps 5] [--work DIR]``. Prints a table. Minutes.

* SPADE: ``examples/run_spade_tiny_cpu.sh`` (4 rows x rollout.n 2, response budget 64, regen_every 2) with the
  scripted designer stand-in (``hf_scripted``), so that design steps admit environments and pay for validation, hint
  writing and the paired measurement plays, as a real run would. The stand-in also generates and drops as many
  tokens as each scripted answer holds, up to the request's budget (``rollout.custom.scripted_generates``), so the
  designer's and the hint writer's generation is paid as well. Design and play-only steps are reported apart.
* GRPO: ``recipe.spade.laptop.main_cpu`` (verl's plain GRPO) with the same model, 4 prompts x n 2, response budget 64,
  and tiny prompts padded with filler words to SPADE's mean prompt length, so that both train on about the same
  number of tokens per step (issue 31's and issue 39's baseline).
* GRPO, SPADE's step shapes: the same, but each step's four prompts padded to the lengths SPADE's step of that number
  had (a design step: two at its longest prompt, the designer's, and two at its shortest, the agent's; a play-only
  step: four at its mean), in order (``data.shuffle=false``). Row lengths decide the update's cost per token
  (attention grows with a row; per-row costs weigh more on short rows), so the ratio to this run is what SPADE's own
  machinery (sandbox, validation, hint vetting, measurement plays) costs beyond plain GRPO on the same rows, each
  generating its responses.

Step 1 of each run carries warm-up and is left out of the means. The ratio columns are SPADE over GRPO from the
same run, per 1k trained tokens (issue 31's measure) and per step; "gen s", "old_lp s" and "update s" are verl's
``timing_s/gen``, ``timing_s/old_log_prob`` and ``timing_s/update_actor``; "s / 1k tokens" normalises by the tokens verl
trained on in the step (``perf/total_num_tokens``). The sandbox share is the agent episodes' time in sandbox calls
(acquire, init, reset, steps, close) over their wall time (``spade/sandbox_time_share``). The reference line is issue
31's measurement of main at 311d5ce.

A second table splits each step into the rollout engine's own work and the rest, from the engine's stats file
(``rollout.custom.hf_stats_path``: requests, prompt tokens prefilled, tokens generated, seconds its torch thread ran,
per step). SPADE's design steps generate for work that never trains (hint prompts, measurement plays in three arms);
per trained token that generation is charged to SPADE, so "busy vs base" shows how much more the engine worked and
"rest vs base" what the step cost apart from it (the sandbox, validation, the agent loops, the training phases). The
engine shares two CPUs with the sandbox, so its busy seconds include what that contention costs it.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from recipe.spade.cpu.tiny_model import build_tiny_qwen3  # noqa: E402
from spade_envs.cli.table import format_table  # noqa: E402

#: Issue 31's figures for main at 311d5ce (before the host-boundary work), tiny model, 2-core machine at load ~2.
REFERENCE = {"ratio": "1.48x", "share": "0.79"}
#: Issue 39's target: SPADE over GRPO per 1k trained tokens, all steps (1.28x at 7a9447f).
TARGET_RATIO = 1.1
#: What the rollout engine reports per step (``rollout.custom.hf_stats_path``, recipe/spade/cpu/hf_rollout.py).
GEN_KEYS = ("requests", "prompt_tokens", "generated_tokens", "busy_s")


def _steps(log: str) -> dict[int, dict[str, float]]:
    """The console logger's lines as {step: {metric: value}} (numeric values only)."""
    steps = {}
    for line in re.finditer(r"step:(\d+) - (.*)", log):
        values = {}
        for key, value in re.findall(r"([\w/@.-]+):(?:np\.\w+\()?([-\d.e+]+)", line.group(2)):
            try:
                values[key] = float(value)
            except ValueError:
                continue
        steps[int(line.group(1))] = values
    return steps


def _run(command: list[str], work: Path, env: dict[str, str], steps: int) -> dict[int, dict[str, float]]:
    out = subprocess.run(command, capture_output=True, text=True, timeout=1800, cwd=work, env=env)
    log = out.stdout + out.stderr
    parsed = _steps(log)
    if out.returncode != 0 or len(parsed) < steps:
        raise RuntimeError(f"run failed (rc {out.returncode}, {len(parsed)} steps logged): {log[-2000:]}")
    return parsed


def _fresh_stats_override(path: Path) -> str:
    """The override that makes the rollout write its stats to ``path``, which is emptied first (one file per run)."""
    path.unlink(missing_ok=True)
    return f"++actor_rollout_ref.rollout.custom.hf_stats_path={path}"


def generation_work(path: Path) -> dict[int, dict[str, float]]:
    """{step: the rollout engine's work in it} from a run's ``hf_stats_path`` file (summed over replicas)."""
    work: dict[int, dict[str, float]] = {}
    for line in path.read_text().splitlines():
        row = json.loads(line)
        into = work.setdefault(row["step"], {})
        for key in GEN_KEYS:
            into[key] = into.get(key, 0.0) + row[key]
    return work


def spade_steps(work: Path, steps: int, priced: bool = True) -> dict[int, dict[str, float]]:
    """The tiny SPADE run; ``priced``: the stand-in designer pays its answers' generation (the module docstring)."""
    env = {**os.environ, "PYTHON": sys.executable, "RUN_DIR": str(work / "spade"), "STEPS": str(steps)}
    command = ["bash", str(ROOT / "examples" / "run_spade_tiny_cpu.sh"), f"spade_cpu.tiny_model_dir={work / 'model'}",
               "actor_rollout_ref.rollout.name=hf_scripted",
               f"++actor_rollout_ref.rollout.custom.scripted_generates={str(priced).lower()}",
               _fresh_stats_override(work / "gen-spade.jsonl")]  # fmt: skip
    print(f"SPADE: {steps} steps{'' if priced else ', the designer unpriced'} ...", flush=True)
    return _with_generation(_run(command, work, env, steps), work / "gen-spade.jsonl")


def _with_generation(steps: dict[int, dict[str, float]], path: Path) -> dict[int, dict[str, float]]:
    """Each step's metrics with its generation work added as ``gen/<key>`` (absent keys: the file had no line)."""
    for step, row in generation_work(path).items():
        if step in steps:
            steps[step].update({f"gen/{key}": value for key, value in row.items()})
    return steps


def grpo_steps(work: Path, steps: int, context_words: int, shaped: Path | None = None) -> dict[int, dict[str, float]]:
    """Plain GRPO: every prompt with ``context_words`` filler words, or the prompts of ``shaped`` in order."""
    stats = work / ("gen-grpo-shaped.jsonl" if shaped else "gen-grpo.jsonl")
    data = ([f"data.train_files={shaped}", f"data.val_files={shaped}", "data.shuffle=false",
             "data.max_prompt_length=4032"] if shaped else
            [f"spade_cpu.tiny_data_dir={work / 'data'}", f"spade_cpu.tiny_context_words={context_words}",
             "data.max_prompt_length=2048"])  # fmt: skip
    command = [sys.executable, "-m", "recipe.spade.laptop.main_cpu", f"spade_cpu.tiny_model_dir={work / 'model'}",
               *data, f"trainer.total_training_steps={steps}", "data.train_batch_size=4",
               "actor_rollout_ref.rollout.n=2", "data.max_response_length=64", "data.filter_overlong_prompts=false",
               "actor_rollout_ref.actor.ppo_mini_batch_size=2",
               f"trainer.default_local_dir={work / ('ckpt-shaped' if shaped else 'ckpt')}",
               _fresh_stats_override(stats)]  # fmt: skip
    what = "SPADE's step shapes" if shaped else f"{context_words} filler words per prompt"
    print(f"GRPO: {steps} steps, {what} ...", flush=True)
    return _with_generation(_run(command, work, {**os.environ}, steps), stats)


def _words_for(prompt_tokens: float, model_dir: Path) -> int:
    """Filler words that make a tiny GRPO prompt about ``prompt_tokens`` long under the tiny tokenizer."""
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    sample = " ".join(["river", "lantern", "tile", "barge", "coin", "card"] * 50)
    per_word = len(tokenizer(sample)["input_ids"]) / 300
    return max(0, int(prompt_tokens / per_word) - 20)


def step_shapes(spade: dict[int, dict[str, float]]) -> list[list[float]]:
    """Per SPADE step, in order, the prompt tokens of its four prompts (see the module docstring)."""
    shapes = []
    for step in sorted(spade):
        row = spade[step]
        if row.get("spade/designer/samples", 0) > 0:
            shapes.append([row["prompt_length/max"]] * 2 + [row["prompt_length/min"]] * 2)
        else:
            shapes.append([row["prompt_length/mean"]] * 4)
    return shapes


def write_shaped_dataset(path: Path, shapes: list[list[float]], model_dir: Path) -> Path:
    """A parquet of tiny prompts, one per entry of ``shapes`` in order, each padded to its prompt-token length."""
    import pandas as pd

    from recipe.spade.cpu.tiny_data import write_tiny_dataset

    base = pd.read_parquet(write_tiny_dataset(path.parent / "base", "train", sum(len(s) for s in shapes)))
    filler = ["river", "lantern", "tile", "barge", "coin", "card"]
    rows = []
    for index, tokens in enumerate(t for shape in shapes for t in shape):
        row = base.iloc[index].to_dict()
        words = _words_for(tokens, model_dir)
        context = " ".join(filler[i % len(filler)] for i in range(words))
        question = row["prompt"][0]["content"]
        row["prompt"] = [{"role": "user", "content": f"{context}\n\n{question}" if context else question}]
        rows.append(row)
    pd.DataFrame(rows).to_parquet(path, index=False)
    return path


def _per_token(rows: list[dict[str, float]], leave_out: str | None = None) -> float:
    """Seconds per 1k trained tokens: the mean step time (less ``timing_s/<leave_out>``) over the mean tokens."""
    seconds = statistics.mean(r["timing_s/step"] - (r[f"timing_s/{leave_out}"] if leave_out else 0) for r in rows)
    return 1000 * seconds / statistics.mean(r["perf/total_num_tokens"] for r in rows)


def _row(name: str, rows: list[dict[str, float]], baseline: list[dict[str, float]] | None) -> list[str]:
    seconds = statistics.mean(r["timing_s/step"] for r in rows)
    tokens = statistics.mean(r["perf/total_num_tokens"] for r in rows)
    gen = statistics.mean(r["timing_s/gen"] for r in rows)
    old_lp = statistics.mean(r.get("timing_s/old_log_prob", 0.0) for r in rows)
    update = statistics.mean(r.get("timing_s/update_actor", 0.0) for r in rows)
    if baseline:
        per_token = f"{_per_token(rows) / _per_token(baseline):.2f}x"
        per_step = f"{seconds / statistics.mean(r['timing_s/step'] for r in baseline):.2f}x"
    else:
        per_token = per_step = "1.00x"
    return [name, str(len(rows)), f"{seconds:.2f}", f"{gen:.2f}", f"{old_lp:.2f}", f"{update:.2f}", f"{tokens:.0f}",
            f"{_per_token(rows):.2f}", per_token, per_step]  # fmt: skip


def _idle_per_token(rows: list[dict[str, float]]) -> float:
    """Seconds per 1k trained tokens while the rollout engine was not generating (step time less its busy time)."""
    seconds = statistics.mean(r["timing_s/step"] - r["gen/busy_s"] for r in rows)
    return 1000 * seconds / statistics.mean(r["perf/total_num_tokens"] for r in rows)


def _gen_row(name: str, rows: list[dict[str, float]], baseline: list[dict[str, float]] | None) -> list[str]:
    def mean(key: str) -> float:
        return statistics.mean(r[key] for r in rows)

    busy_per_token = 1000 * mean("gen/busy_s") / mean("perf/total_num_tokens")
    ratios = ["1.00x", "1.00x"]
    if baseline:
        base_busy = (
            1000
            * statistics.mean(r["gen/busy_s"] for r in baseline)
            / statistics.mean(r["perf/total_num_tokens"] for r in baseline)
        )
        ratios = [f"{busy_per_token / base_busy:.2f}x", f"{_idle_per_token(rows) / _idle_per_token(baseline):.2f}x"]
    counts = [f"{mean(f'gen/{key}'):.0f}" for key in ("requests", "prompt_tokens", "generated_tokens")]
    rest = mean("timing_s/step") - mean("gen/busy_s")
    return [name, *counts, f"{mean('gen/busy_s'):.2f}", f"{rest:.2f}", f"{busy_per_token:.3f}",
            f"{_idle_per_token(rows):.3f}", *ratios]  # fmt: skip


def generation_table(runs: list[tuple[str, list[dict[str, float]]]], baseline: list[dict[str, float]]) -> str:
    """The rollout engine's work per step, and the step's time apart from it, per 1k trained tokens vs ``baseline``."""
    headers = ["run", "requests", "prompt tok", "generated tok", "engine busy s", "rest s", "busy s / 1k tok",
               "rest s / 1k tok", "busy vs base", "rest vs base"]  # fmt: skip
    table = [_gen_row(name, rows, None if rows is baseline else baseline) for name, rows in runs if rows]
    return format_table(headers, table)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--steps", type=int, default=5, help="steps per run (step 1 is warm-up)")
    parser.add_argument("--work", type=Path, default=None, help="work directory (default: a temporary one)")
    parser.add_argument("--unpriced-designer", action="store_true",
                        help="the stand-in designer answers without generating (the measure before issue 39's "
                             "seventh stop; SPADE then skips generation a real designer pays)")  # fmt: skip
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        work = args.work or Path(tmp)
        work.mkdir(parents=True, exist_ok=True)
        model_dir = build_tiny_qwen3(work / "model")
        spade = spade_steps(work, args.steps, priced=not args.unpriced_designer)
        later = [spade[s] for s in sorted(spade) if s > 1]
        design = [r for r in later if r.get("spade/designer/samples", 0) > 0]
        play = [r for r in later if r.get("spade/designer/samples", 0) == 0]
        prompt_tokens = statistics.mean(r["prompt_length/mean"] for r in later)
        grpo = grpo_steps(work, args.steps, _words_for(prompt_tokens, model_dir))
        grpo_rows = [grpo[s] for s in sorted(grpo) if s > 1]
        shaped_path = write_shaped_dataset(work / "shaped" / "train.parquet", step_shapes(spade), model_dir)
        shaped = grpo_steps(work, args.steps, 0, shaped=shaped_path)
        shaped_rows = [shaped[s] for s in sorted(shaped) if s > 1]
        table = [_row("plain GRPO (same tokens)", grpo_rows, None)]
        for name, rows in (
            ("SPADE, all steps", later),
            ("SPADE, design steps", design),
            ("SPADE, play-only steps", play),
        ):
            if rows:
                table.append(_row(name, rows, grpo_rows))
        table.append(_row("plain GRPO (SPADE's step shapes)", shaped_rows, grpo_rows))
        table.append(_row("SPADE vs GRPO on its shapes", later, shaped_rows))
        # the first ratio is issue 31's measure (per 1k trained tokens, target <= 1.3x); the second is per step
        headers = ["run", "steps", "s / step", "gen s", "old_lp s", "update s", "tokens / step", "s / 1k tokens",
                   "vs GRPO / 1k tok", "vs GRPO / step"]  # fmt: skip
        print(format_table(headers, table))
        ratio = _per_token(later) / _per_token(grpo_rows)
        verdict = "ok" if ratio <= TARGET_RATIO else "MISS"
        print(f"SPADE vs GRPO per 1k trained tokens, all steps: {ratio:.2f}x (target <= {TARGET_RATIO:g}x [{verdict}])")
        shaped_ratio = _per_token(later) / _per_token(shaped_rows)
        training = _per_token(later, "gen") / _per_token(shaped_rows, "gen")
        print(
            f"SPADE vs GRPO on SPADE's step shapes, per 1k trained tokens: {shaped_ratio:.2f}x (SPADE's machinery"
            f"{'; the designer unpriced: not like with like' if args.unpriced_designer else ''}); "
            f"without generation {training:.2f}x (the training phases "
            f"alone); that GRPO run trained {statistics.mean(r['perf/total_num_tokens'] for r in shaped_rows):.0f} "
            f"tokens a step against SPADE's {statistics.mean(r['perf/total_num_tokens'] for r in later):.0f}"
        )
        print(
            "\nThe rollout engine's work per step (rollout.custom.hf_stats_path) and the rest of the step; the base is "
            "GRPO on SPADE's step shapes:"
        )
        print(generation_table([("plain GRPO (SPADE's step shapes)", shaped_rows), ("SPADE, all steps", later),
                                ("SPADE, design steps", design), ("SPADE, play-only steps", play),
                                ("plain GRPO (same tokens)", grpo_rows)], shaped_rows))  # fmt: skip
        gen_ratio = _idle_per_token(later) / _idle_per_token(shaped_rows)
        print(
            f"SPADE vs GRPO on SPADE's step shapes, per 1k trained tokens, apart from the engine's generation: "
            f"{gen_ratio:.2f}x (the machinery and the training phases; the engine's own work is the busy column)"
        )
        grpo_prompt = statistics.mean(r["prompt_length/mean"] for r in grpo_rows)
        share = statistics.mean(r.get("spade/sandbox_time_share", 0.0) for r in later)
        print(
            f"mean prompt tokens: SPADE {prompt_tokens:.0f}, GRPO {grpo_prompt:.0f}; "
            f"SPADE sandbox share of agent-episode wall time {share:.2f} (target <= 0.3)"
        )
        print(
            f"reference (main at 311d5ce, issue 31): SPADE {REFERENCE['ratio']} of GRPO per 1k tokens, "
            f"sandbox share {REFERENCE['share']}"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
