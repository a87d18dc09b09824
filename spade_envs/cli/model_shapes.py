"""Model shapes that memory and disk plans need, without the model: the fields of a Qwen3 ``config.json``.

``recipe.spade.gpu_memory`` computes docs/gpu.md's memory table from them, and ``spade-envs doctor --launcher``
the disk a run's checkpoints take. The paper's three models are listed (their public ``config.json``), so a plan
needs no download; any other model is read from its local folder.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

__all__ = ["SHAPES", "ModelShape", "checkpoint_bytes", "shape_of"]


@dataclass(frozen=True)
class ModelShape:
    """What memory depends on in a Qwen3 (dense or MoE) decoder: the fields of its ``config.json``."""

    hidden: int
    layers: int
    heads: int
    kv_heads: int
    head_dim: int
    vocab: int
    tied: bool
    ffn: int = 0  # dense MLP width (0 for an all-MoE model)
    experts: int = 0
    topk: int = 0
    expert_ffn: int = 0

    @property
    def expert_params(self) -> int:
        return self.layers * self.experts * 3 * self.hidden * self.expert_ffn

    @property
    def dense_params(self) -> int:
        """Everything but the experts: attention, dense MLP, router, norms, embeddings."""
        attn = 2 * self.hidden * self.heads * self.head_dim + 2 * self.hidden * self.kv_heads * self.head_dim
        per_layer = attn + 3 * self.hidden * self.ffn + self.experts * self.hidden + 2 * self.hidden
        return self.layers * per_layer + (1 if self.tied else 2) * self.vocab * self.hidden

    @property
    def params(self) -> int:
        return self.expert_params + self.dense_params


# The public config.json of each paper model (Hugging Face), for plans without a local copy of it.
SHAPES = {
    "Qwen/Qwen3-30B-A3B-Instruct-2507": ModelShape(2048, 48, 32, 4, 128, 151936, False, 0, 128, 8, 768),
    "Qwen/Qwen3-8B": ModelShape(4096, 36, 32, 8, 128, 151936, False, 12288),
    "Qwen/Qwen3-4B-Instruct-2507": ModelShape(2560, 36, 32, 8, 128, 151936, True, 9728),
}


def shape_of(model_path: str) -> ModelShape:
    """The shape of a paper model, or read from a local model folder's ``config.json``."""
    local = Path(model_path).expanduser() / "config.json"
    if local.is_file():
        c = json.loads(local.read_text())
        return ModelShape(c["hidden_size"], c["num_hidden_layers"], c["num_attention_heads"], c["num_key_value_heads"],
                          c.get("head_dim") or c["hidden_size"] // c["num_attention_heads"], c["vocab_size"],
                          bool(c.get("tie_word_embeddings")), c.get("intermediate_size", 0) if not c.get("num_experts")
                          else 0, c.get("num_experts", 0), c.get("num_experts_per_tok", 0),
                          c.get("moe_intermediate_size", 0))  # fmt: skip
    if model_path in SHAPES:
        return SHAPES[model_path]
    raise ValueError(
        f"no shape for {model_path!r}: give a local model folder (with config.json) or one of {list(SHAPES)}"
    )


def checkpoint_bytes(params: int, strategy: str, save_contents: Iterable[str]) -> int:
    """Bytes of one actor checkpoint with these ``save_contents``.

    Megatron (``use_dist_checkpointing=false``): the optimizer's fp32 master, m and v (12 bytes a parameter) and bf16
    HF weights once for ``model`` and ``hf_model`` (2). FSDP: fp32 parameter shards for ``model`` (4), Adam m and v
    (8), bf16 HF weights (2).
    """
    contents = set(save_contents)
    if strategy == "megatron":
        per_param = 12 * ("optimizer" in contents) + 2 * bool(contents & {"model", "hf_model"})
    else:
        per_param = 4 * ("model" in contents) + 8 * ("optimizer" in contents) + 2 * ("hf_model" in contents)
    return per_param * params
