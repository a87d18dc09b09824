"""What the GPU engines receive from each GPU launcher: verl 0.9.1's own translation functions on the composed config.

A composed YAML value is not a value the engine uses (issue 28: the 30B runs' ``optim.betas`` reached nothing). Each
test composes a launcher's real overrides (``DRY_RUN=1``, ``test_launchers.py``'s machinery) and hands the config to
the verl function that turns it into what the engine is built with. Where the code ends being verl's:

- **Megatron optimizer**: ``verl.utils.megatron.optimizer`` imports megatron-core at module top, and megatron-core
  needs Python 3.12 (not installable here). Only the three names it imports are stand-ins, put in ``sys.modules`` for
  the test: ``megatron.core.optimizer.OptimizerConfig`` (a dataclass declaring megatron-core's field names and
  defaults for the fields below, so an unknown key fails as the real one does), ``get_megatron_optimizer`` (never
  called) and ``megatron.core.optimizer_param_scheduler.OptimizerParamScheduler`` (records its arguments). verl's
  ``init_megatron_optim_config`` and ``get_megatron_optimizer_param_scheduler`` run unchanged, as the engine calls
  them (``McoreEngine._build_optimizer``: bf16 params, ``megatron.use_distributed_optimizer``).
- **FSDP optimizer**: verl's ``build_optimizer`` builds torch's real AdamW on a real parameter.
- **TIS**: verl's ``compute_rollout_correction_and_add_to_batch`` (what ``_compute_advantage`` calls) on a batch.
- **vLLM**: the rollout config as verl types it (``RolloutConfig``, what ``vLLMHttpServer._init_config`` holds and
  ``launch_server`` copies into vLLM's ``max_model_len``, ``tensor_parallel_size``, ``data_parallel_size`` and
  ``enable_expert_parallel``), and the sampling parameters verl's agent-loop worker builds from it. vLLM itself is
  not imported (no GPU build here).
"""

from __future__ import annotations

import dataclasses
import importlib
import re
import sys
import types
from functools import cache
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from test_gpu_readiness import GPU_LAUNCHERS, config_of
from test_launchers import composed, dry_run
from verl import DataProto
from verl.utils.config import omega_conf_to_dataclass

from recipe.spade.gpu_memory import memory_report

# The paper's optimizer (../shared/notes/spade-reference.md §9): Adam, lr 1e-6 constant, betas (0.9, 0.98), weight
# decay 0.1; gradient clipping at 1.0 (Slime's and verl's value; the paper names none). TIS: Slime's defaults, token-
# level weights pi_old / pi_rollout truncated above at 2.0 (lower 0), in verl's decoupled mode.
PAPER_LR, PAPER_BETAS, PAPER_WD, PAPER_CLIP, TIS_CAP = 1e-6, (0.9, 0.98), 0.1, 1.0, 2.0
# The launchers of the paper's runs (and everything built on them); gpu_smoke.sh runs them at a tiny scale.
PAPER_LAUNCHERS = [s for s in GPU_LAUNCHERS if s != "gpu_smoke.sh"]
FAKE_MEGATRON = ("megatron", "megatron.core", "megatron.core.optimizer", "megatron.core.optimizer_param_scheduler")


@dataclasses.dataclass
class StandInOptimizerConfig:
    """megatron-core's ``OptimizerConfig`` fields that verl's Adam path and the launchers set, with its defaults
    (megatron/core/optimizer/optimizer_config.py); any other keyword fails, as it would there."""

    lr: float | None = None
    min_lr: float | None = None
    weight_decay: float = 0.01
    fp16: bool = False
    bf16: bool = False
    params_dtype: torch.dtype = torch.float32
    use_precision_aware_optimizer: bool = False
    main_grads_dtype: torch.dtype = torch.float32
    exp_avg_dtype: torch.dtype = torch.float32
    exp_avg_sq_dtype: torch.dtype = torch.float32
    optimizer: str = "adam"
    adam_beta1: float = 0.9
    adam_beta2: float = 0.999
    adam_eps: float = 1e-8
    use_distributed_optimizer: bool = False
    optimizer_cpu_offload: bool = False
    optimizer_offload_fraction: float = 0.0
    overlap_cpu_optimizer_d2h_h2d: bool = False
    clip_grad: float = 1.0


class StandInScheduler:
    def __init__(self, optimizer: Any, **kwargs: Any) -> None:
        self.kwargs = kwargs


@pytest.fixture
def megatron_optimizer(monkeypatch):
    """verl's real ``verl.utils.megatron.optimizer``, imported against the stand-in megatron-core names."""
    for name in FAKE_MEGATRON:
        monkeypatch.setitem(sys.modules, name, types.ModuleType(name))
    sys.modules["megatron.core.optimizer"].OptimizerConfig = StandInOptimizerConfig
    sys.modules["megatron.core.optimizer"].get_megatron_optimizer = None
    sys.modules["megatron.core.optimizer_param_scheduler"].OptimizerParamScheduler = StandInScheduler
    monkeypatch.delitem(sys.modules, "verl.utils.megatron.optimizer", raising=False)
    module = importlib.import_module("verl.utils.megatron.optimizer")
    yield module
    sys.modules.pop("verl.utils.megatron.optimizer", None)


