"""SPADE's trainer: verl 0.9.1's synchronous V1 trainer with three SPADE hooks (``trainer.v1.trainer_mode=spade``).

One self-play step is verl's own ``_step_once``; reading it top to bottom with SPADE's parts in place:

1. **Rollout** (verl's agent loop manager, one batch = one step of the schedule): on regeneration steps the
   ``spade_designer`` rows design, validate, hint and measure envs (paired no-hint / hint plays on the same seeds,
   measurement only); every step the ``spade_agent`` rows play live envs without the hint. Hinted plays never
   reach the batch.
2. **Reward** (verl's reward loop, streaming): ``recipe/spade/reward_manager.py`` scores agent rows by outcome and
   designer rows by the hint-based regret blend, or a failure penalty.
3. **Old log-probs, reference** (verl).
4. **Advantages** (here, :meth:`SpadeTrainer._compute_advantage`): verl's estimator for agent rows (GRPO per env
   instance and seed), then designer rows re-scored per skill and scaled (``recipe/spade/advantages.py``). In
   thinking mode (``spade.agent.thinking``) an episode is one row per turn: verl's GRPO already scores each episode
   by its last turn and gives all its turns that advantage; here each row also gets its loss weight.
5. **One actor update** on the mixed batch (verl; in thinking mode with a fixed number of mini-batches,
   ``recipe/spade/turn_batches.py``).
6. **Metrics** (here): the env pool's step metrics (validity, failure codes, regret, win rate, skill mix,
   diversity, hint leaks, env faults) and per-role reward / advantage / sandbox-time metrics go to verl's logger.
7. **Checkpoint** (here): the env memory and pool state are saved inside verl's ``global_step_N`` folder before
   verl marks it complete, and restored from there on resume, so memory and weights always match.

The designer reward is measured at design time, on the policy that designed the env, so no designer sample waits
for a later step and none needs importance-sampling correction (see ``recipe/spade/README.md``).
"""

from __future__ import annotations

import json
import logging
import os
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np
import ray
import torch
import transfer_queue as tq
from omegaconf import OmegaConf, open_dict
from tensordict import TensorDict
from transfer_queue import KVBatchMeta
from verl.trainer.ppo.v1.replay_buffer import ReplayBuffer
from verl.trainer.ppo.v1.trainer_base import register_trainer
from verl.trainer.ppo.v1.trainer_sync import PPOTrainerSync
from verl.utils.checkpoint.checkpoint_manager import find_latest_ckpt_path
from verl.workers.utils.padding import response_to_nested

from recipe.spade.advantages import role_advantages, step_designer_scale
from recipe.spade.env_pool import ACTOR_NAME, BATCHES_FILE, POOL_STATE_FILES, start_env_pool
from recipe.spade.recording import scores_entry
from recipe.spade.reward_manager import designer_reward_config
from recipe.spade.turn_batches import batch_multiple, is_episode_row, loss_weights, mini_batches
from spade_envs.design.rewards import plateau, win_rate

__all__ = ["SpadeTrainer"]

logger = logging.getLogger(__name__)
#: What ``_compute_advantage`` measures that also goes into ``spade_metrics.jsonl`` (and so the run report).
_FROM_ADVANTAGE = ("spade/designer/advantage", "spade/excluded_", "spade/agent/singleton_groups")


