"""Every GPU launcher carries the settings a first GPU run needs (issue "Ready for the first GPU run").

No GPU has been lent to this project, so these settings are pinned by composing each launcher's real overrides
(``DRY_RUN=1``, the machinery of ``test_launchers.py``) against verl 0.9.1's config and checking them against facts
of verl 0.9.1's code, each cited where it is checked. Every ``*.sh`` under ``examples/`` (outside ``examples/lib``)
whose overrides do not select the CPU backend is a GPU launcher, so launchers added later are covered without
editing this file. The extras check reads package metadata only; nothing here installs or needs a GPU package.
"""

from __future__ import annotations

import importlib.metadata
import inspect
import json
import math
import os
import re
import shutil
import subprocess
import sys
from functools import cache
from pathlib import Path

import pytest
import torch
from packaging.requirements import Requirement
from tensordict import TensorDict
from test_launchers import SCRIPTS, SHARED, composed, dry_run

from recipe.spade.budget import designer_rows
from spade_envs.sandbox import SandboxConfig

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"
ENV = SHARED  # shared-storage stand-ins: the multinode launcher refuses relative or unset paths
# verl's wheel index: [[tool.uv.index]] name = "verl-wheelhouse" in verl's pyproject.toml (not in the wheel), the
# only index that serves flash-attn 2.8.3 (cp312, CUDA 13, torch 2.11), apex, transformer-engine and
# megatron-bridge 0.5.2 as verl routes them ([tool.uv.sources]).
VERL_WHEEL_INDEX = "https://verl-project.github.io/verl-wheelhouse/simple/"
TORCH_CU130_INDEX = "https://download.pytorch.org/whl/cu130"


@cache
def plan(script: str) -> tuple[str, tuple[str, ...]]:
    """The launcher's config name and overrides (DRY_RUN=1), with shared-storage paths set."""
    config_name, overrides = dry_run(script, **ENV)
    return config_name, tuple(overrides)


@cache
def config_of(script: str):
    """The launcher's composed config, once per test session (read, never changed, by the tests)."""
    config_name, overrides = plan(script)
    return composed(config_name, list(overrides))


def is_gpu_launcher(script: str) -> bool:
    try:
        return "backend=cpu" not in plan(script)[1]
    except AssertionError:  # a launcher that cannot even print its plan fails test_gpu_launcher_is_ready
        return True


GPU_LAUNCHERS = [s for s in SCRIPTS if is_gpu_launcher(s)]


def designer_episodes_per_sample(cfg) -> int:
    """Sandboxed episodes one designer sample holds at once: its measurement plays, every arm on all seeds at once.

    (``SpadeDesignerLoop._measure`` gathers ``3 x plays_per_arm`` plays with the placebo arm, ``2 x`` without;
    validation and hint vetting before it use one sandbox at a time.)
    """
    return (3 if cfg.spade.hint.placebo else 2) * cfg.spade.plays_per_arm


def worst_worker_load(cfg) -> tuple[int, int]:
    """The most sandboxed episodes one agent-loop worker can hold at once, and its sandbox's slots.

    verl 0.9.1 (``AgentLoopManagerTQ.generate_sequences``) splits a step's rows with ``TensorDict.chunk(num_workers)``
    into contiguous chunks; a worker runs ``rollout.n`` samples of every row of its chunk at once. The worst chunk
    holds as many of the step's designer rows (``envs_per_regen / rollout.n``) as it can, whatever the row order.
    """
    rows = cfg.data.train_batch_size
    chunks = TensorDict({"row": torch.arange(rows)}, batch_size=[rows]).chunk(
        cfg.actor_rollout_ref.rollout.agent.num_workers
    )
    biggest = max(len(c) for c in chunks)
    n = cfg.actor_rollout_ref.rollout.n
    designers = min(biggest, designer_rows(cfg.spade, n))
    load = designers * n * designer_episodes_per_sample(cfg) + (biggest - designers) * n
    return load, SandboxConfig.from_dict(cfg.spade.sandbox).max_workers


