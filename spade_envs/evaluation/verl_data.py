"""verl ``data.val_files`` rows for the file-based math/science suites, and the matching reward function.

Written rows follow verl's schema (``data_source``, ``prompt`` as chat messages, ``ability``, ``reward_model:
{"style": "rule", "ground_truth": ...}``, ``extra_info``), so ``trainer.test_freq`` reports the same benchmarks
inside a training run. Point ``reward.custom_reward_function.path`` at this file and ``.name`` at
``compute_score``; it imports nothing from verl. GPQA rows carry the shuffled options of sample 0 (fixed seed).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

__all__ = ["DATA_SOURCES", "compute_score", "val_rows", "write_val_parquet"]

#: ``data_source`` value per suite; ``compute_score`` dispatches on the prefix before the slash.
DATA_SOURCES = {"aime25": "spade_eval/aime25", "aime26": "spade_eval/aime26", "gpqa_diamond": "spade_eval/gpqa_diamond"}


def val_rows(suite_name: str, data_dir: Path, limit: int | None = None) -> list[dict[str, Any]]:
    """The verl rows for ``aime25``, ``aime26`` or ``gpqa_diamond`` read from ``data_dir`` (the suites' own loaders)."""
    from spade_envs.evaluation.registry import make_suite
    from spade_envs.evaluation.suites.math import GpqaDiamondSuite, gpqa_prompt

    if suite_name not in DATA_SOURCES:
        raise ValueError(f"no verl validation rows for {suite_name!r}; supported: {sorted(DATA_SOURCES)}")
    suite = make_suite(suite_name)
    rows = []
    for index, item in enumerate(suite.load(data_dir)[:limit]):
        if isinstance(suite, GpqaDiamondSuite):
            options, gold = suite.shuffled(item, 0)
            prompt, truth, ability = gpqa_prompt(item.prompt, options), gold, "science"
        else:
            prompt, truth, ability = item.prompt, str(item.answer), "math"
        rows.append({
            "data_source": DATA_SOURCES[suite_name],
            "agent_name": "single_turn_agent",  # verl's plain loop, whatever a recipe's default loop is
            "prompt": [{"role": "user", "content": prompt}],
            "ability": ability,
            "reward_model": {"style": "rule", "ground_truth": truth},
            "extra_info": {"split": "test", "index": index, "id": item.id},
        })  # fmt: skip
    return rows


def write_val_parquet(suite_name: str, data_dir: Path, out_path: Path, limit: int | None = None) -> int:
    """Write :func:`val_rows` to ``out_path`` (Parquet, for ``data.val_files``); return the row count."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    rows = val_rows(suite_name, data_dir, limit)
    out_path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.Table.from_pylist(rows), out_path)
    return len(rows)


def compute_score(data_source: str, solution_str: str, ground_truth: str, extra_info: dict | None = None) -> float:
    """1.0 if ``solution_str`` answers ``ground_truth`` (math-verify for AIME, the ``Answer: X`` letter for GPQA)."""
    from spade_envs.evaluation.answers import choice_letter, math_equal

    if data_source == DATA_SOURCES["gpqa_diamond"]:
        return float(choice_letter(solution_str, "ABCD") == ground_truth)
    if data_source in (DATA_SOURCES["aime25"], DATA_SOURCES["aime26"]):
        return float(math_equal(solution_str, ground_truth)[0])
    raise ValueError(f"compute_score does not know data_source {data_source!r}; known: {sorted(DATA_SOURCES.values())}")
