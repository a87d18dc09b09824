"""Memory of a GPU launcher, per GPU and per node, computed from the config it composes (docs/gpu.md's table).

Nothing here is measured on a GPU: it is arithmetic on the model's shape and the composed settings that decide
memory (parallel layout, offload, the optimizer's placement, recompute, fused kernels, tokens per micro-batch, the
temperature and entropy chunks, vLLM's memory fraction and ``max_model_len``), written out so that a changed
launcher changes the table. Run from the repo root:

    python -m recipe.spade.gpu_memory examples/run_spade_30b.sh --gpu-gib 80 141

Sizes are GiB (2^30 bytes); an "80 GB" H100 shows about 79.2 GiB to CUDA, an H200 about 139.8. Where verl 0.9.1 moves
what, and when (the train-mode context switch loads offloaded parameters, gradients and optimizer state for the whole
update; Megatron's CPU optimizer never puts Adam on the GPU), is explained in docs/gpu.md. The FSDP engine's
log-prob tensors (``fsdp_logit_bytes``) are checked against verl's real engine on CPU
(``tests/recipe/test_review3_gpu_memory.py``).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from recipe.spade.budget import budget_of
from spade_envs.cli.model_shapes import ModelShape, checkpoint_bytes, shape_of

__all__ = ["LogitBytes", "compose", "fsdp_logit_bytes", "launcher_plan", "memory_report", "peak_episodes"]

GIB = 2**30


@dataclass
class Report:
    lines: list[tuple[str, float, str]]  # (what, GiB, how)

    def add(self, what: str, nbytes: float, how: str) -> float:
        self.lines.append((what, nbytes / GIB, how))
        return nbytes / GIB


@dataclass(frozen=True)
class LogitBytes:
    """Bytes of the vocab-sized tensors verl 0.9.1's FSDP engine holds for one micro-batch (``fsdp_logit_bytes``)."""

    logits: float  # the model's bf16 logits: its output holds them until FSDPEngine.forward_step returns
    scaled: float  # _scale_logits_by_temperature's logits / T, a new tensor unless T is exactly 1
    entropy: float  # the old-log-prob pass's entropy temporaries (trainer_base: calculate_entropy=True)

    @property
    def log_prob_pass(self) -> float:
        """No grad: the logits, their copy and entropy's temporaries at once (the cross entropy adds a few floats)."""
        return self.logits + self.scaled + self.entropy


def fsdp_logit_bytes(tokens: int, vocab: int, temperature: float, entropy_chunk: int | None) -> LogitBytes:
    """The vocab-sized tensors of verl 0.9.1's FSDP log-prob path (``prepare_model_outputs``) for ``tokens``.

    ``entropy_chunk`` is ``fsdp_config.entropy_from_logits_chunk_size`` when ``entropy_from_logits_with_chunking`` is
    on, else None. Chunked (``verl_F.entropy_from_logits_with_chunking``), a chunk's ``.float()`` copy, its softmax
    and then logsumexp's ``x - max`` or the product ``pd * x`` are live at once: three fp32 chunks. Over the whole
    pack (``entropy_from_logits``) softmax and ``pd * logits`` are fp32 under CUDA autocast: two fp32 copies of the
    pack, an upper bound when ``torch.compile`` fuses some of it. Without grad, flash-attn's cross entropy (verl's
    ``logprobs_from_logits`` on a GPU) writes three floats per token and no vocab-sized tensor.
    """
    logits = tokens * vocab * 2
    entropy = 2 * tokens * vocab * 4 if entropy_chunk is None else 3 * min(entropy_chunk, tokens) * vocab * 4
    return LogitBytes(logits=logits, scaled=0 if float(temperature) == 1.0 else logits, entropy=entropy)


def peak_episodes(cfg: Any) -> int:
    """Episodes in flight at once at a regeneration step's peak, each in its own sandbox and one vLLM request at a time.

    Every arm of every design's measurement plays (gathered all at once, ``SpadeDesignerLoop._measure``) and every
    agent sample of the step.
    """
    budget = budget_of(cfg)
    return budget.measurement_plays_per_regen + budget.agent_samples_regen_step