def readiness_problems(cfg) -> list[str]:
    """What in a composed config would fail or waste a GPU run; empty when ready."""
    problems = []
    rollout, actor, model = cfg.actor_rollout_ref.rollout, cfg.actor_rollout_ref.actor, cfg.actor_rollout_ref.model
    # vLLM takes the model's max_position_embeddings when unset (vllm_async_server._validate_configs) and sizes its
    # KV cache for it; an episode never needs more than prompt + response.
    if rollout.max_model_len != rollout.prompt_length + rollout.response_length:
        problems.append(f"rollout.max_model_len={rollout.max_model_len}, not prompt + response")
    # The agent loops template with data.apply_chat_template_kwargs (AgentLoopBase.__init__); Qwen3-8B thinks unless
    # told not to, and a thinking agent belongs in the recipe's per-turn mode (spade.agent.thinking, which renders the
    # agent's turns with enable_thinking=true itself), never on one growing sequence.
    if cfg.data.apply_chat_template_kwargs.get("enable_thinking") is not False:
        problems.append("data.apply_chat_template_kwargs.enable_thinking is not explicitly false")
    load, slots = worst_worker_load(cfg)
    if load > slots:
        problems.append(f"an agent-loop worker can hold {load} sandboxed episodes at once, its sandbox {slots}")
    if not (isinstance(cfg.trainer.max_actor_ckpt_to_keep, int) and cfg.trainer.max_actor_ckpt_to_keep > 0):
        problems.append("trainer.max_actor_ckpt_to_keep is unset: checkpoints are never pruned")
    if "hf_model" not in actor.checkpoint.save_contents:
        problems.append("actor.checkpoint.save_contents has no hf_model: no HF weights for spade-eval")
    if actor.strategy == "megatron":
        # model.enable_gradient_checkpointing reaches only the FSDP/veomni engines; Megatron recomputes only through
        # override_transformer_config (null in engine/megatron.yaml).
        recompute = actor.megatron.override_transformer_config
        if (recompute.recompute_granularity, recompute.recompute_method, recompute.recompute_num_layers) != (
            "full",
            "uniform",
            1,
        ):
            problems.append("Megatron without full uniform recompute of every layer")
        if not model.use_fused_kernels:
            problems.append("Megatron without model.use_fused_kernels: the logits of a whole pack materialise")
    return problems


def test_gpu_launchers_are_found():
    assert {"run_spade_30b.sh", "run_spade_8b.sh", "run_spade_4b.sh", "run_spade_fixed_env.sh",
            "run_spade_multinode.sh", "gpu_smoke.sh"} <= set(GPU_LAUNCHERS)  # fmt: skip
    assert "run_spade_tiny_cpu.sh" not in GPU_LAUNCHERS


@pytest.mark.parametrize("script", GPU_LAUNCHERS)
def test_gpu_launcher_is_ready(script):
    cfg = config_of(script)
    assert readiness_problems(cfg) == []
    assert cfg.trainer.save_freq > 0


@pytest.mark.parametrize(
    ("script", "pin", "problem"),
    [
        ("run_spade_30b.sh", "actor_rollout_ref.rollout.max_model_len=", "max_model_len"),
        ("run_spade_30b.sh", "++data.apply_chat_template_kwargs.enable_thinking=", "enable_thinking"),
        ("run_spade_30b.sh", "actor_rollout_ref.rollout.agent.num_workers=", "sandboxed episodes"),
        ("run_spade_30b.sh", "trainer.max_actor_ckpt_to_keep=", "never pruned"),
        ("run_spade_30b.sh", "actor_rollout_ref.actor.checkpoint.save_contents=", "hf_model"),
        ("run_spade_30b.sh", "actor_rollout_ref.model.use_fused_kernels=", "fused_kernels"),
        (
            "run_spade_30b.sh",
            "actor_rollout_ref.actor.megatron.override_transformer_config.recompute_gran",
            "recompute",
        ),
        (
            "run_spade_30b.sh",
            "actor_rollout_ref.actor.megatron.override_transformer_config.recompute_meth",
            "recompute",
        ),
        ("run_spade_30b.sh", "actor_rollout_ref.actor.megatron.override_transformer_config.recompute_num", "recompute"),
        ("run_spade_8b.sh", "actor_rollout_ref.rollout.max_model_len=", "max_model_len"),
        ("run_spade_8b.sh", "++data.apply_chat_template_kwargs.enable_thinking=", "enable_thinking"),
        ("run_spade_8b.sh", "actor_rollout_ref.rollout.agent.num_workers=", "sandboxed episodes"),
        ("run_spade_8b.sh", "trainer.max_actor_ckpt_to_keep=", "never pruned"),
        ("run_spade_8b.sh", "actor_rollout_ref.actor.checkpoint.save_contents=", "hf_model"),
        ("gpu_smoke.sh", "actor_rollout_ref.rollout.max_model_len=", "max_model_len"),
    ],
)
def test_removing_a_pinned_setting_fails_the_check(script, pin, problem):
    config_name, overrides = plan(script)
    kept = [o for o in overrides if not o.startswith(pin)]
    assert len(kept) == len(overrides) - 1, f"{script} has no single {pin}"
    problems = readiness_problems(composed(config_name, kept))
    assert any(problem in p for p in problems), problems


