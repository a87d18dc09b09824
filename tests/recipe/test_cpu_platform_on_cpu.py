"""The CPU platform plugin and the guarded patches, against verl 0.9.1's real registries."""

import inspect
import json
import subprocess
import sys

import pytest
import torch
from verl.plugin.platform.platform_base import PlatformBase

from recipe.spade.cpu import patches
from recipe.spade.cpu.platform import PlatformCPU


def test_platform_implements_every_abstract_member():
    abstract = {n for n, v in inspect.getmembers(PlatformBase) if getattr(v, "__isabstractmethod__", False)}
    assert abstract, "verl's PlatformBase declares abstract members"
    platform = PlatformCPU()  # instantiating proves none is left abstract
    assert (platform.device_name, platform.vendor_name, platform.communication_backend_name()) == ("cpu", "cpu", "gloo")
    assert platform.ray_resource_name() == "GPU" and platform.is_ipc_supported() is False
    assert platform.is_platform_available(use_smi_check=True) is False, "never auto-detected on GPU hosts"
    with platform.nvtx_range("x"):
        pass


def test_device_module_answers_what_verl_asks():
    device = PlatformCPU().device_module
    assert device.memory_allocated() == device.max_memory_reserved() == 0
    free, total = device.mem_get_info()
    assert 0 < free <= total
    state = device.get_rng_state()
    a = torch.rand(2)
    device.set_rng_state(state)
    assert torch.equal(a, torch.rand(2))
    assert device.get_device_properties().total_memory == total
    assert device.is_available() and device.get_device_name() == "cpu"


def test_check_symbol_fails_loudly_on_drift():
    with pytest.raises(patches.PatchError, match="verl 0.9.1"):
        patches.check_symbol("verl.utils.distributed", "no_such_function")
    with pytest.raises(patches.PatchError, match=r"lacks \['not_a_param'\]"):
        patches.check_symbol("verl.utils.distributed", "initialize_global_process_group_ray", ("not_a_param",))


@pytest.mark.parametrize(
    ("module", "name", "params"),
    [
        ("verl.utils.distributed", "initialize_global_process_group_ray", ("timeout_second", "backend")),
        ("verl.workers.engine.fsdp.transformer_impl", "apply_fsdp2", ("model", "fsdp_kwargs", "config")),
        ("verl.workers.engine.fsdp.transformer_impl", "fsdp2_load_full_state_dict", ("model", "full_state")),
        ("verl.workers.engine.base", "EngineRegistry", ()),
        ("verl.workers.rollout.base", "_ROLLOUT_REGISTRY", ()),
        ("verl.utils.torch_functional", "logprobs_from_logits", ("logits", "labels", "inplace_backward")),
        ("verl.workers.engine.fsdp.transformer_impl", "logprobs_from_logits", ("logits", "labels", "inplace_backward")),
        ("verl.utils.torch_functional", "FLAH_ATTN_CROSS_ENTROPY_LOSS_AVAILABLE", ()),
        ("verl.utils.torch_functional", "NPU_CROSS_ENTROPY_LOSS_AVAILABLE", ()),
    ],
)
def test_every_patched_symbol_exists_as_expected(module, name, params):
    assert patches.check_symbol(module, name, params) is not None


PROBE = """
import json, verl
from verl.plugin.platform.platform_manager import get_platform
from verl.workers.engine.base import EngineRegistry
from verl.workers.rollout.base import _ROLLOUT_REGISTRY
from verl.workers.rollout.replica import get_rollout_replica_class
import verl.utils.distributed as dist, verl.workers.engine_workers as ew
import verl.workers.engine.fsdp.transformer_impl as impl
from recipe.spade.cpu import patches
patches.apply_all(); patches.apply_all()  # idempotent
print(json.dumps({
    "platform": get_platform().device_name,
    "engines": sorted(EngineRegistry._engines["language_model"]["fsdp2"]),
    "adapter": _ROLLOUT_REGISTRY.get(("hf", "async")),
    "replica": get_rollout_replica_class("hf").__name__,
    "gloo_wrapped": getattr(dist.initialize_global_process_group_ray, "_spade_cpu_patched", False),
    "rebound": ew.initialize_global_process_group_ray is dist.initialize_global_process_group_ray,
    "chunked_logprobs": getattr(impl.logprobs_from_logits, "_spade_cpu_patched", False),
}))
"""


@pytest.mark.parametrize("platform", ["cpu", ""])
def test_plugin_loads_through_verls_entry_point(platform):
    """A fresh interpreter that only imports verl gets the plugin; patches apply only with VERL_PLATFORM=cpu."""
    env = {"PATH": "/usr/bin:/bin", "VERL_PLATFORM": platform, "HOME": "/tmp"}
    code = PROBE if platform else PROBE.replace("patches.apply_all(); patches.apply_all()  # idempotent", "")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    facts = json.loads(out.stdout.strip().splitlines()[-1])
    assert facts["replica"] == "HFReplica"
    if platform == "cpu":
        assert facts["platform"] == "cpu" and "cpu" in facts["engines"]
        assert facts["adapter"] == "recipe.spade.cpu.hf_rollout.HFServerAdapter"
        assert facts["gloo_wrapped"] and facts["rebound"] and facts["chunked_logprobs"]
    else:
        assert facts["platform"] != "cpu" and "cpu" not in facts["engines"] and facts["adapter"] is None
        assert not facts["chunked_logprobs"]
