"""vLLM admits every request of a regeneration step's measurement peak at once (review 3, issue 37).

At the peak every episode of the step is in flight: every arm of every design's measurement plays and every agent
sample (``recipe.spade.gpu_memory.peak_episodes``: 744 for the paper's 30B and 8B runs), one request at a time each.
verl's load balancer spreads them over the vLLM engines (least in-flight first, ``GlobalRequestLoadBalancer``), so
each engine gets about ``744 / engines`` at once: 372 on the 30B's two engines, above verl's ``rollout.max_num_seqs``
of 256 (``rollout.yaml``), which would leave the rest queued behind the running ones.

What vLLM receives: verl 0.9.1's ``vLLMHttpServer.launch_server`` builds its engine arguments as one dict literal from
the typed ``RolloutConfig`` (``self.config``), then the ``engine_kwargs.vllm`` overrides. vLLM itself cannot be
imported here, so the test evaluates that very dict literal, read from verl's source, with the launcher's
``RolloutConfig`` as ``self.config``; only the other names it reads (the replica's rank, the quantization and
generation-config helpers' results) are stand-ins.
"""

from __future__ import annotations

import ast
import importlib.util
import json
import math
import types
from pathlib import Path

import pytest
from test_gpu_readiness import ENV, GPU_LAUNCHERS, config_of, plan
from test_launchers import composed, dry_run
from verl.utils.config import omega_conf_to_dataclass

from recipe.spade.gpu_memory import peak_episodes

SERVER = Path(importlib.util.find_spec("verl").submodule_search_locations[0]) / (
    "workers/rollout/vllm_rollout/vllm_async_server.py"
)
VERL_MAX_NUM_SEQS = 256  # verl 0.9.1's trainer/config/rollout/rollout.yaml


def launch_server_args(cfg) -> dict:
    """The engine arguments ``launch_server`` hands vLLM for this composed config (before the DP / EP updates)."""
    tree = ast.parse(SERVER.read_text())
    method = next(n for n in ast.walk(tree) if isinstance(n, ast.AsyncFunctionDef) and n.name == "launch_server")
    literal = next(n.value for n in ast.walk(method) if isinstance(n, ast.Assign)
                   and [t.id for t in n.targets if isinstance(t, ast.Name)] == ["args"]
                   and isinstance(n.value, ast.Dict))  # fmt: skip
    rollout = omega_conf_to_dataclass(cfg.actor_rollout_ref.rollout)
    engine_kwargs = {k: v for k, v in (rollout.engine_kwargs.get("vllm") or {}).items() if v is not None}
    server = types.SimpleNamespace(config=rollout, model_config=types.SimpleNamespace(trust_remote_code=False),
                                   replica_rank=0, _get_worker_extension_cls=lambda: None)  # fmt: skip
    names = {"self": server, "engine_kwargs": engine_kwargs, "json": json, "override_generation_config": {},
             "quantization": None, "hf_overrides": None, "compilation_config": "{}"}  # fmt: skip
    return eval(compile(ast.Expression(literal), str(SERVER), "eval"), names)  # noqa: S307 - verl's own literal


def requests_per_engine(cfg) -> int:
    rollout = cfg.actor_rollout_ref.rollout
    engines = cfg.trainer.nnodes * cfg.trainer.n_gpus_per_node // rollout.tensor_model_parallel_size
    return math.ceil(peak_episodes(cfg) / engines)


@pytest.mark.parametrize("script", GPU_LAUNCHERS)
def test_vllm_admits_the_measurement_peak_at_once(script):
    cfg = config_of(script)
    args = launch_server_args(cfg)
    assert args["max_num_seqs"] >= requests_per_engine(cfg)
    assert args["max_num_seqs"] == max(VERL_MAX_NUM_SEQS, requests_per_engine(cfg))


def test_the_30b_engines_take_372_requests_each():
    cfg = config_of("run_spade_30b.sh")
    assert peak_episodes(cfg) == 744 and requests_per_engine(cfg) == 372
    assert launch_server_args(cfg)["max_num_seqs"] == 372
    config_name, overrides = plan("run_spade_30b.sh")  # without the launcher's pin: verl's 256
    unpinned = composed(config_name, [o for o in overrides if not o.startswith("actor_rollout_ref.rollout.max_num")])
    assert launch_server_args(unpinned)["max_num_seqs"] == VERL_MAX_NUM_SEQS


@pytest.mark.parametrize(("env", "engines", "expected"), [
    ({"GEN_TP": "2"}, 4, VERL_MAX_NUM_SEQS),  # four engines of 186: verl's 256 is enough
    ({"GEN_DP": "2"}, 2, 372),  # one replica of TP4 x DP2: two DP engines, each its own scheduler
    ({"NNODES": "2"}, 4, VERL_MAX_NUM_SEQS),
])  # fmt: skip
def test_the_30b_launcher_sizes_max_num_seqs_from_its_layout(env, engines, expected):
    cfg = composed(*dry_run("run_spade_30b.sh", **ENV, **env))
    rollout = cfg.actor_rollout_ref.rollout
    assert cfg.trainer.nnodes * cfg.trainer.n_gpus_per_node // rollout.tensor_model_parallel_size == engines
    assert launch_server_args(cfg)["max_num_seqs"] == expected
