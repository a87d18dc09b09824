"""The self-play schedule as verl training data: one parquet row per designer or agent task, in step order.

verl's V1 trainer reads ``data.train_batch_size`` rows per step from ``data.train_files``. The rows carry no
environment: they name a role, a step and a slot, and the agent loops ask the env pool what to do, so the
schedule is static while the environments evolve. Regeneration steps hold ``envs_per_regen`` designer rows.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

__all__ = ["schedule_rows", "write_schedule"]


def schedule_rows(spade: dict[str, Any], steps: int) -> list[dict[str, Any]]:
    """Rows for ``steps`` steps; every step has ``agent_rows_per_step + envs_per_regen`` rows (the batch size)."""
    per_step = spade["agent_rows_per_step"] + spade["envs_per_regen"]
    designing = not spade["fixed_env"]["enable"]
    rows = []
    for step in range(steps):
        regen = designing and step % spade["regen_every"] == 0
        for slot in range(per_step):
            role = "designer" if regen and slot < spade["envs_per_regen"] else "agent"
            rows.append(
                {
                    "prompt": [{"role": "user", "content": f"spade {role} task {step}:{slot}"}],
                    "agent_name": f"spade_{role}",
                    "data_source": f"spade_{role}",
                    "ability": spade["setting"],
                    "reward_model": {"style": "rule", "ground_truth": ""},
                    "extra_info": {"role": role, "step": step, "slot": slot, "index": len(rows)},
                }
            )
    return rows


def write_schedule(spade: dict[str, Any], steps: int, path: str | Path) -> Path:
    """Write :func:`schedule_rows` to ``path`` (parquet)."""
    import pandas as pd

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    pd.DataFrame(schedule_rows(spade, steps)).to_parquet(path, index=False)
    return path
