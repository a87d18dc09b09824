"""The ``hf`` rollout for verl 0.9.1: a Ray server actor, its replica, and the in-worker adapter.

verl registers only vLLM, SGLang and TensorRT-LLM rollouts; none runs on CPU. This module mirrors the structure of
verl's vLLM server path (the methods verl calls by name on a server, a :class:`RolloutReplica`, a
:class:`BaseRollout` adapter inside the actor worker) around :class:`~recipe.spade.cpu.hf_engine.BatchedGenerator`.
Weights reach the server through verl's naive sync path: every rank consumes the parameter generator (it drives
FSDP collectives), and rollout rank 0 ships the full state dict through the Ray object store.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import AsyncIterator, Iterable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import ray
import torch
from verl.utils.config import omega_conf_to_dataclass
from verl.workers.rollout.base import BaseRollout
from verl.workers.rollout.replica import RolloutReplica, TokenOutput

from recipe.spade.cpu.hf_engine import BatchedGenerator, SamplingRequest
from recipe.spade.cpu.worker_priority import leave_ray_niceness

__all__ = [
    "HFReplica",
    "HFRolloutServer",
    "HFServerAdapter",
    "load_on_torch_thread",
    "prepare_generation_threads",
    "server_name",
]

logger = logging.getLogger(__name__)


def server_name(replica_rank: int, kind: str = "", suffix: str = "") -> str:
    """Ray actor name of a replica's server (``kind``: ``""``, ``"reward"`` or ``"teacher"``)."""
    return f"hf_server_{kind + '_' if kind else ''}{replica_rank}_0{suffix}"


def prepare_generation_threads(threads: int) -> None:
    """Make the calling thread, the server's one torch thread, generate with ``threads`` torch threads, un-niced.

    Its nice becomes the raylet's (0 unless the run was started under ``nice``; ``leave_ray_niceness``).

    Ray starts its workers at nice 15 (``RAY_worker_niceness``), below its own raylet and GCS and every process of
    the machine at the default 0: the server's OpenMP team then loses its CPUs mid-region and its other threads
    wait at the barrier. Linux nice is per thread and a new thread inherits its creator's, so the team this thread
    creates (at its first parallel region) inherits the priority set here. The plugin already does this for the
    thread that imported verl; this thread may be another. Lowering the nice value needs ``CAP_SYS_NICE``; without
    it the server keeps Ray's and logs so.
    """
    torch.set_num_threads(max(1, threads))
    leave_ray_niceness()


def load_on_torch_thread(path: str, threads: int, trust_remote_code: bool = False) -> tuple[Any, ThreadPoolExecutor]:
    """The fp32 model at ``path``, loaded on a new thread that then runs every torch call of the server.

    That thread is prepared first (:func:`prepare_generation_threads`), so its one OpenMP team has the priority and
    size set there; hand the executor to :class:`BatchedGenerator`.
    """
    from transformers import AutoModelForCausalLM

    torch_thread = ThreadPoolExecutor(max_workers=1, thread_name_prefix="hf-torch")
    torch_thread.submit(prepare_generation_threads, threads).result()
    model = torch_thread.submit(
        AutoModelForCausalLM.from_pretrained, path, dtype=torch.float32, attn_implementation="sdpa",
        trust_remote_code=trust_remote_code,
    ).result()  # fmt: skip
    return model, torch_thread


