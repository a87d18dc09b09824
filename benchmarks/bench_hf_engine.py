"""The CPU rollout's batches of mixed prompt lengths: left padding with a mask vs right padding vs length groups.

Run: ``.venv/bin/python benchmarks/bench_hf_engine.py [--model tiny|smollm2] [--repeats 3] [--threads 1]``. Prints
a table. Seconds to a minute on the tiny model.

Each scenario is a batch the hf rollout receives in SPADE's steps (issue 39, seventh stop): designer prompts of ~3.4k
tokens answered with 64 tokens, a hint prompt of ~4k tokens, agent turns of ~700 tokens answered with 16. Times, best
of ``--repeats``, for the whole batch:

* ``left-padded``: the engine as it was before (prompts padded on the left, the prompt pass under a padding mask);
  kept here as :class:`LeftPadded`, the baseline.
* ``right-padded``: :meth:`BatchedGenerator.run_batch` on the whole batch (no padding mask in the prompt pass).
* ``length groups``: what the engine's queue runs (:func:`length_groups`, ``pad_slack`` 256), one batch per group.
* ``each alone``: every request in a batch of its own, for reference.

The ratio columns are left-padded over the other two, from the same run.
"""

from __future__ import annotations

import argparse
import functools
import sys
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from recipe.spade.cpu.hf_engine import BatchedGenerator, Generation, SamplingRequest, length_groups  # noqa: E402
from spade_envs.cli.table import format_table  # noqa: E402

#: name: [(prompt tokens, new tokens), ...]
SCENARIOS = {
    "3 designer prompts + 1 agent turn": [(3400, 64), (3371, 64), (3388, 64), (703, 16)],
    "hint prompt + 3 agent turns": [(4024, 16), (703, 16), (731, 16), (731, 16)],
    "3 designer prompts + 4 agent turns": [
        (3524, 64),
        (3567, 64),
        (3524, 64),
        (701, 16),
        (729, 16),
        (729, 16),
        (701, 16),
    ],  # fmt: skip
    "8 agent turns": [(700 + 13 * i, 16) for i in range(8)],
}


class LeftPadded(BatchedGenerator):
    """The engine's decoding before issue 39's seventh stop: left padding, the prompt pass under a padding mask."""

    def _decode(self, requests: list[SamplingRequest]) -> list[Generation]:
        n = len(requests)
        width = max(len(r.prompt_ids) for r in requests)
        ids = torch.full((n, width), self.pad_id, dtype=torch.long)
        mask = torch.zeros((n, width), dtype=torch.long)
        for i, r in enumerate(requests):
            ids[i, width - len(r.prompt_ids) :] = torch.tensor(r.prompt_ids, dtype=torch.long)
            mask[i, width - len(r.prompt_ids) :] = 1
        positions = (mask.cumsum(-1) - 1).clamp(min=0)
        out = self.model(input_ids=ids, attention_mask=mask, position_ids=positions, use_cache=True, logits_to_keep=1)
        past, logits = out.past_key_values, out.logits[:, -1, :].float()
        tokens: list[list[int]] = [[] for _ in requests]
        last = positions[:, -1]
        for _ in range(max(r.max_tokens for r in requests)):
            chosen = torch.full((n,), self.pad_id, dtype=torch.long)
            for i, r in enumerate(requests):
                if len(tokens[i]) < r.max_tokens:
                    chosen[i] = self._sample(logits[i], r, [])[0]
                    tokens[i].append(int(chosen[i]))
            if all(len(t) >= r.max_tokens for t, r in zip(tokens, requests)):
                break
            mask = torch.cat([mask, torch.ones((n, 1), dtype=torch.long)], dim=1)
            last = last + 1
            out = self.model(input_ids=chosen[:, None], attention_mask=mask, position_ids=last[:, None],
                             past_key_values=past, use_cache=True, logits_to_keep=1)  # fmt: skip
            past, logits = out.past_key_values, out.logits[:, -1, :].float()
        return [Generation(t, None, "length") for t in tokens]


def _model(kind: str) -> tuple[torch.nn.Module, int]:
    from transformers import AutoModelForCausalLM

    if kind == "tiny":
        import tempfile

        from recipe.spade.cpu.tiny_model import build_tiny_qwen3

        path = build_tiny_qwen3(Path(tempfile.mkdtemp()) / "model")
    else:
        from recipe.spade.cpu.tiny_model import smollm2_from_gguf

        path = smollm2_from_gguf(Path.home() / ".cache" / "spade" / "smollm2-135m")
    model = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32, attn_implementation="sdpa")
    return model, model.config.vocab_size


def _each(engine: BatchedGenerator, batches: list[list[SamplingRequest]]) -> None:
    for batch in batches:
        engine.run_batch(batch)


def _best(fn, repeats: int) -> float:
    fn()  # warm-up
    best = float("inf")
    for _ in range(repeats):
        started = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - started)
    return best


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--model", choices=("tiny", "smollm2"), default="tiny")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--threads", type=int, default=1, help="torch threads (the rollout's HF_ROLLOUT_THREADS)")
    parser.add_argument("--scenarios", nargs="*", default=list(SCENARIOS), choices=list(SCENARIOS))
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    model, vocab = _model(args.model)
    now, before = BatchedGenerator(model, eos_ids=[], pad_id=0), LeftPadded(model, eos_ids=[], pad_id=0)
    rows = []
    for name in args.scenarios:
        shape = SCENARIOS[name]
        requests = [SamplingRequest([1 + (7 * r + i) % (vocab - 1) for i in range(n)], k, temperature=0.0,
                                    ignore_eos=True) for r, (n, k) in enumerate(shape)]  # fmt: skip
        groups = [[requests[i] for i in g] for g in length_groups([len(r.prompt_ids) for r in requests], now.pad_slack)]
        left = _best(functools.partial(before.run_batch, requests), args.repeats)
        right = _best(functools.partial(now.run_batch, requests), args.repeats)
        grouped = _best(functools.partial(_each, now, groups), args.repeats)
        alone = _best(functools.partial(_each, now, [[r] for r in requests]), args.repeats)
        rows.append([name, str(len(groups)), f"{left:.3f}", f"{right:.3f}", f"{grouped:.3f}", f"{alone:.3f}",
                     f"{left / right:.2f}x", f"{left / grouped:.2f}x"])  # fmt: skip
    headers = ["batch", "groups", "left-padded s", "right-padded s", "length groups s", "each alone s",
               "left / right", "left / groups"]  # fmt: skip
    print(f"model {args.model}, {args.threads} torch thread(s), best of {args.repeats}")
    print(format_table(headers, rows))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
