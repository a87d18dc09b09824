"""``python -m recipe.spade.main_spade [overrides]``: SPADE self-play on verl 0.9.1's V1 trainer.

Differences from ``verl.trainer.main_ppo`` (everything else is verl's own trainer, workers and loss):
the data is the self-play schedule (``recipe/spade/schedule.py``), the agent loops are SPADE's
(``config/agent_loops.yaml``), the reward manager is SPADE's (``reward_manager.py``), the V1 trainer mode is
``spade`` (``trainer.py``, registered inside verl's task runner), and the config carries a ``spade:`` block
(``config/spade_trainer.yaml``).
On CPU, export ``VERL_PLATFORM=cpu`` first (``examples/run_spade_tiny_cpu.sh`` does).
"""

from __future__ import annotations

from pathlib import Path

import hydra
from omegaconf import DictConfig, OmegaConf, open_dict

__all__ = ["check_schedule_order", "main", "prepare"]

_AGENT_LOOPS = Path(__file__).resolve().parent / "config" / "agent_loops.yaml"


def prepare(config: DictConfig) -> None:
    """Write the schedule, point verl at SPADE's agent loops, check the spade block, build tiny models on CPU."""
    spade = OmegaConf.to_container(config.spade, resolve=True)
    if spade["setting"] not in ("games", "tool_use"):
        raise ValueError(f"spade.setting must be games or tool_use, got {spade['setting']!r}")
    from recipe.spade.reward_manager import designer_reward_config

    designer_reward_config(config)  # a bad reward.reward_kwargs.designer fails here, before Ray starts
    from recipe.spade.turn_batches import check_thinking_config

    check_thinking_config(config)
    from recipe.spade.env_pool import check_memory_capacity

    check_memory_capacity(spade)  # live envs and designs about to go live are never evicted: memory must hold them
    from spade_envs.browse.run_record import RecordCaps

    RecordCaps.from_dict(spade.get("record"))  # spade.record: known keys, bounds >= 0
    from spade_envs.design.seed_secret import parse_secret

    parse_secret(spade.get("seed_secret"))  # a pinned spade.seed_secret: hex, 16+ bytes
    from recipe.spade.budget import budget_of, designer_rows

    n = int(config.actor_rollout_ref.rollout.n)
    per_step = spade["agent_rows_per_step"] + designer_rows(spade, n)
    with open_dict(config):
        if config.data.train_batch_size != per_step:
            raise ValueError(
                f"data.train_batch_size ({config.data.train_batch_size}) must equal spade.agent_rows_per_step + "
                f"spade.envs_per_regen / rollout.n ({per_step}): one step reads exactly one step of the schedule"
            )
        steps = config.trainer.total_training_steps
        if steps is None or int(steps) < 1:
            raise ValueError(
                f"trainer.total_training_steps must be set to a positive number (got {steps!r}): SPADE's schedule "
                "holds exactly that many steps, and verl would otherwise replay a short schedule for many epochs"
            )
        check_schedule_order(config.data)
        if config.data.train_files == "schedule":
            from recipe.spade.schedule import write_schedule

            path = write_schedule(spade, int(steps), Path(spade["run_dir"]) / f"schedule-{steps}.parquet", n)
            config.data.train_files = str(path)
        if config.data.val_files == "schedule":  # no held-out data: verl still builds a dataset, never runs it
            if config.trainer.val_before_train or (config.trainer.test_freq or 0) > 0:
                raise ValueError(
                    "data.val_files=schedule means no validation data, but trainer.val_before_train or "
                    "trainer.test_freq asks for validation: point data.val_files at held-out benchmark data "
                    "(spade_envs/evaluation/verl_data.py, docs/evaluation.md) or set trainer.test_freq=-1"
                )
            config.data.val_files = config.data.train_files
        print(budget_of(config).line())
        if not config.actor_rollout_ref.rollout.agent.agent_loop_config_path:
            config.actor_rollout_ref.rollout.agent.agent_loop_config_path = str(_AGENT_LOOPS)
        if config.trainer.device == "cpu":
            from recipe.spade.cpu.materialise import materialise

            materialise(config)


def check_schedule_order(data: DictConfig) -> None:
    """Refuse data settings under which verl would not read the schedule whole and in order (batch t = step t).

    ``data.shuffle`` (verl's default is true; SPADE's config sets false) would mix rows of many steps into one batch,
    and ``data.train_max_samples`` would drop rows (a random subset when shuffling, else the tail); either trains a
    schedule other than the one written, silently, so both are refused here rather than overridden.
    """
    if data.get("shuffle", True):
        raise ValueError(
            "data.shuffle=true would mix rows of different schedule steps into one batch (designer rows on play "
            "steps, the env pool's step clock jumping): SPADE's schedule must be read in order. Drop the override "
            "or set data.shuffle=false (spade/default.yaml does)"
        )
    limit = data.get("train_max_samples", -1)
    if limit is not None and int(limit) > 0:
        raise ValueError(
            f"data.train_max_samples={limit} would cut rows out of SPADE's schedule: set trainer.total_training_steps "
            "to run fewer steps, and data.train_max_samples=-1"
        )


@hydra.main(config_path="config", config_name="spade_trainer", version_base=None)
def main(config: DictConfig) -> None:
    """Hydra entry point (the dapo recipe's shape: check verl, prepare, then verl's own run_ppo)."""
    from recipe.spade import check_verl_version, run_verl_trainer

    check_verl_version()
    from spade_envs.cli.preflight import exit_on_bad_spade_block  # shared with spade-envs doctor

    spade = OmegaConf.to_container(config.spade, resolve=True)  # a bad spade block: one line, before Ray starts
    exit_on_bad_spade_block(spade, OmegaConf.select(config, "reward.reward_kwargs.designer.variant"))
    prepare(config)
    try:
        run_verl_trainer(config, require_v1=True)
        finish(config)
    finally:  # the pool actor is detached (loops in many processes share it): it must not outlive its job
        from recipe.spade.env_pool import end_env_pool

        end_env_pool()


def finish(config: DictConfig) -> None:
    """After training: log the last step, save the memory, and write the run report (plots when matplotlib is there)."""
    import ray

    from recipe.spade.env_pool import ACTOR_NAME
    from recipe.spade.report import write_report

    try:
        pool = ray.get_actor(ACTOR_NAME)
    except ValueError:
        return  # no agent loop ran (e.g. zero steps): nothing to report
    memory_path = ray.get(pool.finish.remote())
    report = write_report(Path(config.spade.run_dir))
    print(f"spade: memory saved to {memory_path}; report written to {report}")


if __name__ == "__main__":
    main()
