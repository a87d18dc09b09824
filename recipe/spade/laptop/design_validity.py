"""``python -m recipe.spade.laptop.design_validity MODEL_DIR``: how often a model's own designs pass validation.

The designer boundary, measured: can this model be the Environment Designer at all? Each prompt is the one the recipe
sends: the composed ``spade_trainer`` config's ``spade`` block builds the run's env pool (``SpadeEnvPool``: corpus
document, skill rotation, memory exemplars, the worked example when ``spade.designer.show_example``), its
``designer_task`` gives the messages, and ``recipe.spade.prompt_fit`` fits them to the model's context less the new
tokens, shortening the document as the designer loop does. Answers are sampled at the rollout temperature (the
designer's, as in training), one prompt at a time or in left-padded batches (``--batch``); each answer then goes
through the recipe's admission path (``spade_envs.design.designer.admit``: code extraction, then ``validate_source`` in
the
sandbox). One line per design and a
table of failure codes. Nothing here trains; it measures.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import tempfile
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

__all__ = ["DesignResult", "designer_prompts", "main", "summarise"]

_ROOT = Path(__file__).resolve().parents[3]
CORPUS = _ROOT / "examples" / "data" / "sample_corpus.jsonl"


@dataclass(frozen=True)
class DesignResult:
    """One design: its task, prompt size, answer size, admission verdict (``code`` ``None``: valid), answer head."""

    design: int
    skill: str
    doc_id: str | None
    prompt_tokens: int
    prompt_fit: str
    new_tokens: int
    code: str | None
    reason: str
    answer: str = ""


def spade_block(run_dir: Path, corpus: Path, overrides: Sequence[str] = ()) -> dict[str, Any]:
    """The recipe's composed ``spade`` block (``spade_trainer.yaml``) with this corpus and a scratch run dir."""
    from hydra import compose, initialize_config_dir
    from omegaconf import OmegaConf

    with initialize_config_dir(config_dir=str(_ROOT / "recipe" / "spade" / "config"), version_base=None):
        cfg = compose(config_name="spade_trainer", overrides=[f"spade.corpus={corpus}", *overrides])
    spade = OmegaConf.to_container(cfg.spade, resolve=True)
    spade["run_dir"] = str(run_dir)
    spade["temperature"] = float(cfg.actor_rollout_ref.rollout.temperature)
    return spade


def designer_prompts(spade: dict[str, Any], n: int, first: int = 0, step: int = 0) -> list[dict[str, Any]]:
    """The recipe's designer tasks ``first..first+n-1`` of regeneration ``step`` (``SpadeEnvPool.designer_task``).

    Each task depends only on the run seed, the step and the design number, so a measurement split into several
    runs (``--first``) asks the same prompts as one run.
    """
    from recipe.spade.env_pool import SpadeEnvPool

    pool = SpadeEnvPool(spade)
    return [pool.designer_task(step, design) for design in range(first, first + n)]


def fit(tokenizer: Any, task: dict[str, Any], limit: int) -> Any:
    """The task's prompt ids within ``limit`` tokens, shortened as the designer loop shortens it (prompt_fit)."""
    from recipe.spade.prompt_fit import fit_prompt

    async def render(messages: list[dict[str, Any]]) -> list[int]:
        return list(tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=True,
                                                  return_dict=False))  # fmt: skip

    return asyncio.run(fit_prompt(render, tokenizer, task["messages"], task.get("document"), limit,
                                  task.get("cuts", ())))  # fmt: skip


def generate(model: Any, tokenizer: Any, prompts: list[list[int]], *, max_new_tokens: int,
             temperature: float) -> list[tuple[str, int]]:  # fmt: skip
    """Sample one answer per prompt in one left-padded batch: ``(text, new tokens up to the EOS)``."""
    import torch

    width = max(len(p) for p in prompts)
    pad = tokenizer.pad_token_id
    ids = torch.tensor([[pad] * (width - len(p)) + p for p in prompts])
    mask = torch.tensor([[0] * (width - len(p)) + [1] * len(p) for p in prompts])
    with torch.no_grad():
        out = model.generate(input_ids=ids, attention_mask=mask, do_sample=temperature > 0,
                             temperature=temperature or None, top_p=1.0, top_k=0, max_new_tokens=max_new_tokens,
                             pad_token_id=pad)  # fmt: skip
    answers = []
    for row in out[:, width:].tolist():
        n = next((i + 1 for i, t in enumerate(row) if t == tokenizer.eos_token_id), len(row))
        answers.append((tokenizer.decode(row[:n], skip_special_tokens=True), n))
    return answers