class HFRolloutServer:
    """One model served token-in/token-out. Runs as an async Ray actor; methods are called by name by verl."""

    def __init__(self, config: Any, model_config: Any, replica_rank: int = 0, max_batch: int = 32) -> None:
        from transformers import GenerationConfig

        self.config = omega_conf_to_dataclass(config)
        self.model_config = model_config
        path = getattr(model_config, "local_path", None) or model_config.path
        trust = bool(getattr(model_config, "trust_remote_code", False))
        # every torch call of the server on one thread of its own: one OpenMP team (BatchedGenerator), at nice 0
        model, torch_thread = load_on_torch_thread(path, int(os.environ.get("HF_ROLLOUT_THREADS", "1")), trust)
        gen = GenerationConfig.from_model_config(model.config)
        try:
            gen = GenerationConfig.from_pretrained(path)
        except OSError:
            pass
        eos = gen.eos_token_id if isinstance(gen.eos_token_id, list) else [gen.eos_token_id]
        pad = gen.pad_token_id if gen.pad_token_id is not None else eos[0]
        self.tied = bool(getattr(model.config, "tie_word_embeddings", False))
        # rollout.custom.hf_gather_s: how long a pending batch waits for the next request (BatchedGenerator)
        gather_s = float((self.config.custom or {}).get("hf_gather_s", 0.0))
        # rollout.custom.hf_pad_slack: padding a row may take beyond its own length in a batch (length_groups)
        pad_slack = int((self.config.custom or {}).get("hf_pad_slack", 256))
        self.engine = BatchedGenerator(model, [e for e in eos if e is not None], pad, max_batch=max_batch,
                                       gather_s=gather_s, executor=torch_thread, pad_slack=pad_slack)  # fmt: skip
        self.replica_rank = replica_rank
        self.global_steps: int | None = None
        # rollout.custom.hf_stats_path: a JSON-lines file that gets, at every weight sync (the end of a training
        # step), the generation work done since the previous one (benchmarks/bench_spade_step.py reads it)
        self.stats_path = (self.config.custom or {}).get("hf_stats_path")
        if self.stats_path:  # a path that cannot be written fails here, at start, not at the first step's sync
            try:
                open(self.stats_path, "a", encoding="utf-8").close()
            except OSError as exc:
                raise ValueError(f"rollout.custom.hf_stats_path={self.stats_path!r} cannot be written: {exc}") from exc
        self._reported = self._work()
        self.weight_version = 0

    async def generate(
        self,
        prompt_ids: list[int],
        sampling_params: dict[str, Any],
        request_id: str,
        image_data: Any = None,
        video_data: Any = None,
        audio_data: Any = None,
        mm_processor_kwargs: Any = None,
        priority: int = 0,
        **_: Any,
    ) -> TokenOutput:
        """Token-in/token-out generation; the length rules follow verl's vLLM server."""
        if image_data is not None or video_data is not None or audio_data is not None:
            raise ValueError("the hf rollout serves text models only")
        params = dict(sampling_params)
        request = SamplingRequest.from_params(prompt_ids, params, self.max_tokens(prompt_ids, params))
        result = await self.engine.generate(request)
        return TokenOutput(
            token_ids=result.token_ids,
            log_probs=result.log_probs,
            stop_reason="completed",
            extra_fields={"global_steps": self.global_steps},
        )

    def max_tokens(self, prompt_ids: list[int], params: dict[str, Any]) -> int:
        """How many tokens a request may generate (the rules of verl's vLLM server); pops the limit from ``params``."""
        room = self.config.max_model_len - len(prompt_ids) if self.config.max_model_len else None
        if "max_tokens" in params:
            max_tokens = params.pop("max_tokens")
            params.pop("max_new_tokens", None)
        elif "max_new_tokens" in params:
            max_tokens = params.pop("max_new_tokens")
        else:
            budget = self.config.prompt_length + self.config.response_length - len(prompt_ids)
            max_tokens = min(self.config.response_length, budget)
        if room is not None:
            if room < 1:
                raise ValueError(f"prompt of {len(prompt_ids)} tokens leaves no room within max_model_len")
            max_tokens = min(max_tokens, room)
        return max(1, int(max_tokens))

    async def update_weights(self, state_dict: dict[str, torch.Tensor]) -> int:
        """Load a full state dict from the actor; returns the new weight version."""
        await self.engine.load_weights(state_dict, tied_embeddings=self.tied)
        self.weight_version += 1
        logger.info("hf rollout %d: loaded %d tensors (weight version %d)", self.replica_rank, len(state_dict),
                    self.weight_version)  # fmt: skip
        return self.weight_version

    async def set_global_steps(self, global_steps: int) -> None:
        """Called after each weight sync with the step that just trained: its generation work goes to the stats file."""
        self.global_steps = global_steps
        if self.stats_path:
            now = self._work()
            line = {"step": global_steps, "replica": self.replica_rank,
                    **{k: round(v - self._reported[k], 4) for k, v in now.items()}}  # fmt: skip
            self._reported = now
            with open(self.stats_path, "a", encoding="utf-8") as out:
                out.write(json.dumps(line) + "\n")

    def _work(self) -> dict[str, float]:
        """The engine's work so far: requests, prompt tokens, generated tokens, seconds its torch thread ran."""
        e = self.engine
        return {"requests": e.requests_run, "prompt_tokens": e.prompt_tokens, "generated_tokens": e.generated_tokens,
                "busy_s": e.busy_s}  # fmt: skip

    async def stats(self) -> dict[str, float]:
        """Batching statistics (for tests and logs)."""
        return {"batches": self.engine.batches_run, "largest_batch": self.engine.largest_batch,
                "weight_version": self.weight_version, **self._work()}  # fmt: skip

    # Memory management and profiling calls that only make sense on accelerators: accepted, nothing to do.
    async def wake_up(self, tags: list[str] | None = None) -> None:
        return None

    async def sleep(self) -> None:
        return None

    async def clear_kv_cache(self) -> None:
        return None

    async def release_kv_cache(self) -> None:
        return None

    async def resume_kv_cache(self) -> None:
        return None

    async def wait_for_requests_to_drain(self) -> None:
        return None

    async def resume_generation(self) -> None:
        return None

    async def start_profile(self, **_: Any) -> None:
        return None

    async def stop_profile(self) -> None:
        return None

    async def abort_all_requests(self, reset_prefix_cache: bool = True, reject_request: bool = False) -> dict:
        return {"aborted_count": 0, "request_ids": []}

    async def abort_request(self, request_id: str, reset_prefix_cache: bool = True) -> dict:
        return {"aborted": False, "request_id": request_id}


