"""``python -m recipe.spade.laptop.main_cpu [overrides]``: verl 0.9.1's own PPO/GRPO trainer on CPU, one command.

Sets the machine facts verl reads from the environment (before verl is imported), materialises the tiny model and
dataset when the config asks for ``tiny`` (``recipe.spade.cpu.materialise``), sizes Ray's declared resources, then runs
verl's trainer exactly as ``python -m verl.trainer.main_ppo`` would.
"""

from __future__ import annotations

import os

# Machine facts, read by verl at import time in this process and inherited by the Ray workers it starts.
_ENV = {
    "VERL_PLATFORM": "cpu",
    "VERL_USE_EXTERNAL_MODULES": "recipe.spade.cpu.plugin",
    "TOKENIZERS_PARALLELISM": "false",
    "OMP_NUM_THREADS": "1",
    "HYDRA_FULL_ERROR": "1",
    "RAY_DEDUP_LOGS": "0",
    "WANDB_MODE": "disabled",
    "RAY_AUTH_MODE": "disabled",
}
for _key, _value in _ENV.items():
    os.environ.setdefault(_key, _value)

import hydra  # noqa: E402
from omegaconf import DictConfig  # noqa: E402

from recipe.spade.cpu.materialise import materialise  # noqa: E402

__all__ = ["main"]


@hydra.main(config_path="../config", config_name="cpu", version_base=None)
def main(config: DictConfig) -> None:
    """Hydra entry point: the CPU preset composed on verl's ppo_trainer, plus any command-line overrides."""
    from recipe.spade import check_verl_version, run_verl_trainer

    check_verl_version()
    materialise(config)
    run_verl_trainer(config)


if __name__ == "__main__":
    main()
