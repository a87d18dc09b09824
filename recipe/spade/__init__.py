"""SPADE as a verl 0.9.1 recipe: thin glue from verl's extension points onto ``spade_envs``.

This package pins the verl version it is written against (``REQUIRED_VERL.txt``; ``check_verl_version`` fails
early and clearly on a mismatch) and runs verl's trainer, with SPADE's trainer mode registered where verl looks it up.
"""

from __future__ import annotations

from importlib import metadata, resources
from typing import Any

__all__ = ["REQUIRED_VERL", "check_verl_version", "run_verl_trainer"]

REQUIRED_VERL: str = resources.files(__package__).joinpath("REQUIRED_VERL.txt").read_text().strip()


def check_verl_version() -> str:
    """Return the installed verl version, or raise ``RuntimeError`` naming the required one."""
    wanted = REQUIRED_VERL.split("==", 1)[1]
    try:
        found = metadata.version("verl")
    except metadata.PackageNotFoundError:
        raise RuntimeError(f"verl is not installed; this recipe needs {REQUIRED_VERL}") from None
    if found != wanted:
        raise RuntimeError(f"this recipe is written against {REQUIRED_VERL}, but verl {found} is installed")
    return found


def run_verl_trainer(config: Any, require_v1: bool = False) -> None:
    """Run verl's trainer on a composed config, in the order ``verl.trainer.main_ppo.main`` does.

    Device detection, config validation, then the V1 task runner (or the legacy one when ``trainer.use_v1=false``,
    unless ``require_v1``).
    """
    from verl.trainer.main_ppo import TaskRunnerV1, run_ppo
    from verl.trainer.ppo.utils import need_critic, need_reference_policy
    from verl.utils.config import validate_config
    from verl.utils.device import auto_set_device

    auto_set_device(config)
    validate_config(config=config, use_reference_policy=need_reference_policy(config), use_critic=need_critic(config))
    if config.trainer.use_v1:
        run_ppo(
            config,
            task_runner_class=_spade_task_runner() if config.trainer.v1.trainer_mode == "spade" else TaskRunnerV1,
        )
        return
    if require_v1:
        raise ValueError("this entry point needs verl's V1 trainer: set trainer.use_v1=true")
    from verl.trainer.main_ppo_v0 import TaskRunner

    run_ppo(config, task_runner_class=TaskRunner)


def _spade_task_runner() -> Any:
    """The V1 task runner of verl, importing ``recipe.spade.trainer`` first so that ``trainer_mode=spade`` resolves.

    verl looks the trainer up (``get_trainer_cls``) inside the task-runner Ray actor, a process of its own, so the
    registration has to happen there.
    """
    import ray
    from verl.trainer.main_ppo import TaskRunnerV1

    class SpadeTaskRunner(TaskRunnerV1.__ray_actor_class__):
        def run(self, config: Any) -> None:
            import recipe.spade.trainer  # noqa: F401  (registers trainer_mode "spade")

            super().run(config)

    return ray.remote(SpadeTaskRunner)
