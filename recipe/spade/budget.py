"""What one SPADE run spends per step, by what it counts: designs, trained samples, measurement plays.

The paper states its budget in these units (games 30B: 24 designs per regeneration, 192 trained samples per step,
of which 168 agent samples on a regeneration step). ``python -m recipe.spade.budget [hydra overrides]`` prints the
line every launcher's ``DRY_RUN=1`` prints, from the same composed config the run would use.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import Any

__all__ = ["Budget", "budget_of", "designer_rows"]


@dataclass(frozen=True)
class Budget:
    """Per-step counts of a run (upper bounds where a design may be rejected)."""

    designs_per_regen: int
    samples_per_step: int
    agent_samples_regen_step: int
    measurement_plays_per_regen: int
    agent_samples: str = "per_episode"
    measurement_arms: int = 2

    def line(self) -> str:
        text = (
            f"budget: designs_per_regen={self.designs_per_regen} samples_per_step={self.samples_per_step} "
            f"agent_samples_regen_step={self.agent_samples_regen_step} "
            f"measurement_plays_per_regen={self.measurement_plays_per_regen}"
        )
        if self.designs_per_regen:  # no hint / hint (/ placebo) arms of plays_per_arm plays per design
            text = f"{text} measurement_arms={self.measurement_arms}"
        return text if self.agent_samples == "per_episode" else f"{text} agent_samples={self.agent_samples}"


def designer_rows(spade: Any, n: int) -> int:
    """Designer rows of a regeneration step: ``envs_per_regen`` designs, ``n`` per row (each its own task)."""
    designs = 0 if spade["fixed_env"]["enable"] else int(spade["envs_per_regen"])
    if designs % n:
        raise ValueError(
            f"spade.envs_per_regen ({designs}) must be a multiple of actor_rollout_ref.rollout.n ({n}): each "
            "designer row holds n designs, one per session, each with its own task"
        )
    return designs // n


def budget_of(config: Any) -> Budget:
    """The budget of a composed trainer config (``spade`` block, ``data.train_batch_size``, ``rollout.n``)."""
    spade = config["spade"]
    n = int(config["actor_rollout_ref"]["rollout"]["n"])
    rows = int(config["data"]["train_batch_size"])
    designers = designer_rows(spade, n)
    designs = designers * n
    # no hint, hint, and (spade.hint.placebo, on by default) the placebo arm: plays_per_arm plays each per design
    arms = 3 if (spade.get("hint") or {}).get("placebo", False) else 2
    return Budget(
        designs_per_regen=designs,
        samples_per_step=rows * n,
        agent_samples_regen_step=(rows - designers) * n,
        measurement_plays_per_regen=designs * arms * int(spade["plays_per_arm"]),
        agent_samples="per_turn" if (spade.get("agent") or {}).get("thinking") else "per_episode",
        measurement_arms=arms,
    )


def main(argv: list[str] | None = None) -> int:
    """Compose ``spade_trainer`` (or ``--config-name X``) with the overrides and print the budget line."""
    import importlib.util
    from pathlib import Path

    from hydra import compose, initialize_config_dir

    args = list(sys.argv[1:] if argv is None else argv)
    name = "spade_trainer"
    if args[:1] == ["--config-name"]:
        name, args = args[1], args[2:]
    # verl's configs by file path: the same YAML as ``pkg://verl.trainer.config`` without importing verl (and torch),
    # so a launcher's DRY_RUN prints its budget in about a second instead of ten.
    verl = importlib.util.find_spec("verl")
    if verl is not None and verl.submodule_search_locations:
        verl_config = Path(list(verl.submodule_search_locations)[0]) / "trainer" / "config"
        args = [f"hydra.searchpath=[file://{verl_config}]", *args]
    with initialize_config_dir(config_dir=str(Path(__file__).resolve().parent / "config"), version_base=None):
        config = compose(config_name=name, overrides=args)
    print(budget_of(config).line())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
