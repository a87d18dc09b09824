"""verl platform plugin for CPU-only machines: gloo, and the device-module calls verl makes, answered on CPU.

verl 0.9.1 has no CPU platform (upstream issue #3266). Registering one through its public
``PlatformRegistry`` lets the unmodified trainer, workers and FSDP2 engine run on CPU when ``VERL_PLATFORM=cpu``.
"""

from __future__ import annotations

import contextlib
import types
from collections.abc import Iterator
from typing import Any

import psutil
import torch
from verl.plugin.platform.platform_base import PlatformBase
from verl.plugin.platform.platform_manager import PlatformRegistry

__all__ = ["CPUDeviceModule", "PlatformCPU"]


class _DeviceProperties(types.SimpleNamespace):
    """What ``torch.cuda.get_device_properties`` reports, for the host."""


class CPUDeviceModule(types.ModuleType):
    """``torch.cpu`` plus the memory, RNG and IPC calls verl makes on ``get_torch_device()``.

    Memory statistics read as 0 (verl only logs them); ``mem_get_info`` reports host RAM so that memory-aware code
    sizes itself sensibly; RNG state is torch's global CPU generator. Anything else falls through to ``torch.cpu``.
    """

    def __init__(self) -> None:
        super().__init__("spade_cpu_device")

    def __getattr__(self, name: str) -> Any:
        return getattr(torch.cpu, name)

    @staticmethod
    def memory_allocated(device: Any = None) -> int:
        return 0

    memory_reserved = max_memory_allocated = max_memory_reserved = memory_allocated

    @staticmethod
    def reset_peak_memory_stats(device: Any = None) -> None:
        return None

    reset_accumulated_memory_stats = empty_cache = ipc_collect = reset_peak_memory_stats

    @staticmethod
    def memory_stats(device: Any = None) -> dict[str, Any]:
        return {}

    @staticmethod
    def mem_get_info(device: Any = None) -> tuple[int, int]:
        vm = psutil.virtual_memory()
        return vm.available, vm.total

    @staticmethod
    def get_rng_state(device: Any = None) -> torch.Tensor:
        return torch.get_rng_state()

    @staticmethod
    def set_rng_state(state: torch.Tensor, device: Any = None) -> None:
        torch.set_rng_state(state)

    @staticmethod
    def manual_seed(seed: int) -> None:
        torch.manual_seed(seed)

    manual_seed_all = manual_seed

    @staticmethod
    def get_device_name(device: Any = None) -> str:
        return "cpu"

    @staticmethod
    def get_device_properties(device: Any = None) -> _DeviceProperties:
        return _DeviceProperties(name="cpu", total_memory=psutil.virtual_memory().total, major=0, minor=0)

    @staticmethod
    def current_device() -> str:
        return "cpu"

    @staticmethod
    def device_count() -> int:
        return 1

    @staticmethod
    def is_available() -> bool:
        return True

    @staticmethod
    def set_device(device: Any) -> None:
        return None

    @staticmethod
    def synchronize(device: Any = None) -> None:
        return None


_DEVICE_MODULE = CPUDeviceModule()


@PlatformRegistry.register(platform="cpu")
class PlatformCPU(PlatformBase):
    """The host CPU as verl's accelerator. Ray sees declared (fake) GPUs so verl's resource pools still form."""

    @property
    def device_name(self) -> str:
        return "cpu"

    @property
    def vendor_name(self) -> str:
        return "cpu"

    @property
    def device_module(self) -> types.ModuleType:
        return _DEVICE_MODULE

    def is_available(self) -> bool:
        return True

    def is_platform_available(self, use_smi_check: bool = False) -> bool:
        # Never auto-detected: CPU is chosen explicitly with VERL_PLATFORM=cpu, so GPU hosts keep their platform.
        return not use_smi_check

    def current_device(self) -> str:  # type: ignore[override]
        return "cpu"

    def device_count(self) -> int:
        return 1

    def set_device(self, device_index: int) -> None:
        return None

    def synchronize(self, device_index: int | None = None) -> None:
        return None

    def manual_seed(self, seed: int) -> None:
        torch.manual_seed(seed)

    def manual_seed_all(self, seed: int) -> None:
        torch.manual_seed(seed)

    def set_allocator_settings(self, settings: str) -> None:
        return None

    def empty_cache(self) -> None:
        return None

    def get_device_capability(self, device_index: int = 0) -> tuple[int | None, int | None]:
        return (None, None)

    def communication_backend_name(self) -> str:
        return "gloo"

    def visible_devices_envvar(self) -> str:
        return "CUDA_VISIBLE_DEVICES"

    @contextlib.contextmanager
    def nvtx_range(self, msg: str) -> Iterator[None]:
        yield

    def profiler_start(self) -> None:
        return None

    def profiler_stop(self) -> None:
        return None

    def ray_resource_name(self) -> str:
        return "GPU"

    def ray_noset_envvars(self) -> list[str]:
        return []

    def is_ipc_supported(self) -> bool:
        return False

    def cudart(self) -> None:
        return None