def summarise(results: Sequence[DesignResult]) -> str:
    """The table: valid rate, each failure code's count, prompt and answer token ranges."""
    codes = Counter(r.code or "valid" for r in results)
    n = len(results)
    lines = ["| outcome | designs | share |", "|---|---|---|"]
    lines += [f"| `{code}` | {count} | {count / n:.2f} |" for code, count in codes.most_common()]
    prompt = [r.prompt_tokens for r in results]
    new = [r.new_tokens for r in results]
    valid = codes.get("valid", 0)
    lines.append(f"valid {valid}/{n} = {valid / n:.2f}; prompt tokens {min(prompt)}-{max(prompt)} (mean "
                 f"{sum(prompt) / n:.0f}); answer tokens {min(new)}-{max(new)} (mean {sum(new) / n:.0f})")  # fmt: skip
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    """Build the prompts, sample the answers in batches, admit each one, print a line per design and the table."""
    prog = "python -m recipe.spade.laptop.design_validity"
    parser = argparse.ArgumentParser(prog=prog, description=__doc__.split("\n")[0])
    parser.add_argument("model_dir", help="an HF model directory (e.g. SmolLM2 from smollm2_from_gguf)")
    parser.add_argument("--prompts", type=int, default=24, help="designs to ask for (default 24)")
    parser.add_argument("--first", type=int, default=0, help="the first design number (split a measurement)")
    # default 1: on 2 shared cores a left-padded batch of 4 of these ~3,950-token prompts ran 19.7 CPU-minutes
    # without finishing, where one prompt alone takes ~2.5 (docs/cpu.md)
    parser.add_argument("--batch", type=int, default=1, help="prompts per generate call (default 1)")
    parser.add_argument("--max-new-tokens", type=int, default=768, help="answer cap in tokens (default 768)")
    parser.add_argument("--context", type=int, default=8192, help="the model's context; prompts fit it less the cap")
    parser.add_argument("--corpus", default=str(CORPUS), help="corpus (default: the launchers' sample corpus)")
    parser.add_argument("--threads", type=int, default=1, help="torch threads (default 1: leave the other cores)")
    parser.add_argument("--seed", type=int, default=0, help="sampling seed (a batch: seed x 1000003 + design)")
    parser.add_argument("--json", help="also write each design's result here")
    parser.add_argument("overrides", nargs="*", help="Hydra overrides of the spade block, e.g. spade.corpus_words=600")
    args = parser.parse_args(argv)
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from spade_envs.design.designer import admit
    from spade_envs.design.validate import ValidationConfig
    from spade_envs.sandbox import SandboxConfig, WorkerPool

    torch.set_num_threads(args.threads)
    tokenizer = AutoTokenizer.from_pretrained(args.model_dir)
    if tokenizer.pad_token_id is None:
        tokenizer.pad_token = tokenizer.eos_token
    model = AutoModelForCausalLM.from_pretrained(args.model_dir, dtype=torch.float32).eval()
    with tempfile.TemporaryDirectory(prefix="design-validity-") as scratch:
        spade = spade_block(Path(scratch), Path(args.corpus), args.overrides)
        tasks = designer_prompts(spade, args.prompts, args.first)
    limit = args.context - args.max_new_tokens
    fitted = [fit(tokenizer, task, limit) for task in tasks]
    sandbox = WorkerPool(SandboxConfig.from_dict(spade["sandbox"]))
    validation = ValidationConfig.from_dict(spade["validation"])
    print(f"design_validity: {args.model_dir}, {args.prompts} designer prompts (setting {spade['setting']}, corpus "
          f"{args.corpus}, example shown: {spade['designer']['show_example']}), temperature {spade['temperature']}, "
          f"up to {args.max_new_tokens} new tokens, batches of {args.batch}, {args.threads} thread(s)",
          flush=True)  # fmt: skip
    results: list[DesignResult] = []
    start = time.monotonic()
    try:
        for first in range(0, len(tasks), args.batch):
            chunk = range(first, min(first + args.batch, len(tasks)))
            began = time.monotonic()
            torch.manual_seed(args.seed * 1_000_003 + args.first + first)  # by design number: a split run samples alike
            answers = generate(model, tokenizer, [fitted[i].ids for i in chunk], max_new_tokens=args.max_new_tokens,
                               temperature=spade["temperature"])  # fmt: skip
            seconds = time.monotonic() - began
            for i, (text, new) in zip(chunk, answers):
                design = args.first + i
                if fitted[i].status == "refused":
                    code, reason = "prompt_too_long", "the prompt does not fit without its document"
                else:
                    _, report = admit(text, sandbox, spade["setting"], validation, key=f"step 0 design {design}")
                    code, reason = report.code, report.reason
                r = DesignResult(design, tasks[i]["skill"], tasks[i]["doc_id"], len(fitted[i].ids), fitted[i].status,
                                 new, code, (reason or "")[:160], text[:600])  # fmt: skip
                results.append(r)
                print(f"  design {design:2d} {r.skill:24s} prompt {r.prompt_tokens:5d} ({r.prompt_fit}) answer "
                      f"{new:4d}  {code or 'VALID'}: {r.reason[:80]}", flush=True)  # fmt: skip
            print(f"  batch of {len(chunk)}: {seconds:.0f} s generation", flush=True)
            if args.json:  # after every batch: an interrupted measurement keeps what it measured
                Path(args.json).write_text(json.dumps([asdict(r) for r in results], indent=2) + "\n", encoding="utf-8")
    finally:
        sandbox.shutdown()
    print(summarise(results))
    print(f"total {time.monotonic() - start:.0f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
