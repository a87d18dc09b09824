"""A tiny prompt dataset in verl's RL parquet format, written in code (no download)."""

from __future__ import annotations

import random
from pathlib import Path

__all__ = ["write_tiny_dataset"]


def write_tiny_dataset(directory: str | Path, split: str, size: int, seed: int = 0) -> Path:
    """Write ``<directory>/<split>.parquet`` with ``size`` arithmetic prompts (idempotent for the same arguments).

    Rows follow verl's RL dataset: ``prompt`` (chat messages), ``data_source``, ``reward_model.ground_truth`` and
    ``extra_info``.
    """
    import pandas as pd

    path = Path(directory) / f"{split}-{size}-{seed}.parquet"
    if path.exists():
        return path
    path.parent.mkdir(parents=True, exist_ok=True)
    rng = random.Random(f"{split}-{seed}")
    rows = []
    for index in range(size):
        a, b = rng.randint(1, 99), rng.randint(1, 99)
        rows.append(
            {
                "prompt": [{"role": "user", "content": f"What is {a} + {b}? Answer with digits."}],
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