class HFReplica(RolloutReplica):
    """One ``hf`` server per replica, in its own CPU actor (no accelerator, no HTTP: the address is the name)."""

    server_class: type = HFRolloutServer

    def rollout_worker_use_gpu(self) -> bool:
        return False

    async def launch_servers(self) -> None:
        if self.world_size != 1:
            raise ValueError(
                f"the hf rollout needs tensor/data/pipeline parallel size 1, got world size {self.world_size}"
            )
        kind = "reward" if self.is_reward_model else "teacher" if self.is_teacher_model else ""
        name = server_name(self.replica_rank, kind, self.name_suffix)
        actor = (
            ray.remote(self.server_class)
            .options(name=name, num_cpus=0, max_concurrency=self.max_concurrency)
            .remote(config=self.config, model_config=self.model_config, replica_rank=self.replica_rank)
        )
        self.servers = [actor]
        self._server_handle = actor
        self._server_address = name


class HFServerAdapter(BaseRollout):
    """The rollout object inside each actor worker: forwards weight updates to its replica's server."""

    def __init__(self, config: Any, model_config: Any, device_mesh: Any, replica_rank: int = -1) -> None:
        super().__init__(config, model_config, device_mesh)
        world = (self.config.tensor_model_parallel_size * self.config.data_parallel_size
                 * self.config.pipeline_model_parallel_size)  # fmt: skip
        rank = int(os.environ.get("RANK", "0"))
        self.replica_rank = rank // world if replica_rank == -1 else replica_rank
        self.rollout_rank = rank % world
        self._server: Any = None

    def _server_handle(self) -> Any:
        if self._server is None:
            self._server = ray.get_actor(server_name(self.replica_rank))
        return self._server

    async def resume(self, tags: list[str]) -> None:
        return None

    async def release(self) -> None:
        return None

    @torch.no_grad()
    async def update_weights(
        self,
        weights: Iterable[tuple[str, torch.Tensor]] | AsyncIterator[tuple[str, torch.Tensor]],
        global_steps: int | None = None,
        wire_format: str = "named_tensors",
        **kwargs: Any,
    ) -> None:
        """Consume the whole generator on every rank; rollout rank 0 sends the full fp32 state dict."""
        if wire_format != "named_tensors":
            raise NotImplementedError(f"the hf rollout accepts wire_format='named_tensors', got {wire_format!r}")
        if kwargs.get("peft_config") is not None:
            raise NotImplementedError("LoRA adapters are not supported by the hf rollout; set lora.merge=True")
        state: dict[str, torch.Tensor] = {}
        if hasattr(weights, "__aiter__"):
            async for name, tensor in weights:  # type: ignore[union-attr]
                state[name] = tensor.detach().to("cpu", torch.float32).clone()
        else:
            for name, tensor in weights:  # type: ignore[union-attr]
                state[name] = tensor.detach().to("cpu", torch.float32).clone()
        if self.rollout_rank != 0:
            return
        server = self._server_handle()
        await server.update_weights.remote(state)
        if global_steps is not None:
            await server.set_global_steps.remote(global_steps)
