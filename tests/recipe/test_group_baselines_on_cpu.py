"""Faulted samples leave their group's baseline: ``SpadeTrainer._compute_advantage`` on verl's real estimator.

verl 0.9.1's own ``PPOTrainer._compute_advantage`` (and its GRPO) runs unchanged; the one stand-in is TransferQueue
(``tq.kv_batch_get`` / ``kv_batch_put``), replaced by an in-memory store with the same calls and return types, so no
Ray cluster is needed. Regression test for "a faulted agent sample still counts in its GRPO group's mean and std".
"""

import math
from pathlib import Path

import pytest
import torch
from hydra import compose, initialize_config_dir
from tensordict import NonTensorData, NonTensorStack, TensorDict
from transfer_queue import KVBatchMeta
from verl.trainer.ppo.v1 import trainer_base

import recipe.spade.trainer as spade_trainer
from recipe.spade.trainer import SpadeTrainer

CONFIG_DIR = Path(__file__).resolve().parents[2] / "recipe" / "spade" / "config"
L = 3  # response tokens per row


class MemoryTQ:
    """TransferQueue's key-value calls over a dict: tensors come back nested (jagged), other fields as stacks."""

    def __init__(self) -> None:
        self.rows: dict[str, dict] = {}

    def kv_batch_get(self, keys, partition_id, select_fields):
        present = [f for f in select_fields if all(f in self.rows[k] for k in keys)]
        fields = {}
        for name in present:
            values = [self.rows[k][name] for k in keys]
            if isinstance(values[0], torch.Tensor):
                fields[name] = torch.nested.nested_tensor(values, layout=torch.jagged)
            else:
                fields[name] = NonTensorStack(*[NonTensorData(v) for v in values])
        return TensorDict(fields, batch_size=[len(keys)])

    def kv_batch_put(self, keys, partition_id, fields):
        for name, value in fields.items():
            for key, row in zip(keys, value.unbind(0)):
                self.rows[key][name] = row.clone()
        names = sorted({name for k in keys for name in self.rows[k]})
        return KVBatchMeta(keys=list(keys), tags=[{} for _ in keys], partition_id=partition_id, fields=names)


def add_row(store: MemoryTQ, key: str, score: float, extra: dict) -> None:
    mask = torch.zeros(L, dtype=torch.int64) if extra.get("spade_excluded") else torch.ones(L, dtype=torch.int64)
    rm = torch.zeros(L)
    rm[-1] = score
    store.rows[key] = {"uid": key.split("_")[0], "response_mask": mask, "rm_scores": rm, "extra_fields": extra}


@pytest.fixture
def store(monkeypatch):
    memory = MemoryTQ()
    monkeypatch.setattr(spade_trainer, "tq", memory)
    monkeypatch.setattr(trainer_base, "tq", memory)
    return memory


def agent(fault: str = "") -> dict:
    return {"spade_role": "agent", "spade_env_fault": fault, "spade_excluded": bool(fault)}


def designer(skill: str, excluded: bool = False) -> dict:
    return {"spade_role": "designer", "spade_skill": skill, "spade_excluded": excluded}