def test_a_sandbox_too_small_for_the_workers_fails_the_check():
    config_name, overrides = plan("run_spade_30b.sh")
    problems = readiness_problems(composed(config_name, [*overrides, "++spade.sandbox.max_workers=64"]))
    assert any("sandboxed episodes" in p for p in problems), problems


def test_the_launcher_sizes_agent_workers_from_the_sandbox_slots():
    cfg = config_of("run_spade_30b.sh")
    load, slots = worst_worker_load(cfg)
    assert load <= slots < 2 * load  # as few workers as the slots allow (24 rows, 192 episodes a designer row)
    config_name, overrides = dry_run("run_spade_30b.sh", SANDBOX_SLOTS="512", **ENV)
    more_slots = composed(config_name, overrides)
    assert more_slots.actor_rollout_ref.rollout.agent.num_workers < cfg.actor_rollout_ref.rollout.agent.num_workers
    assert worst_worker_load(more_slots)[0] <= 512


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({"SANDBOX_SLOTS": "100"}, "more than the 100 slots"),
        ({"AGENT_WORKERS": "4"}, "AGENT_WORKERS=4 is too few"),
    ],
)
def test_the_launcher_refuses_a_worker_count_the_sandbox_cannot_hold(env, message):
    out = subprocess.run(["bash", str(EXAMPLES / "run_spade_30b.sh")], capture_output=True, text=True, timeout=60,
                         env={**os.environ, "DRY_RUN": "1", **env})  # fmt: skip
    assert out.returncode != 0 and message in out.stderr


# --- multinode: checkpoints and corpus on shared storage ---------------------------------------------------------


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({}, "RUN_DIR must be set to an absolute path"),
        ({"RUN_DIR": "runs/x", "CORPUS": "/shared/c.jsonl"}, "RUN_DIR=runs/x is not an absolute path"),
        ({"RUN_DIR": "/shared/run"}, "CORPUS must be set to an absolute path"),
        ({"RUN_DIR": "/shared/run", "CORPUS": "examples/data/sample_corpus.jsonl"}, "is not an absolute path"),
    ],
)
def test_multinode_refuses_paths_that_are_not_shared(env, message):
    clean = {k: v for k, v in os.environ.items() if k not in ("RUN_DIR", "CORPUS")}
    out = subprocess.run(["bash", str(EXAMPLES / "run_spade_multinode.sh")], capture_output=True, text=True,
                         timeout=60, env={**clean, "DRY_RUN": "1", **env})  # fmt: skip
    assert out.returncode != 0 and message in out.stderr


def test_multinode_sends_the_shared_paths_and_knobs_to_the_job():
    env = {**ENV, "DRY_RUN": "1", "MODEL_PATH": "/models/q30b", "STEPS": "12", "KL": "0.01", "PYTHON": sys.executable}
    out = subprocess.run(["bash", str(EXAMPLES / "run_spade_multinode.sh"), "trainer.save_freq=4"],
                         capture_output=True, text=True, timeout=300, env={**os.environ, **env})  # fmt: skip
    assert out.returncode == 0, out.stderr[-2000:]
    submit = out.stdout.split("== submit (DRY_RUN) ==\n", 1)[1].splitlines()[0]
    assert "--working-dir ." in submit
    # KL is a knob of the paper's table (examples/lib/paper.sh), not of run_spade_30b.sh itself
    for knob in ("RUN_DIR=/shared/spade-run", "CORPUS=/shared/corpus.jsonl", "MODEL_PATH=/models/q30b", "STEPS=12",
                 "KL=0.01"):  # fmt: skip
        assert f" {knob} " in submit
    command = submit.split(" # runtime_env env_vars: ", 1)[0]  # the names of what goes in the job's runtime_env follow
    assert command.rstrip().endswith("bash examples/run_spade_30b.sh trainer.save_freq=4")
    assert "\nactor_rollout_ref.actor.kl_loss_coef=0.01\n" in out.stdout  # the job's plan uses the forwarded knob
    cfg = config_of("run_spade_multinode.sh")
    assert cfg.trainer.default_local_dir == "/shared/spade-run/ckpt"
    assert cfg.spade.run_dir == "/shared/spade-run/spade" and cfg.spade.corpus == "/shared/corpus.jsonl"


# --- install: the extras resolve the kernels the engines ask for ------------------------------------------------


