"""``tiny`` model and data paths of a CPU config made real (built once, then reused), and Ray's resources sized.

Used by ``main_spade`` when ``trainer.device=cpu`` and by the plain CPU GRPO entry point
(``recipe.spade.laptop.main_cpu``).
"""

from __future__ import annotations

from omegaconf import DictConfig, open_dict

__all__ = ["materialise"]


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