def test_faulted_samples_are_left_out_of_every_baseline(store):
    rows = [
        ("g1_0_0", 1.0, agent()), ("g1_1_0", 1.0, agent()), ("g1_2_0", 0.0, agent()),
        ("g1_3_0", 0.0, agent("env_raised")),
        *[(f"g2_{i}_0", 0.0, agent("env_crashed")) for i in range(4)],  # a group with no healthy sample
        ("d1_0_0", -1.0, designer("logic")), ("d1_1_0", 0.5, designer("logic")),
        ("d1_2_0", -1.0, designer("logic", excluded=True)),  # e.g. the sandbox had no free slot
    ]  # fmt: skip
    for key, score, extra in rows:
        add_row(store, key, score, extra)
    with initialize_config_dir(config_dir=str(CONFIG_DIR), version_base=None):
        cfg = compose(
            config_name="spade_trainer",
            overrides=["spade.corpus=x", "spade.advantage.designer_scale=2", "algorithm.norm_adv_by_std_in_grpo=true"],
        )
    trainer = object.__new__(SpadeTrainer)
    trainer.config, trainer.global_steps = cfg, 1
    keys = [key for key, _, _ in rows]
    metrics: dict = {}
    trainer._compute_advantage(KVBatchMeta(keys=keys, tags=[{} for _ in keys], partition_id="train"), metrics)
    adv = {key: store.rows[key]["advantages"] for key in keys}

    std = math.sqrt(((1 / 3) ** 2 * 2 + (2 / 3) ** 2) / 2)  # GRPO over the three healthy plays only (unbiased std)
    assert adv["g1_0_0"].tolist() == pytest.approx([(1 - 2 / 3) / std] * L, rel=1e-4)
    assert adv["g1_2_0"].tolist() == pytest.approx([(0 - 2 / 3) / std] * L, rel=1e-4)
    for key in ["g1_3_0", *[f"g2_{i}_0" for i in range(4)], "d1_2_0"]:
        assert adv[key].abs().max() == 0 and store.rows[key]["returns"].abs().max() == 0
    assert adv["d1_0_0"].tolist() == pytest.approx([(-1.0 + 0.25) * 2] * L)  # centred on the two healthy designs
    assert adv["d1_1_0"].tolist() == pytest.approx([(0.5 + 0.25) * 2] * L)
    assert metrics["spade/excluded_samples"] == 6


def test_a_group_left_with_one_healthy_sample_gets_no_advantage(store):
    """Review 2, finding 2: verl's GRPO gives a group of one its raw score (mean 0, std 1), not a relative 0."""
    n = 8

    def play(filtered=False):
        return {"spade_role": "agent", "spade_env_fault": "", "spade_excluded": filtered,
                "spade_compact_filtered": filtered}  # fmt: skip

    rows = [(f"A_{i}_0", 1.0 if i == 0 else 0.0, play()) for i in range(n)]  # 8 healthy plays, 1 win
    rows += [(f"B_{i}_0", 1.0 if i == 0 else 0.0, play(filtered=i > 0)) for i in range(n)]  # the winner alone
    rows += [(f"C_{i}_0", 1.0 if i == 0 else 0.0, play(filtered=i > 1)) for i in range(n)]  # a win and a loss
    rows += [(f"D_{i}_0", 0.6 if i == 0 else 0.0, play(filtered=i > 0)) for i in range(n)]  # a lone 0.6
    for key, score, extra in rows:
        add_row(store, key, score, extra)
    # the paper launchers' algorithm settings
    paper = ["spade.setting=tool_use", "algorithm.adv_estimator=grpo", "algorithm.norm_adv_by_std_in_grpo=false",
             f"actor_rollout_ref.rollout.n={n}"]  # fmt: skip
    with initialize_config_dir(config_dir=str(CONFIG_DIR), version_base=None):
        cfg = compose(config_name="spade_trainer", overrides=paper)
    trainer = object.__new__(SpadeTrainer)
    trainer.config, trainer.global_steps = cfg, 1
    keys = [key for key, _, _ in rows]
    metrics: dict = {}
    trainer._compute_advantage(KVBatchMeta(keys=keys, tags=[{} for _ in keys], partition_id="train"), metrics)
    adv = {key: float(store.rows[key]["advantages"].abs().max()) for key in keys}
    assert float(store.rows["A_0_0"]["advantages"][0]) == pytest.approx(1 - 1 / n)
    assert float(store.rows["C_0_0"]["advantages"][0]) == pytest.approx(0.5)
    assert adv["B_0_0"] == 0 and adv["D_0_0"] == 0  # was +1.0 and +0.6
    assert all(store.rows[f"{g}_0_0"]["returns"].abs().max() == 0 for g in "BD")
    assert metrics["spade/agent/singleton_groups"] == 2
    assert metrics["spade/excluded_samples"] == 7 + 6 + 7  # the filter's count, not the lone samples