def our_extras() -> dict[str, list[str]]:
    """setup.py's extras_require, read by running setup.py with setuptools.setup captured (in a subprocess)."""
    code = (
        "import json, runpy, setuptools\n"
        "got = {}\n"
        "setuptools.setup = lambda **kw: got.update(kw)\n"
        "runpy.run_path('setup.py', run_name='setup_check')\n"
        "print(json.dumps(got['extras_require']))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr[-2000:]
    return json.loads(out.stdout)


def resolve(requirements: list[str]) -> dict[str, set[str]]:
    """Package name -> specifiers, following verl's own extras through verl 0.9.1's installed metadata."""
    out: dict[str, set[str]] = {}
    verl_requires = [Requirement(r) for r in importlib.metadata.requires("verl")]
    seen: set[str] = set()

    def add(req: Requirement) -> None:
        name = req.name.lower().replace("_", "-")
        out.setdefault(name, set()).add(str(req.specifier))
        if name != "verl":
            return
        for extra in req.extras - seen:
            seen.add(extra)
            for sub in verl_requires:
                if sub.marker is not None and sub.marker.evaluate({"extra": extra}):
                    add(Requirement(str(sub).split(";")[0]))

    for text in requirements:
        add(Requirement(text))
    return out


def test_verl_extras_metadata_is_what_the_install_relies_on():
    assert importlib.metadata.version("verl") == "0.9.1"
    fsdp, megatron = resolve(["verl[fsdp]"]), resolve(["verl[megatron]"])
    assert fsdp["flash-attn"] == {"==2.8.3"} and megatron["flash-attn"] == {"==2.8.3"}
    assert megatron["megatron-bridge"] == {"==0.5.2"}
    assert "flash-attn" not in resolve(["verl[vllm]"]), "verl[vllm] alone has no flash-attn"


def test_gpu_extra_resolves_the_attention_kernel_the_fsdp_engine_loads():
    from verl.workers.config import model as hf_model_config

    # HFModelConfig builds the HF config with attn_implementation from override_config, defaulting to FA2.
    assert '"attn_implementation", "flash_attention_2"' in inspect.getsource(hf_model_config)
    gpu = resolve(our_extras()["gpu"])
    assert gpu["flash-attn"] == {"==2.8.3"}
    assert gpu["vllm"] == {"==0.24.0"} and gpu["torch"] == {"==2.11.0"}


def test_megatron_extra_is_verls_megatron_extra_less_megatron_bridge():
    ours = resolve(our_extras()["gpu"] + our_extras()["megatron"])
    verls = resolve(["verl[megatron]"])
    missing = set(verls) - set(ours) - {"megatron-bridge"}
    assert not missing, f"verl[megatron] needs {missing}, which the megatron extra leaves out"
    for name, specs in verls.items():
        if name in ours and specs != {""}:
            assert ours[name] >= specs or name == "megatron-core", (name, ours[name], specs)
    # megatron-bridge 0.5.2 pairs with megatron-core 0.18.0 (verl's pyproject: "bump the two together").
    assert ours["megatron-core"] == {"==0.18.0"}
    assert ours["flash-attn"] == {"==2.8.3"}
    assert "megatron-bridge" not in ours, "installed --no-deps from verl's wheel index (docs/gpu.md)"


# --- docs: the install commands ---------------------------------------------------------------------------------


def install_block(path: Path) -> str:
    match = re.search(r"<!-- gpu-install -->\n```bash\n(.*?)```", path.read_text(), re.DOTALL)
    assert match, f"{path.name} has no <!-- gpu-install --> block"
    return match.group(1)


def test_readme_gpu_install_is_docs_gpu_install():
    assert install_block(ROOT / "README.md") == install_block(ROOT / "docs" / "gpu.md")


def test_gpu_install_commands_use_verls_wheel_index_and_the_extras():
    block = install_block(ROOT / "docs" / "gpu.md")
    commands = [c for c in block.replace("\\\n", " ").splitlines() if c.strip() and not c.startswith("#")]
    assert any("python3.12 -m venv" in c for c in commands)
    wheelhouse = [c for c in commands if f"--index-url {VERL_WHEEL_INDEX}" in c]
    assert any("--no-deps" in c and '"flash-attn==2.8.3"' in c for c in wheelhouse)
    assert any("--no-deps" in c and '"megatron-bridge==0.5.2"' in c and "apex" in c and "transformer-engine" in c
               for c in wheelhouse)  # fmt: skip
    extras = [c for c in commands if "pip install -e" in c]
    assert any('".[gpu]"' in c and TORCH_CU130_INDEX in c for c in extras)
    assert any('".[gpu,megatron]"' in c and TORCH_CU130_INDEX in c for c in extras)
    # the wheelhouse wheels go in first, so pip finds flash-attn 2.8.3 installed instead of building PyPI's sdist
    first_extra = commands.index(extras[0])
    assert any(commands.index(c) < first_extra for c in wheelhouse if "flash-attn" in c)


def test_gpu_doc_budgets_every_gpu_launcher_and_says_what_ran():
    # docs/gpu.md budgets the engine launchers; docs/paper.md maps each paper run and ablation onto one of them.
    gpu, paper = (ROOT / "docs" / "gpu.md").read_text(), (ROOT / "docs" / "paper.md").read_text()
    for script in GPU_LAUNCHERS:
        assert f"`{Path(script).name}`" in gpu or f"`examples/{script}`" in paper, f"no doc mentions {script}"
    assert "has not run on a GPU" in gpu


def test_sizing_helper_gives_the_fewest_workers_whose_worst_chunk_fits():
    # spade_agent_workers: the fewest workers W (never below verl's default of 8) such that a chunk of
    # ceil(rows / W) rows, holding as many of the designer rows as it can, fits in the sandbox slots.
    def load(chunk: int, designers: int, n: int, plays: int) -> int:
        d = min(chunk, designers)
        return d * n * 3 * plays + (chunk - d) * n  # no hint, hint, placebo

    for rows, designers, n, plays, slots in [(24, 3, 8, 8, 256), (24, 3, 8, 8, 512), (24, 0, 8, 8, 256),
                                            (16, 1, 16, 2, 256), (3, 1, 2, 2, 256), (100, 50, 4, 4, 100),
                                            (200, 2, 4, 4, 64)]:  # fmt: skip
        out = subprocess.run(["bash", "-c", f"source {EXAMPLES}/lib/launch.sh; spade_agent_workers "
                              f"{rows} {designers} {n} {plays} {slots}"], capture_output=True, text=True)  # fmt: skip
        fewest = next(w for w in range(1, rows + 1) if load(math.ceil(rows / w), designers, n, plays) <= slots)
        assert int(out.stdout) == max(8, fewest), (rows, designers, n, plays, slots)


# --- gpu_smoke.sh's models, built and loaded for real ----------------------------------------------------------


@pytest.mark.parametrize(("kind", "arch"), [("dense", "Qwen3ForCausalLM"), ("moe", "Qwen3MoeForCausalLM")])
def test_smoke_models_build_in_code_and_load(tmp_path, kind, arch):
    from transformers import AutoConfig, AutoTokenizer

    out = subprocess.run([sys.executable, str(EXAMPLES / "lib" / "smoke_models.py"), kind, str(tmp_path / kind)],
                         capture_output=True, text=True, timeout=300, cwd=ROOT)  # fmt: skip
    assert out.returncode == 0, out.stderr[-2000:]
    config = AutoConfig.from_pretrained(tmp_path / kind)
    assert config.architectures == [arch] and config.head_dim == 64  # a head size every GPU attention kernel takes
    # gpu_smoke.sh's prompt + response must fit the positions vLLM is allowed (max_model_len <= max positions).
    cfg = config_of("gpu_smoke.sh")
    assert cfg.actor_rollout_ref.rollout.max_model_len <= config.max_position_embeddings
    tokenizer = AutoTokenizer.from_pretrained(tmp_path / kind)
    prompt = tokenizer.apply_chat_template([{"role": "user", "content": "hi"}], tokenize=False,
                                           add_generation_prompt=True, enable_thinking=False)  # fmt: skip
    assert prompt.endswith("<|im_start|>assistant\n<think>\n\n</think>\n\n")
    if kind == "moe":
        assert (config.num_experts, config.num_experts_per_tok) == (4, 2)


def test_gpu_smoke_ends_with_one_fail_line_when_it_cannot_run(tmp_path):
    def smoke(**env: str) -> tuple[int, str]:
        env = {**os.environ, "RUN_DIR": str(tmp_path / "run"), "PYTHON": sys.executable, **env}
        out = subprocess.run(["bash", str(EXAMPLES / "gpu_smoke.sh")], capture_output=True, text=True, timeout=300,
                             env=env)  # fmt: skip
        return out.returncode, out.stdout.strip().splitlines()[-1]

    assert smoke(MODE="bogus") == (1, "GPU SMOKE FAIL: MODE must be fsdp or megatron, got 'bogus'")
    if shutil.which("nvidia-smi") is None:  # this machine (and CI): the model is built, then no GPU is found
        rc, last = smoke()
        assert rc == 1 and last.startswith("GPU SMOKE FAIL: mode=fsdp: nvidia-smi failed: no GPU visible")
        assert (tmp_path / "run" / "model-dense" / "config.json").exists()
