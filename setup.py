"""Packaging for spade-verl: the SPADE self-play recipe for verl 0.9.1 and its framework-free core."""

from setuptools import find_namespace_packages, setup

# verl 0.9.1's `megatron` extra, spelled out without megatron-bridge (see extras_require below).
MEGATRON = [
    "verl[verl-core,flash-attn-cu130torch211,cupy-cu130,mcore]==0.9.1",
    "torch==2.11.0",
    "torchvision==0.26.0",
    "torchaudio==2.11.0",
    "nvidia-mathdx",
    "apex",
    "transformer-engine",
    "onnxscript",
    "trl==0.27.0",
    "matplotlib",
    "liger-kernel>=0.8.2",
    "megatron-core==0.18.0",
    "nvidia-modelopt==0.44.0",
]

setup(
    name="spade-verl",
    version="0.1.0",
    description="SPADE self-play environment design for LLM reinforcement learning, as a verl 0.9.1 recipe",
    long_description=open("README.md", encoding="utf-8").read(),
    long_description_content_type="text/markdown",
    license="Apache-2.0",
    python_requires=">=3.10,<3.13",
    # `recipe` is a namespace package: TransferQueue (a verl dependency) also installs a top-level `recipe`.
    packages=find_namespace_packages(include=["spade_envs", "spade_envs.*", "recipe.spade", "recipe.spade.*"]),
    package_data={
        "recipe.spade": ["REQUIRED_VERL.txt", "config/*.yaml", "config/*/*.yaml"],
        "spade_envs.design.prompts": ["templates/*.md", "templates/*.txt"],
        "spade_envs.evaluation": ["data/*.json"],
    },
    install_requires=[
        "verl[verl-core]==0.9.1",
        "gymnasium>=1.0",
        "omegaconf",
        # seccomp filters for sandbox workers (ctypes over libseccomp2); Debian's python3-seccomp is used when present.
        "pyseccomp; sys_platform == 'linux'",
        # verl 0.9.1 imports these in its server and agent-loop code but does not declare them in a plain install.
        "cachetools",
        "fastapi",
        "uvicorn",
        # RLVE's verifiable environments (module `Gym`, pure Python, no declared dependencies) for the RLVE baseline.
        "rlve-gym==0.0.1",
    ],
    extras_require={
        # Offline scorers of the evaluation suites (spade-eval). math-verify's antlr extra matches omegaconf's pin.
        # Plots of the curriculum simulator (spade-envs simulate); without it the simulator writes CSV only.
        "sim": ["matplotlib>=3.8"],
        "eval": ["reasoning-gym==0.1.25", "math-verify[antlr4_9_3]==0.9.0"],
        "test": [
            "pytest",
            "pytest-asyncio",
            # `make test` runs the suite on two workers (Makefile: PYTEST_WORKERS).
            "pytest-xdist",
            "hypothesis",
            "ruff",
            "reasoning-gym==0.1.25",
            "math-verify[antlr4_9_3]==0.9.0",
        ],
        # GPU hosts (Python 3.12, CUDA 13): verl's vLLM rollout pins (vllm 0.24, torch 2.11, transformers 5.9) and its
        # FSDP engine pins, which bring flash-attn 2.8.3: the FSDP engine loads models with flash_attention_2. That
        # wheel comes only from verl's wheel index; docs/gpu.md has the exact commands.
        "gpu": ["verl[vllm,fsdp]==0.9.1"],
        # Megatron engine (the 30B launcher), on top of `gpu`: verl[megatron]'s requirements except megatron-bridge
        # 0.5.2, which verl installs without its dependencies from its wheel index (its own metadata pulls a
        # conflicting transformers and NeMo stack) and pairs with megatron-core 0.18.0 (verl's pyproject); apex and
        # transformer-engine also come from that index first (docs/gpu.md). megatron-core >= 0.17 needs Python 3.12.
        "megatron": MEGATRON,
    },
    entry_points={
        "console_scripts": [
            "spade-envs=spade_envs.cli:entrypoint",
            "spade-eval=spade_envs.evaluation.cli:entrypoint",
        ],
        # verl imports this in every process: it registers the `cpu` platform and the `hf` rollout, and patches
        # verl for CPU only when VERL_PLATFORM=cpu (recipe/spade/cpu/plugin.py).
        "verl.plugins": ["spade_cpu=recipe.spade.cpu.plugin"],
    },
)
