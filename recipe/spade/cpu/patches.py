"""The monkeypatches verl 0.9.1 needs to train on CPU (four), and one that makes it fast there, each guarded.

Every patch first checks that the verl symbol it touches exists with the expected signature and fails with a
message naming verl 0.9.1 otherwise, so a verl upgrade breaks loudly here instead of deep inside a Ray worker.
All patches are idempotent and applied only when ``VERL_PLATFORM=cpu``.
"""

from __future__ import annotations

import functools
import importlib
import inspect
from collections.abc import Callable
from typing import Any

__all__ = ["PatchError", "apply_all", "check_symbol"]

_APPLIED = "_spade_cpu_patched"


class PatchError(RuntimeError):
    """A verl symbol the CPU backend patches is missing or changed: this recipe pins verl 0.9.1."""


def check_symbol(module: str, name: str, params: tuple[str, ...] = ()) -> Any:
    """Return ``module.name`` after checking it exists and accepts ``params``; :class:`PatchError` otherwise."""
    try:
        obj = getattr(importlib.import_module(module), name)
    except (ImportError, AttributeError) as exc:
        raise PatchError(f"{module}.{name} is missing; the SPADE CPU backend is written for verl 0.9.1") from exc
    if params:
        target = getattr(obj, "__wrapped__", obj)
        found = tuple(inspect.signature(target).parameters)
        missing = [p for p in params if p not in found]
        if missing:
            raise PatchError(
                f"{module}.{name}{inspect.signature(target)} lacks {missing}; the SPADE CPU backend is written for "
                "verl 0.9.1"
            )
    return obj


def register_rollout_adapter() -> None:
    """Patch 1: map ``("hf", "async")`` to our in-worker adapter (verl has no public API for this registry)."""
    base = importlib.import_module("verl.workers.rollout.base")
    registry = check_symbol("verl.workers.rollout.base", "_ROLLOUT_REGISTRY")
    if not isinstance(registry, dict) or not hasattr(base, "get_rollout_class"):
        raise PatchError("verl.workers.rollout.base._ROLLOUT_REGISTRY changed; written for verl 0.9.1")
    for name in ("hf", "hf_scripted", "hf_soak", "hf_ladder"):
        registry[(name, "async")] = "recipe.spade.cpu.hf_rollout.HFServerAdapter"


def gloo_process_group() -> None:
    """Patch 2: init the process group with plain ``gloo`` (verl builds ``cpu:gloo,cpu:gloo``, which torch rejects).

    The function is imported by name in two modules, so the wrapper is rebound there too.
    """
    original = check_symbol("verl.utils.distributed", "initialize_global_process_group_ray", ("backend",))
    if getattr(original, _APPLIED, False):
        return

    @functools.wraps(original)
    def initialize(timeout_second: Any = None, backend: str | None = None) -> Any:
        return original(timeout_second=timeout_second, backend="gloo")

    setattr(initialize, _APPLIED, True)
    importlib.import_module("verl.utils.distributed").initialize_global_process_group_ray = initialize
    for user in ("verl.workers.engine_workers", "verl.checkpoint_engine.base"):
        module = importlib.import_module(user)
        if getattr(module, "initialize_global_process_group_ray", None) is original:
            module.initialize_global_process_group_ray = initialize


def register_cpu_engines() -> None:
    """Patch 3: register verl's FSDP engines for device ``cpu`` through the public decorator."""
    registry = check_symbol("verl.workers.engine.base", "EngineRegistry")
    impl = importlib.import_module("verl.workers.engine.fsdp.transformer_impl")
    for model_type, cls_name in (
        ("language_model", "FSDPEngineWithLMHead"),
        ("value_model", "FSDPEngineWithValueHead"),
    ):
        engine_cls = check_symbol(impl.__name__, cls_name)
        if "cpu" not in registry._engines.get(model_type, {}).get("fsdp2", {}):
            registry.register(model_type=model_type, backend=["fsdp", "fsdp2"], device="cpu")(engine_cls)


def no_fsdp2_offload_policy() -> None:
    """Patch 4: drop FSDP2's offload policy, which needs an accelerator.

    Forward-only FSDP2 engines hard-code ``CPUOffloadPolicy(pin_memory=True)``; pinning needs an accelerator, and on
    CPU the parameters already live in host memory.
    """
    impl = importlib.import_module("verl.workers.engine.fsdp.transformer_impl")
    apply = check_symbol(impl.__name__, "apply_fsdp2", ("model", "fsdp_kwargs", "config"))
    load = check_symbol(
        impl.__name__, "fsdp2_load_full_state_dict", ("model", "full_state", "device_mesh", "cpu_offload")
    )
    if getattr(apply, _APPLIED, False):
        return

    @functools.wraps(apply)
    def apply_fsdp2(model: Any, fsdp_kwargs: dict[str, Any], config: Any) -> Any:
        return apply(model, {**fsdp_kwargs, "offload_policy": None}, config)

    @functools.wraps(load)
    def fsdp2_load_full_state_dict(
        model: Any, full_state: dict, device_mesh: Any = None, cpu_offload: Any = None
    ) -> Any:
        return load(model, full_state, device_mesh, None)

    for fn in (apply_fsdp2, fsdp2_load_full_state_dict):
        setattr(fn, _APPLIED, True)
    impl.apply_fsdp2, impl.fsdp2_load_full_state_dict = apply_fsdp2, fsdp2_load_full_state_dict


def chunked_token_logprobs() -> None:
    """Patch 5: the FSDP engine's token log-probs in row blocks instead of one token at a time.

    Without flash-attn's or torch_npu's cross-entropy, verl's ``logprobs_from_logits`` loops over the rows of the
    unpadded ``(tokens, vocab)`` logits (``chunked_logprobs.py``): same values, bitwise, without the per-token calls.
    """
    functional = importlib.import_module("verl.utils.torch_functional")
    check_symbol(functional.__name__, "logprobs_from_logits", ("logits", "labels", "inplace_backward"))
    for flag in ("FLAH_ATTN_CROSS_ENTROPY_LOSS_AVAILABLE", "NPU_CROSS_ENTROPY_LOSS_AVAILABLE"):
        if check_symbol(functional.__name__, flag):
            return  # a fused kernel is there: verl's own path is already vectorised
    impl = importlib.import_module("verl.workers.engine.fsdp.transformer_impl")
    current = check_symbol(impl.__name__, "logprobs_from_logits", ("logits", "labels", "inplace_backward"))
    if getattr(current, _APPLIED, False):
        return
    from recipe.spade.cpu.chunked_logprobs import logprobs_from_logits_chunked

    @functools.wraps(current)
    def logprobs_from_logits(logits: Any, labels: Any, inplace_backward: bool = True) -> Any:
        return logprobs_from_logits_chunked(logits, labels, inplace_backward)

    setattr(logprobs_from_logits, _APPLIED, True)
    impl.logprobs_from_logits = logprobs_from_logits


PATCHES: tuple[Callable[[], None], ...] = (
    register_rollout_adapter,
    gloo_process_group,
    register_cpu_engines,
    no_fsdp2_offload_policy,
    chunked_token_logprobs,
)


def apply_all() -> None:
    """Apply every patch (idempotent)."""
    for patch in PATCHES:
        patch()
