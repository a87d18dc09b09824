"""The self-play schedule as verl training data: one parquet row per designer or agent task, in step order.

verl's V1 trainer reads ``data.train_batch_size`` rows per step from ``data.train_files``. The rows carry no
environment: they name a role, a step and a slot, and the agent loops ask the env pool what to do, so the
schedule is static while the environments evolve. Regeneration steps hold ``envs_per_regen / rollout.n`` designer rows.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from recipe.spade.budget import designer_rows

__all__ = ["designer_positions", "schedule_rows", "write_schedule"]


def designer_positions(per_step: int, designers: int) -> set[int]:
    """Where a regeneration step's designer rows sit among its ``per_step`` rows: spread evenly, not first.

    verl hands each agent-loop worker a contiguous chunk of the step's rows; a designer row runs validation, vetting
    and ``2 x plays_per_arm`` measurement episodes, so bunching them would put all that sandbox load on a few workers.
    """
    return {(i * per_step) // designers for i in range(designers)} if designers else set()


def schedule_rows(spade: dict[str, Any], steps: int, n: int) -> list[dict[str, Any]]:
    """Rows for ``steps`` steps; every step has ``agent_rows_per_step + envs_per_regen / n`` rows (the batch size).

    A regeneration step holds ``envs_per_regen / n`` designer rows (each of a row's ``n`` sessions makes its own
    design); its other rows, and every row of the other steps, are agent rows. ``slot`` numbers a row within its role
    at its step (designer slots from 0, agent slots from 0).
    """
    designers = designer_rows(spade, n)
    per_step = spade["agent_rows_per_step"] + designers
    rows = []
    for step in range(steps):
        regen = designers > 0 and step % spade["regen_every"] == 0
        designer_at = designer_positions(per_step, designers) if regen else set()
        count = {"designer": 0, "agent": 0}
        for position in range(per_step):
            role = "designer" if position in designer_at else "agent"
            slot = count[role]
            count[role] += 1
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


def write_schedule(spade: dict[str, Any], steps: int, path: str | Path, n: int) -> Path:
    """Write :func:`schedule_rows` to ``path`` (parquet)."""
    import pandas as pd

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    pd.DataFrame(schedule_rows(spade, steps, n)).to_parquet(path, index=False)
    return path
