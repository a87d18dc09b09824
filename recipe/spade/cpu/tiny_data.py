"""A tiny prompt dataset in verl's RL parquet format, written in code (no download)."""

from __future__ import annotations

import random
from pathlib import Path

__all__ = ["write_tiny_dataset"]

_FILLER = ("river", "lantern", "tile", "barge", "coin", "card", "village", "tide", "north", "seven", "green", "stone")


def write_tiny_dataset(directory: str | Path, split: str, size: int, seed: int = 0, context_words: int = 0) -> Path:
    """Write ``<directory>/<split>.parquet`` with ``size`` arithmetic prompts (idempotent for the same arguments).

    Rows follow verl's RL dataset: ``prompt`` (chat messages), ``data_source``, ``reward_model.ground_truth`` and
    ``extra_info``. ``context_words`` prepends that many filler words to each prompt, so that a benchmark can give
    plain GRPO the same prompt-token budget as a SPADE step.
    """
    import pandas as pd

    suffix = f"-ctx{context_words}" if context_words else ""
    path = Path(directory) / f"{split}-{size}-{seed}{suffix}.parquet"
    if path.exists():
        return path
    path.parent.mkdir(parents=True, exist_ok=True)
    rng = random.Random(f"{split}-{seed}")
    rows = []
    for index in range(size):
        a, b = rng.randint(1, 99), rng.randint(1, 99)
        context = " ".join(rng.choice(_FILLER) for _ in range(context_words))
        question = f"What is {a} + {b}? Answer with digits."
        rows.append(
            {
                "prompt": [{"role": "user", "content": f"{context}\n\n{question}" if context else question}],
                "data_source": "spade_cpu_smoke",
                "ability": "arithmetic",
                "reward_model": {"style": "rule", "ground_truth": str(a + b)},
                "extra_info": {"split": split, "index": index},
            }
        )
    tmp = path.with_suffix(".tmp")
    pd.DataFrame(rows).to_parquet(tmp, index=False)
    tmp.replace(path)
    return path
