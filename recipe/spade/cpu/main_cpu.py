"""``python -m recipe.spade.cpu.main_cpu [overrides]``: verl 0.9.1's own PPO/GRPO trainer, on CPU, in one command.

Sets the machine facts verl reads from the environment (before verl is imported), materialises the tiny model and
dataset when the config asks for ``tiny``, sizes Ray's declared resources, then runs verl's trainer exactly as
``python -m verl.trainer.main_ppo`` would.
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
from omegaconf import DictConfig, open_dict  # noqa: E402

__all__ = ["main", "materialise"]


def materialise(config: DictConfig) -> None:
    """Replace ``tiny`` model and data paths by real ones (built once, then reused) and size Ray's resources."""
    from recipe.spade.cpu.tiny_data import write_tiny_dataset
    from recipe.spade.cpu.tiny_model import build_tiny_qwen3

    with open_dict(config):
        model = config.actor_rollout_ref.model
        if model.path == "tiny":
            thinking = bool(config.spade_cpu.get("tiny_thinking_template", False))
            model.path = str(build_tiny_qwen3(config.spade_cpu.tiny_model_dir, thinking_template=thinking))
        for key in ("train_files", "val_files"):
            if config.data[key] == "tiny":
                split = "train" if key == "train_files" else "val"
                config.data[key] = str(
                    write_tiny_dataset(
                        config.spade_cpu.tiny_data_dir,
                        split,
                        config.spade_cpu.tiny_data_size,
                        context_words=config.spade_cpu.get("tiny_context_words", 0),
                    )
                )
        config.ray_kwargs.ray_init.num_gpus = config.trainer.n_gpus_per_node * config.trainer.nnodes


@hydra.main(config_path="../config", config_name="cpu", version_base=None)
def main(config: DictConfig) -> None:
    """Hydra entry point: the CPU preset composed on verl's ppo_trainer, plus any command-line overrides."""
    from recipe.spade import check_verl_version, run_verl_trainer

    check_verl_version()
    materialise(config)
    run_verl_trainer(config)


if __name__ == "__main__":
    main()