@cache
def actor_optim(script: str):
    cfg = config_of(script)
    return cfg, omega_conf_to_dataclass(cfg.actor_rollout_ref.actor.optim)


def megatron_receives(module, script: str) -> tuple[StandInOptimizerConfig, dict]:
    """Megatron's OptimizerConfig and lr scheduler arguments, built as McoreEngine builds them."""
    cfg, optim = actor_optim(script)
    optim_config = module.init_megatron_optim_config(
        optim, use_distributed_optimizer=cfg.actor_rollout_ref.actor.megatron.use_distributed_optimizer,
        fp16=False, bf16=cfg.actor_rollout_ref.actor.megatron.dtype == "bfloat16",
    )  # fmt: skip
    optim.total_training_steps = cfg.trainer.total_training_steps  # verl's worker sets it before the scheduler
    scheduler = module.get_megatron_optimizer_param_scheduler(optimizer=None, config=optim)
    return optim_config, scheduler.kwargs


MEGATRON = [s for s in GPU_LAUNCHERS if config_of(s).actor_rollout_ref.actor.strategy == "megatron"]
FSDP = [s for s in GPU_LAUNCHERS if config_of(s).actor_rollout_ref.actor.strategy in ("fsdp", "fsdp2")]


def test_every_gpu_launcher_has_an_engine_test():
    assert set(MEGATRON) | set(FSDP) == set(GPU_LAUNCHERS)
    assert "run_spade_30b.sh" in MEGATRON and "run_spade_8b.sh" in FSDP


@pytest.mark.parametrize("script", [s for s in MEGATRON if s in PAPER_LAUNCHERS])
def test_megatron_builds_the_papers_adam(megatron_optimizer, script):
    got, schedule = megatron_receives(megatron_optimizer, script)
    assert (got.optimizer, got.lr, got.weight_decay, got.clip_grad) == ("adam", PAPER_LR, PAPER_WD, PAPER_CLIP)
    assert (got.adam_beta1, got.adam_beta2) == PAPER_BETAS, (
        "Megatron's Adam betas (verl reads optim.betas only for Muon)"
    )
    assert got.bf16 and got.params_dtype == torch.bfloat16 and got.use_distributed_optimizer
    # constant lr from the first step: no warmup, no decay
    assert schedule["max_lr"] == PAPER_LR and schedule["lr_warmup_steps"] == 0
    assert schedule["lr_decay_style"] == "constant" and schedule["start_wd"] == schedule["end_wd"] == PAPER_WD


@pytest.mark.parametrize("script", [s for s in MEGATRON if s in PAPER_LAUNCHERS])
def test_megatron_keeps_adam_on_the_cpu(megatron_optimizer, script):
    """The 30B memory plan (verl's own Qwen3-30B-A3B Megatron examples): Adam's state and step on the CPU, its copies
    overlapped with compute, the precision-aware optimizer (fp32 master weights and moments, on the host)."""
    got, _ = megatron_receives(megatron_optimizer, script)
    assert got.optimizer_cpu_offload and got.optimizer_offload_fraction == 1
    assert got.overlap_cpu_optimizer_d2h_h2d and got.use_precision_aware_optimizer
    assert (got.main_grads_dtype, got.exp_avg_dtype, got.exp_avg_sq_dtype) == (torch.float32,) * 3


@pytest.mark.filterwarnings("ignore:set sequence parallel to false as TP size is 1:UserWarning")  # verl, at TP1
def test_gpu_smoke_megatron_builds_the_papers_adam(megatron_optimizer):
    """MODE=megatron of gpu_smoke.sh: the same Adam and CPU offload at one GPU's scale (a lent GPU runs them)."""
    config_name, overrides = dry_run("gpu_smoke.sh", MODE="megatron")
    cfg = composed(config_name, overrides)
    optim = omega_conf_to_dataclass(cfg.actor_rollout_ref.actor.optim)
    got = megatron_optimizer.init_megatron_optim_config(optim, use_distributed_optimizer=True, bf16=True)
    assert (got.adam_beta1, got.adam_beta2, got.weight_decay) == (*PAPER_BETAS, PAPER_WD)
    assert got.optimizer_cpu_offload and got.optimizer_offload_fraction == 1 and got.use_precision_aware_optimizer


@pytest.mark.parametrize("script", FSDP)
def test_fsdp_builds_the_papers_adamw(script):
    from verl.workers.config.optimizer import build_optimizer

    cfg, optim = actor_optim(script)
    group = build_optimizer([torch.nn.Parameter(torch.zeros(2))], optim).param_groups[0]
    assert type(build_optimizer([torch.nn.Parameter(torch.zeros(2))], optim)) is torch.optim.AdamW
    assert (group["lr"], group["betas"], group["weight_decay"]) == (PAPER_LR, PAPER_BETAS, PAPER_WD)
    assert optim.clip_grad == PAPER_CLIP and optim.lr_scheduler_type == "constant"
    assert optim.lr_warmup_steps_ratio == 0 and optim.lr_warmup_steps in (-1, 0, None)
    fsdp = cfg.actor_rollout_ref.actor.fsdp_config
    if script in PAPER_LAUNCHERS:  # Adam's state on the host between updates (gpu_smoke.sh: one GPU, tiny model)
        assert fsdp.param_offload and fsdp.optimizer_offload