@register_trainer("spade")
class SpadeTrainer(PPOTrainerSync):
    """verl's sync V1 trainer plus per-role advantages, SPADE metrics and SPADE checkpoint state."""

    def _build_replay_buffer(self) -> ReplayBuffer:
        """The sync ``ReplayBuffer`` of verl, on every backend.

        verl keys its sync behaviour on the literal mode name (``trainer_mode != "sync"`` in ``trainer_base.py``
        picks ``ReplayBufferAsync``, gen_batch_size 1 and refills from the *next* batch). SPADE is registered as
        ``spade`` so that verl's task runner finds this class, but it is a sync trainer: one schedule step per batch,
        never mixed. So the mode seen by verl's checks is ``sync`` (with ``trainer.v1.sync``'s settings). The only
        knob that may differ between backends is the poll interval (``trainer.v1.sampler.sampler_kwargs``).
        """
        self.trainer_mode = "sync"
        self.parameter_sync_step = self.config.trainer.v1.get("sync", {}).get("parameter_sync_step", 1)
        sampler = self.config.trainer.v1.sampler
        custom = sampler.get("custom_sampler") or {}
        if custom.get("path") or custom.get("name"):
            raise ValueError(
                "trainer.v1.sampler.custom_sampler is set, but SPADE's trainer needs verl's sync ReplayBuffer (each "
                "batch must be exactly one step of the schedule); remove the custom sampler, and set "
                "trainer.v1.sampler.sampler_kwargs.poll_interval to change how often it polls"
            )
        if sampler.get("sync_refill_failed_groups", False):
            raise ValueError(
                "trainer.v1.sampler.sync_refill_failed_groups=true would refill a failed group from the next step "
                "of the schedule; SPADE keeps failed sessions as masked samples instead: leave it false"
            )
        if (self.config.algorithm.get("filter_groups") or {}).get("enable", False):
            raise ValueError(
                "algorithm.filter_groups.enable=true (verl's DAPO group filtering) refills filtered groups from the "
                "next steps of the schedule, as sync_refill_failed_groups would; SPADE's batch must be exactly one "
                "schedule step: leave it false (a group without a learning signal gets advantage 0 anyway)"
            )
        buffer = super()._build_replay_buffer()
        if type(buffer) is not ReplayBuffer:
            raise TypeError(f"SPADE needs verl's sync ReplayBuffer, verl built {type(buffer).__name__}")
        poll = (sampler.get("sampler_kwargs") or {}).get("poll_interval")
        if poll is not None:
            if not float(poll) > 0:
                raise ValueError(f"trainer.v1.sampler.sampler_kwargs.poll_interval must be > 0, got {poll!r}")
            buffer.poll_interval = float(poll)
        return buffer

    def _compute_advantage(self, batch: KVBatchMeta, metrics: dict) -> KVBatchMeta:
        """The estimator of verl over the healthy samples, then SPADE's designer advantages.

        A faulted agent sample (the env broke, not the agent) is masked out of the loss by its loop; here it is also
        left out of its group's baseline: verl's estimator runs on the other rows only, and the faulted rows get
        advantage 0. A group with no healthy sample therefore contributes nothing, and neither does a group left
        with one (``spade/agent/singleton_groups``): verl's GRPO would give a lone sample its raw score (mean 0,
        std 1 for a group of one), a baseline-free gradient at twice the group-relative scale; with no other sample
        there is nothing to compare it with, as on the designer side. Faulted designer samples (an infrastructure
        failure such as an exhausted sandbox, not the design's fault) are likewise excluded from their skill's
        centring.
        """
        extra = tq.kv_batch_get(keys=batch.keys, partition_id=batch.partition_id,
                                select_fields=["extra_fields"]).pop("extra_fields").tolist()  # fmt: skip
        real = [not tag.get("is_padding", False) for tag in batch.tags]
        excluded = [ok and bool(e.get("spade_excluded")) for e, ok in zip(extra, real)]
        metrics["spade/excluded_samples"] = sum(excluded)  # rows: in thinking mode, one per turn
        metrics["spade/excluded_episodes"] = sum(out and is_episode_row(e) for e, out in zip(extra, excluded))
        lone = _lone_agent_groups(batch.keys, extra, real, excluded)
        metrics["spade/agent/singleton_groups"] = len(lone)
        excluded = [out or (ok and key.rsplit("_", 2)[0] in lone) for key, ok, out in zip(batch.keys, real, excluded)]
        kept = [key for key, out in zip(batch.keys, excluded) if not out]
        written = {"advantages", "returns"}
        if kept:
            done = super()._compute_advantage(batch.select_keys(kept) if len(kept) < len(batch) else batch, metrics)
            written |= set(done.fields or ()) & {"token_level_rewards", "rollout_is_weights"}
        dropped = [key for key, out in zip(batch.keys, excluded) if out]
        if dropped:
            _fill_excluded(dropped, batch.partition_id, written)
        fields = ["advantages", "response_mask", "rm_scores"]
        data = tq.kv_batch_get(keys=batch.keys, partition_id=batch.partition_id, select_fields=fields)
        padded = data.to_padded_tensor()
        roles = [e.get("spade_role", "") if ok and not out else "other" for e, ok, out in zip(extra, real, excluded)]
        rows = [i for i, role in enumerate(roles) if role == "designer"]
        advantages = padded["advantages"]
        if rows:
            scores = padded["rm_scores"].sum(dim=-1).tolist()
            scale = step_designer_scale(self.config, len(rows))
            skills = [e.get("spade_skill", "") for e in extra]
            advantages = role_advantages(advantages, padded["response_mask"], scores, roles, skills, scale)
            metrics["spade/designer/advantage_scale"] = scale
            metrics["spade/designer/advantage_abs_mean"] = float(advantages[rows].abs().amax(dim=-1).mean())
        fields = {"advantages": response_to_nested(advantages, data["response_mask"])}
        weights = None
        if self._thinking():
            weights = self._turn_weights(batch, extra, real, "rollout_is_weights" in written, padded["response_mask"])
            if weights is not None:
                fields["rollout_is_weights"] = response_to_nested(weights, data["response_mask"])
        if (self.config.spade.get("record") or {}).get("enable", True):  # the run record's rewards and advantages
            scores = padded["rm_scores"].sum(dim=-1).tolist()
            entry = scores_entry(batch.keys, extra, real, scores, advantages, padded["response_mask"])
            if entry is not None:
                ray.get(_pool().record.remote([entry]))
        if self.config.spade.get("dump_batches"):
            _dump_batch(Path(self.config.spade.run_dir), self.global_steps, batch, extra, real, excluded, padded,
                        advantages, weights)  # fmt: skip
        return tq.kv_batch_put(keys=batch.keys, partition_id=batch.partition_id,
                               fields=TensorDict(fields, batch_size=len(batch)))  # fmt: skip

    def _thinking(self) -> bool:
        return bool(self.config.spade.agent.get("thinking"))

    def _turn_weights(self, batch: KVBatchMeta, extra: list, real: list, have: bool, mask: torch.Tensor) -> Any:
        """Thinking mode: ``rollout_is_weights`` times each row's loss weight (None when every weight is 1)."""
        turns = [int(e.get("spade_turns") or 1) if ok else 1 for e, ok in zip(extra, real)]
        actor, n = self.config.actor_rollout_ref.actor, int(self.config.actor_rollout_ref.rollout.n)
        rows = len(batch) // mini_batches(self.config)
        weights = loss_weights(turns, actor.loss_agg_mode, rows, int(actor.ppo_mini_batch_size) * n)
        if all(w == 1.0 for w in weights):
            return None
        if have:  # verl's rollout correction wrote importance weights: scale them
            got = tq.kv_batch_get(
                keys=batch.keys, partition_id=batch.partition_id, select_fields=["rollout_is_weights"]
            )
            base = got.to_padded_tensor()["rollout_is_weights"].float()
        else:
            base = torch.ones_like(mask, dtype=torch.float32)
        return base * torch.tensor(weights, dtype=torch.float32).unsqueeze(-1)

    def _get_required_batch_multiple(self, dp_size: int) -> int:
        """Thinking mode: pad to ``k`` equal mini-batches (``turn_batches.batch_multiple``), not the config's size."""
        if not self._thinking():
            return super()._get_required_batch_multiple(dp_size)
        ref, actor = self.config.actor_rollout_ref, self.config.actor_rollout_ref.actor
        micro = [] if actor.use_dynamic_bsz else [actor.ppo_micro_batch_size_per_gpu]
        if not ref.rollout.get("log_prob_use_dynamic_bsz"):
            micro += [
                ref.rollout.get("log_prob_micro_batch_size_per_gpu"),
                ref.ref.get("log_prob_micro_batch_size_per_gpu"),
            ]
        return batch_multiple(dp_size, mini_batches(self.config), int(ref.rollout.n), micro)

    def _update_actor(self, batch: KVBatchMeta, metrics: dict) -> KVBatchMeta:
        """Thinking mode: verl's update with ``k`` mini-batches of ``len(batch) / k`` rows (the count varies)."""
        if not self._thinking():
            return super()._update_actor(batch, metrics)
        k, n = mini_batches(self.config), int(self.config.actor_rollout_ref.rollout.n)
        metrics["spade/update/rows_per_mini_batch"] = len(batch) // k
        with _mini_batch_rows(self.config, len(batch) // k // n):
            return super()._update_actor(batch, metrics)

    def _compute_metrics(self, batch: KVBatchMeta, metrics, timing_raw, global_steps, epoch):
        super()._compute_metrics(batch, metrics, timing_raw, global_steps, epoch)
        data = tq.kv_batch_get(keys=batch.keys, partition_id=batch.partition_id,
                               select_fields=["rm_scores", "extra_fields"])  # fmt: skip
        extra = data.pop("extra_fields").tolist()
        scores = data.to_padded_tensor()["rm_scores"].sum(dim=-1).tolist()
        real = [not tag.get("is_padding", False) for tag in batch.tags]
        batch_metrics = role_metrics(extra, scores, real, designer_reward_config(self.config))
        batch_metrics.update({k: v for k, v in metrics.items() if k.startswith(_FROM_ADVANTAGE)})
        metrics.update(batch_metrics)
        metrics.update(ray.get(_pool().end_step.remote(batch_metrics)))

    def _save_checkpoint(self):
        folder = Path(self.config.trainer.default_local_dir) / f"global_step_{self.global_steps}" / "spade"
        folder.mkdir(parents=True, exist_ok=True)
        ray.get(_pool().save_state.remote(str(folder)))  # before verl marks the checkpoint complete
        super()._save_checkpoint()

    def _load_checkpoint(self):
        """Verl's resume, then the env pool: restored from the same checkpoint, or fresh (never the run dir's files)."""
        super()._load_checkpoint()
        restore = None
        if self.global_steps > 0:
            folder = self._resumed_folder() / "spade"
            for name in POOL_STATE_FILES:
                if not (folder / name).exists():
                    raise FileNotFoundError(
                        f"resuming from global step {self.global_steps}, but {folder / name} is missing: the "
                        "checkpoint was not written by SPADE's trainer (trainer.v1.trainer_mode=spade)"
                    )
            restore = str(folder)
            logger.info("spade: restoring env memory and pool state from %s", folder)
        start_env_pool(OmegaConf.to_container(self.config.spade, resolve=True), restore)

    def _resumed_folder(self) -> Path:
        """The ``global_step_N`` folder verl's ``_load_checkpoint`` resumed from, by verl's own rules.

        ``resume_mode=resume_path``: ``trainer.resume_from_path``; ``auto``: the latest checkpoint in
        ``trainer.default_local_dir`` (both relative to the working directory unless absolute).
        """
        trainer = self.config.trainer
        if trainer.resume_mode == "resume_path":
            folder = os.path.abspath(trainer.resume_from_path)
        else:
            folder = find_latest_ckpt_path(os.path.abspath(trainer.default_local_dir))
        if folder is None or int(str(folder).split("global_step_")[-1]) != self.global_steps:
            raise RuntimeError(f"verl resumed at global step {self.global_steps}, but its checkpoint is {folder}")
        return Path(folder)


@contextmanager
def _mini_batch_rows(config: Any, per_n: int) -> Any:
    """Set the mini-batch that verl's ``_update_actor`` reads from the config (rows = ppo_mini_batch_size x n)."""
    actor = config.actor_rollout_ref.actor
    saved = actor.ppo_mini_batch_size
    with open_dict(config):
        actor.ppo_mini_batch_size = per_n
    try:
        yield
    finally:
        with open_dict(config):
            actor.ppo_mini_batch_size = saved


def _lone_agent_groups(keys: list[str], extra: list, real: list, excluded: list) -> set[str]:
    """Agent groups (verl's ``{uid}_{session}_{turn}`` keys) left with exactly one healthy episode by the exclusion."""
    sessions: dict[str, tuple[set[str], set[str]]] = {}
    for key, e, ok, out in zip(keys, extra, real, excluded):
        if ok and e.get("spade_role") == "agent":
            uid, session, _ = key.rsplit("_", 2)
            every, healthy = sessions.setdefault(uid, (set(), set()))
            every.add(session)
            if not out:
                healthy.add(session)
    return {uid for uid, (every, healthy) in sessions.items() if len(healthy) == 1 < len(every)}


def _fill_excluded(keys: list[str], partition_id: str, fields: set[str]) -> None:
    """Give excluded rows the fields verl's estimator wrote for the others: no advantage, no return, weight 1."""
    data = tq.kv_batch_get(keys=keys, partition_id=partition_id, select_fields=["response_mask"])
    mask = data.to_padded_tensor()["response_mask"]
    zero = torch.zeros_like(mask, dtype=torch.float32)
    values = {"advantages": zero, "returns": zero, "token_level_rewards": zero, "rollout_is_weights": zero + 1}
    nested = {name: response_to_nested(values[name], data["response_mask"]) for name in sorted(fields)}
    tq.kv_batch_put(keys=keys, partition_id=partition_id, fields=TensorDict(nested, batch_size=len(keys)))


def _dump_batch(run_dir: Path, step: int, batch: KVBatchMeta, extra: list, real: list, excluded: list,
                padded: Any, advantages: torch.Tensor, weights: torch.Tensor | None = None) -> None:  # fmt: skip
    """One JSON line per trained row (``spade.dump_batches``): what the update saw, for audits and tests.

    verl's padding rows copy every field of a real row (``extra_fields`` too), so their fields are dumped as None
    (``e`` is empty for them): their loss weight was computed with one turn, not with the copied row's turns.
    """
    mask = padded["response_mask"].bool()
    scores = padded["rm_scores"].sum(dim=-1).tolist()
    with (run_dir / BATCHES_FILE).open("a", encoding="utf-8") as f:  # cut on resume, set aside on a fresh start
        for i, key in enumerate(batch.keys):
            e = extra[i] if real[i] else {}
            values = advantages[i][mask[i]]
            row = {"global_step": step, "key": key, "uid": key.rsplit("_", 2)[0], "padding": not real[i],
                   "role": e.get("spade_role"), "spade_step": e.get("spade_step"), "env_id": e.get("spade_env_id"),
                   "seed": e.get("spade_seed"), "excluded": bool(excluded[i]), "fault": e.get("spade_env_fault"),
                   "turn": e.get("spade_turn"), "turns": e.get("spade_turns"),  # None on padding rows
                   "failure": e.get("spade_failure"), "score": scores[i], "trained_tokens": int(mask[i].sum()),
                   "advantage": float(values[0]) if len(values) else 0.0,
                   "advantage_abs_max": float(advantages[i].abs().max()),
                   "loss_weight": float(weights[i].max()) if weights is not None else 1.0}  # fmt: skip
            f.write(json.dumps(row) + "\n")


def role_metrics(extra: list[dict[str, Any]], scores: list[float], real: list[bool], reward_cfg: Any) -> dict:
    """Per-role reward, plateau, fault and sandbox-time metrics of one batch (padding rows excluded).

    Counted per episode: in thinking mode an episode's turn samples (which share its score) count once, by its last
    turn; ``spade/agent/turn_samples`` and ``turns_mean`` then say how many rows they made.
    """
    turn_rows = [e for e, ok in zip(extra, real) if ok and e.get("spade_role") == "agent" and "spade_turns" in e]
    rows = [(e, s) for e, s, ok in zip(extra, scores, real) if ok and is_episode_row(e)]
    metrics: dict[str, float] = {}
    if turn_rows:
        metrics["spade/agent/turn_samples"] = len(turn_rows)
        ends = [e for e in turn_rows if is_episode_row(e)]
        metrics["spade/agent/turns_mean"] = float(np.mean([e["spade_turns"] for e in ends])) if ends else 0.0
    for role in ("agent", "designer"):
        mine = [(e, s) for e, s in rows if e.get("spade_role") == role]
        metrics[f"spade/{role}/samples"] = len(mine)
        if mine:
            metrics[f"spade/{role}/reward_mean"] = float(np.mean([s for _, s in mine]))
    agents = [e for e, _ in rows if e.get("spade_role") == "agent"]
    if agents:
        metrics["spade/agent/env_fault_rate"] = float(np.mean([bool(e.get("spade_env_fault")) for e in agents]))
        # episodes cut by a length limit (turn tokens, the response or, in thinking mode, the prompt's history)
        metrics["spade/agent/truncated_by_length_rate"] = float(
            np.mean([bool(e.get("spade_truncated_by_length")) for e in agents])
        )
    measured = [e["spade_measure"] for e, _ in rows if e.get("spade_role") == "designer" and e.get("spade_measure")]
    if measured:
        win_rates = [win_rate(m["no_hint"]) for m in measured]  # wins, as the reward's plateau reads them
        band = (reward_cfg.plateau_low, reward_cfg.plateau_high, reward_cfg.plateau_ramp)
        metrics["spade/designer/plateau_mean"] = float(np.mean([plateau(w, *band) for w in win_rates]))
    wall = sum(float(e.get("spade_wall_s", 0.0)) for e in agents)
    if wall > 0:  # agent episodes alternate model and env turns, so their time splits cleanly
        metrics["spade/sandbox_time_share"] = sum(float(e.get("spade_sandbox_s", 0.0)) for e in agents) / wall
    designers = [e for e, _ in rows if e.get("spade_role") == "designer"]
    if designers:  # validation, hint vetting and the (concurrent) measurement plays, summed
        metrics["spade/designer/sandbox_s_mean"] = float(np.mean([e.get("spade_sandbox_s", 0.0) for e in designers]))
        # prompts fitted to rollout.prompt_length by shortening their document (prompt_fit.py); refused: not sent
        for key, name in (("spade_prompt_fit", "prompt"), ("spade_hint_prompt_fit", "hint_prompt")):
            for status in ("shortened", "refused"):
                metrics[f"spade/designer/{name}_{status}"] = sum(e.get(key) == status for e in designers)
    return metrics


def _pool() -> Any:
    """The run's env pool actor (created by the first agent loop; a step has always run loops before this)."""
    try:
        return ray.get_actor(ACTOR_NAME)
    except ValueError:
        raise RuntimeError(
            f"the SPADE env pool actor {ACTOR_NAME!r} does not exist: no SPADE agent loop ran. Check that "
            "actor_rollout_ref.rollout.agent.agent_loop_config_path points at recipe/spade/config/agent_loops.yaml"
        ) from None