def _actor(cfg: Any, m: ModelShape, r: Report) -> float:
    """Peak GPU memory of one actor rank in the update (verl loads every offloaded part for the whole train phase)."""
    actor = cfg.actor_rollout_ref.actor
    world = cfg.trainer.n_gpus_per_node * cfg.trainer.nnodes
    tokens = actor.ppo_max_token_len_per_gpu
    if actor.strategy == "megatron":
        meg = actor.megatron
        tp, ep, etp = meg.tensor_model_parallel_size, meg.expert_model_parallel_size, meg.expert_tensor_parallel_size
        pp = meg.pipeline_model_parallel_size
        experts, dense = m.expert_params / (ep * etp * pp), m.dense_params / (tp * pp)
        local = experts + dense
        total = r.add("bf16 weights", 2 * local, f"{local / 1e9:.2f}B params: experts / EP{ep}, the rest / TP{tp}")
        total += r.add("fp32 grad buffer", 4 * local, "Megatron DDP, grad_reduce_in_fp32")
        override = dict(actor.optim.get("override_optimizer_config") or {})
        adam = 12 * (experts / (world // (ep * etp * pp)) + dense / (world // (tp * pp)))
        if override.get("optimizer_cpu_offload") and float(override.get("optimizer_offload_fraction", 0)) >= 1:
            r.add("Adam (fp32 master, m, v)", 0, "on the host: optimizer_cpu_offload, fraction 1")
        else:
            total += r.add("Adam (fp32 master, m, v)", adam, "on the GPU for the whole update (distributed optimizer)")
        seq = tokens / tp if meg.sequence_parallel else tokens
        layers = m.layers / pp
        recompute = meg.override_transformer_config.get("recompute_granularity") == "full"
        layer_input = seq * m.hidden * 2
        attn = 2 * tokens * (m.heads + 2 * m.kv_heads) / tp * m.head_dim * 2
        mlp = 2 * (seq * m.topk * (6 * m.hidden + 6 * m.expert_ffn) if m.experts else 6 * tokens * m.ffn / tp)
        if recompute:
            total += r.add("layer inputs (full recompute)", layers * layer_input, f"{layers:.0f} x {seq:.0f} tokens")
            total += r.add("one layer recomputed, fwd + bwd", attn + mlp, "attention + MLP working set")
        else:
            total += r.add("activations, no recompute", layers * (attn + mlp), "every layer's working set")
        logits = 0 if cfg.actor_rollout_ref.model.use_fused_kernels else tokens * m.vocab / tp * 4
        total += r.add("logits", logits, "fused kernels: none" if not logits else "fp32, vocab / TP")
        return total
    # FSDP / FSDP2: fp32 parameter, gradient and Adam shards, one unit gathered at a time
    local = m.params / world
    fixed = r.add("fp32 param shard", 4 * local, f"{m.params / 1e9:.2f}B params / {world} ranks")
    fixed += r.add("fp32 grad shard", 4 * local, "")
    fixed += r.add("Adam m, v shard", 8 * local, "loaded for the update (fsdp optimizer_offload)")
    layer = _fsdp_layer(m, tokens)
    logits = _fsdp_logits(cfg, m, tokens)
    copy = f"logits / {cfg.actor_rollout_ref.rollout.temperature}, a new tensor" if logits and logits.scaled else "none"
    if not cfg.actor_rollout_ref.model.enable_gradient_checkpointing:
        fixed += r.add("activations", m.layers * layer, "every layer's working set")
        return fixed + _add_logits(r, logits, copy)
    fixed += r.add("layer inputs (checkpointing)", m.layers * tokens * m.hidden * 2, f"{m.layers} x {tokens}")
    recomputed = r.add("one layer recomputed, fwd + bwd", layer, "attention + MLP working set")
    return fixed + max(recomputed, _add_logits(r, logits, copy))  # the logits die before the layers' backward


def _fsdp_layer(m: ModelShape, tokens: int) -> float:
    """One decoder layer's attention and MLP working set, forward and backward, for a pack of ``tokens``."""
    return 2 * tokens * ((m.heads + 2 * m.kv_heads) * m.head_dim * 2 + 6 * m.ffn)


def _fsdp_logits(cfg: Any, m: ModelShape, tokens: int) -> LogitBytes | None:
    """The FSDP engine's logits for a pack of ``tokens`` (None with fused kernels: log-probs from hidden states)."""
    actor = cfg.actor_rollout_ref.actor
    if cfg.actor_rollout_ref.model.use_fused_kernels:
        return None
    if actor.calculate_entropy or actor.entropy_coeff != 0:  # trainer_base._update_actor then computes entropy too
        raise ValueError("gpu_memory models the FSDP update without entropy (actor.entropy_coeff=0, "
                         "actor.calculate_entropy=false), as every launcher runs it")  # fmt: skip
    engine = actor.fsdp_config
    chunk = engine.entropy_from_logits_chunk_size if engine.entropy_from_logits_with_chunking else None
    return fsdp_logit_bytes(tokens, m.vocab, cfg.actor_rollout_ref.rollout.temperature, chunk)


def _add_logits(r: Report, logits: LogitBytes | None, copy: str) -> float:
    """The update's two logits-sized tensors (one at T = 1), forward and backward alike.

    Forward: the logits and their 1/T copy. Backward: flash-attn's cross entropy writes its gradient into the copy in
    place, and DivBackward (which saved no logits) makes grad / T before the copy is freed.
    """
    if logits is None:
        return r.add("logits of the pack", 0, "fused kernels: none")
    return r.add("logits of the pack", logits.logits, "bf16, held until the forward step returns") + r.add(
        "its 1/T copy", logits.scaled, copy
    )


def _log_prob_pass(cfg: Any, m: ModelShape, r: Report) -> float | None:
    """Peak GPU memory of one FSDP rank computing old log-probs (no grad, with entropy); None for Megatron."""
    actor = cfg.actor_rollout_ref.actor
    if actor.strategy == "megatron":
        return None
    tokens = cfg.actor_rollout_ref.rollout.log_prob_max_token_len_per_gpu
    shard = 4 * m.params / (cfg.trainer.n_gpus_per_node * cfg.trainer.nnodes)
    logits = _fsdp_logits(cfg, m, tokens)
    if logits is None:
        return (shard + _fsdp_layer(m, tokens)) / GIB
    engine = actor.fsdp_config
    chunks = engine.entropy_from_logits_with_chunking
    how = f"3 fp32 chunks of {engine.entropy_from_logits_chunk_size} tokens" if chunks else "whole pack, fp32 x 2"
    held = r.add("log-prob pass: logits + their 1/T copy", logits.logits + logits.scaled, f"{tokens} tokens, no grad")
    held += r.add("log-prob pass: entropy", logits.entropy, how)
    return shard / GIB + max(_fsdp_layer(m, tokens) / GIB, held)


def _rollout(cfg: Any, m: ModelShape, gpu_gib: float, overhead_gib: float, r: Report) -> dict[str, float]:
    """The rollout engine per GPU: vLLM's weights, its KV cache and what that holds."""
    ro = cfg.actor_rollout_ref.rollout
    tp, dp, pp = ro.tensor_model_parallel_size, ro.data_parallel_size, ro.pipeline_model_parallel_size
    world = cfg.trainer.n_gpus_per_node * cfg.trainer.nnodes
    ep = ro.expert_parallel_size if ro.expert_parallel_size > 1 else tp
    weights = (m.expert_params / ep + m.dense_params / tp) / pp * 2
    kv_token = m.layers / pp * 2 * max(m.kv_heads / tp, 1) * m.head_dim * 2
    budget = ro.gpu_memory_utilization * gpu_gib * GIB - weights - overhead_gib * GIB
    tokens = max(budget, 0) / kv_token
    r.add("vLLM weights", weights, f"experts / EP{ep}, the rest / TP{tp}" if m.experts else f"/ TP{tp}")
    r.add("vLLM KV cache", max(budget, 0), f"{ro.gpu_memory_utilization} x GPU - weights - {overhead_gib} GiB overhead")
    return {"replicas": world // (tp * dp * pp), "engines_per_replica": dp, "kv_per_token_kib": kv_token / 1024,
            "tokens_per_engine": tokens, "sequences_per_engine": tokens / ro.max_model_len}  # fmt: skip


def _host(cfg: Any, m: ModelShape, r: Report, sandbox_mb: float) -> float:
    """Host RAM of one node: offloaded weights and optimizer, and the sandboxes of a regeneration step."""
    actor = cfg.actor_rollout_ref.actor
    nodes, gpus = cfg.trainer.nnodes, cfg.trainer.n_gpus_per_node
    total = 0.0
    if actor.strategy == "megatron":
        meg = actor.megatron
        local = (m.expert_params / (meg.expert_model_parallel_size * meg.expert_tensor_parallel_size)
                 + m.dense_params / meg.tensor_model_parallel_size) / meg.pipeline_model_parallel_size  # fmt: skip
        override = dict(actor.optim.get("override_optimizer_config") or {})
        if meg.param_offload:
            total += r.add("host: offloaded bf16 weights + fp32 grads", 6 * local * gpus, "each GPU's, between updates")
        if override.get("optimizer_cpu_offload") or meg.optimizer_offload:
            total += r.add("host: Adam (fp32 master, m, v)", 12 * m.params / nodes, "the whole model, per node")
        if override.get("optimizer_cpu_offload"):
            total += r.add("host: CPU Adam's fp32 grad copies", 4 * m.params / nodes, "pinned, per node")
    else:
        fsdp = actor.fsdp_config
        if fsdp.param_offload:
            total += r.add("host: offloaded fp32 params + grads", 8 * m.params / nodes, "between updates")
        if fsdp.optimizer_offload:
            total += r.add("host: Adam m, v", 8 * m.params / nodes, "between updates")
    boxes = peak_episodes(cfg)
    total += r.add("host: sandboxes", boxes * sandbox_mb * 2**20 / nodes, f"{boxes} at once x {sandbox_mb:g} MB")
    return total


def memory_report(cfg: Any, gpu_gib: float, overhead_gib: float = 4.0, sandbox_mb: float = 31.0) -> str:
    """The memory table of a composed config on GPUs of ``gpu_gib``."""
    m = shape_of(cfg.actor_rollout_ref.model.path)
    r = Report([])
    actor = _actor(cfg, m, r)
    log_prob = _log_prob_pass(cfg, m, r)
    ro = _rollout(cfg, m, gpu_gib, overhead_gib, r)
    host = _host(cfg, m, r, sandbox_mb)
    actor_cfg = cfg.actor_rollout_ref.actor
    ckpt = checkpoint_bytes(m.params, actor_cfg.strategy, actor_cfg.checkpoint.save_contents) / GIB
    keep = cfg.trainer.max_actor_ckpt_to_keep
    steps, every = cfg.trainer.total_training_steps, cfg.trainer.save_freq
    out = [f"model {cfg.actor_rollout_ref.model.path}: {m.params / 1e9:.2f}B params; GPU {gpu_gib:g} GiB"]
    out += [f"  {what:<44} {gib:8.1f} GiB  {how}" for what, gib, how in r.lines]
    for what, peak in (("actor update", actor), ("log-prob pass", log_prob)):
        if peak is not None:
            verdict = "fits" if peak <= gpu_gib else "DOES NOT FIT"
            out.append(f"  {what} peak per GPU: {peak:.1f} GiB of {gpu_gib:g} ({verdict}, before allocator slack)")
    rollout = cfg.actor_rollout_ref.rollout
    out.append(f"  rollout: {ro['replicas']} replica(s) x {ro['engines_per_replica']} engine(s); KV "
               f"{ro['kv_per_token_kib']:.1f} KiB per token per GPU; {ro['tokens_per_engine'] / 1e6:.2f}M tokens per "
               f"engine = {ro['sequences_per_engine']:.0f} sequences of max_model_len {rollout.max_model_len}; "
               f"max_num_seqs {rollout.max_num_seqs}, {peak_episodes(cfg)} requests at the peak")  # fmt: skip
    out.append(f"  host RAM per node: {host:.0f} GiB")
    out.append(f"  checkpoint: {ckpt:.0f} GiB each; {keep} kept + 1 being written = {ckpt * (keep + 1):.0f} GiB of "
               f"disk; {steps // every} saves write {ckpt * (steps // every) / 1024:.1f} TiB")  # fmt: skip
    return "\n".join(out)


def compose(config_name: str, overrides: list[str]) -> Any:
    """The run's config, composed as ``recipe.spade.budget`` composes it (verl's YAML by path, no verl import)."""
    import importlib.util

    from hydra import compose as hydra_compose
    from hydra import initialize_config_dir

    verl = importlib.util.find_spec("verl")
    if verl is not None and verl.submodule_search_locations:
        path = Path(list(verl.submodule_search_locations)[0]) / "trainer" / "config"
        overrides = [f"hydra.searchpath=[file://{path}]", *overrides]
    with initialize_config_dir(config_dir=str(Path(__file__).resolve().parent / "config"), version_base=None):
        return hydra_compose(config_name=config_name, overrides=overrides)


def launcher_plan(launcher: str, env: dict[str, str] | None = None) -> tuple[str, list[str]]:
    """A launcher's config name and overrides, as its ``DRY_RUN=1`` prints them."""
    run = subprocess.run(["bash", launcher], capture_output=True, text=True, timeout=300,
                         env={**os.environ, "PYTHON": sys.executable, **(env or {}), "DRY_RUN": "1",
                              "SKIP_DOCTOR": "1"})  # fmt: skip
    if run.returncode != 0:
        raise RuntimeError(f"{launcher} (DRY_RUN=1) failed: {run.stderr.strip().splitlines()[-1:]}")
    name = run.stdout.split("== SPADE plan: config ", 1)[1].split(",", 1)[0]
    return name, run.stdout.split("== overrides (DRY_RUN) ==\n", 1)[1].splitlines()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m recipe.spade.gpu_memory", description=__doc__.splitlines()[0])
    parser.add_argument("launcher", help="a GPU launcher, e.g. examples/run_spade_30b.sh")
    parser.add_argument("--gpu-gib", type=float, nargs="+", default=[80.0], help="GPU memory sizes to plan for")
    parser.add_argument(
        "--vllm-overhead-gib",
        type=float,
        default=4.0,
        help="vLLM's non-KV memory besides weights (activations, CUDA graphs); an assumption",
    )
    parser.add_argument("--sandbox-mb", type=float, default=31.0, help="RSS of one sandboxed env (measured on CPU)")
    args = parser.parse_args(argv)
    cfg = compose(*launcher_plan(args.launcher))
    for gib in args.gpu_gib:
        print(f"== {args.launcher}")
        print(memory_report(cfg, gib, args.vllm_overhead_gib, args.sandbox_mb))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