def tis_weights(cfg, old: list[float], rollout: list[float]) -> torch.Tensor | None:
    """The IS weights verl's trainer computes for one sequence with these per-token log-probs (None: no TIS)."""
    from verl.trainer.ppo.rollout_corr_helper import compute_rollout_correction_and_add_to_batch

    correction = cfg.algorithm.rollout_correction
    if correction.get("bypass_mode"):
        return None  # verl's _compute_advantage skips the correction in bypass mode
    batch = DataProto.from_dict(tensors={
        "old_log_probs": torch.tensor([old]), "rollout_log_probs": torch.tensor([rollout]),
        "response_mask": torch.ones(1, len(old)),
    }, non_tensors={"uid": np.array(["a"], dtype=object)})  # fmt: skip
    out, _ = compute_rollout_correction_and_add_to_batch(batch, correction)
    return out.batch["rollout_is_weights"][0] if "rollout_is_weights" in out.batch.keys() else None


@pytest.mark.parametrize("script", GPU_LAUNCHERS)
def test_the_trainer_applies_token_level_truncated_is(script):
    cfg = config_of(script)
    assert cfg.actor_rollout_ref.rollout.calculate_log_probs, "no rollout log-probs: verl skips the correction"
    # per token: ratio exp(old - rollout) of 0.5, 1.5 and 4 (truncated at 2.0), each on its own
    old, rollout = [np.log(0.5), np.log(1.5), np.log(4.0)], [0.0, 0.0, 0.0]
    weights = tis_weights(cfg, old, rollout)
    assert weights is not None, "algorithm.rollout_correction.rollout_is is off: no importance sampling"
    assert weights.tolist() == pytest.approx([0.5, 1.5, TIS_CAP])


@pytest.mark.parametrize("script", GPU_LAUNCHERS)
def test_vllm_serves_the_composed_lengths_layout_and_sampling(script):
    from verl.workers.config import RolloutConfig

    cfg = config_of(script)
    rollout = omega_conf_to_dataclass(cfg.actor_rollout_ref.rollout)
    assert isinstance(rollout, RolloutConfig)
    assert rollout.max_model_len == rollout.prompt_length + rollout.response_length
    if rollout.expert_parallel_size > 1:  # vLLM's EP group is the replica's TP x DP (RolloutConfig.__post_init__)
        assert rollout.expert_parallel_size == rollout.tensor_model_parallel_size * rollout.data_parallel_size
    # AgentLoopWorker.generate_sequences: these reach every request (SamplingParams), the recipe adds max_tokens
    sampling = {"temperature": rollout.temperature, "top_p": rollout.top_p, "top_k": rollout.top_k,
                "logprobs": rollout.calculate_log_probs}  # fmt: skip
    if script in PAPER_LAUNCHERS:
        assert sampling == {"temperature": cfg.actor_rollout_ref.rollout.temperature, "top_p": 0.95, "top_k": 20,
                            "logprobs": True}  # fmt: skip


def test_every_rollout_replica_is_one_engine():
    """Prefix-cache affinity: verl keeps an episode's request id on one replica, and vLLM's DP balancer would move
    its turns between the engines of a DP > 1 replica (docs/gpu.md, "Rollout layout")."""
    for script in GPU_LAUNCHERS:
        assert config_of(script).actor_rollout_ref.rollout.data_parallel_size == 1, script
    rollout = config_of("run_spade_30b.sh").actor_rollout_ref.rollout
    assert (rollout.tensor_model_parallel_size, rollout.expert_parallel_size) == (4, 4)  # two replicas on 8 GPUs


# --- docs/gpu.md's memory table is recipe/spade/gpu_memory.py's output ----------------------------------------


def test_the_gpu_doc_memory_table_is_the_scripts_output():
    doc = (Path(__file__).resolve().parents[2] / "docs" / "gpu.md").read_text()
    block = re.search(r"<!-- gpu-memory -->\n```text\n(.*?)```", doc, re.DOTALL).group(1)
    scripts = ("run_spade_30b.sh", "run_spade_8b.sh")
    assert block == "".join(f"== examples/{s}\n{memory_report(config_of(s), 79.2)}\n" for s in scripts)


def test_the_30b_update_fits_an_h100_only_with_adam_on_the_cpu():
    def peak(cfg) -> float:
        return float(re.search(r"actor update peak per GPU: ([\d.]+) GiB", memory_report(cfg, 79.2)).group(1))

    assert peak(config_of("run_spade_30b.sh")) < 40
    config_name, overrides = dry_run("run_spade_30b.sh", RUN_DIR="/shared/spade-run", CORPUS="/shared/corpus.jsonl")
    gpu_adam = [o for o in overrides if "override_optimizer_config.optimizer_cpu_offload" not in o]
    assert peak(composed(config_name, gpu_adam)) > 65  # megatron.optimizer_offload alone: Adam back on the GPU
