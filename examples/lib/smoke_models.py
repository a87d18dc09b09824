"""Tiny random models for examples/gpu_smoke.sh, built in code (nothing is downloaded).

``dense``: the recipe's tiny Qwen3 (``recipe/spade/cpu/tiny_model.py``) at a size every GPU kernel accepts (head
dim 64). ``moe``: a tiny Qwen3-MoE (4 experts, 2 active) with the same tokenizer and chat template, for the Megatron
engine, whose Megatron-Bridge converts Qwen3-MoE the way it converts Qwen3-30B-A3B.

    python examples/lib/smoke_models.py {dense,moe} OUT_DIR
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
from pathlib import Path

import torch
from transformers import GenerationConfig, Qwen3MoeConfig, Qwen3MoeForCausalLM

from recipe.spade.cpu.tiny_model import build_tiny_qwen3, build_tokenizer

__all__ = ["build_dense", "build_moe", "main"]

HIDDEN, HEADS, KV_HEADS, LAYERS = 256, 4, 2, 2


def build_dense(out: Path) -> Path:
    """The tiny dense Qwen3 (reused when already built with the same arguments)."""
    return build_tiny_qwen3(out, hidden_size=HIDDEN, num_heads=HEADS, num_kv_heads=KV_HEADS,
                            intermediate_size=2 * HIDDEN, num_layers=LAYERS)  # fmt: skip


def build_moe(out: Path) -> Path:
    """A tiny Qwen3-MoE directory (config, safetensors, tokenizer); an existing complete one is reused."""
    out = Path(out).expanduser().resolve()
    if (out / "config.json").exists() and (out / "tokenizer_config.json").exists():
        return out
    if out.exists() and any(out.iterdir()):
        raise FileExistsError(f"{out} exists and is not a tiny model directory; pass an empty or new path")
    tokenizer = build_tokenizer()
    endoftext, im_end = tokenizer.convert_tokens_to_ids(["<|endoftext|>", "<|im_end|>"])
    config = Qwen3MoeConfig(
        vocab_size=-(-len(tokenizer) // 64) * 64,
        hidden_size=HIDDEN,
        intermediate_size=2 * HIDDEN,
        moe_intermediate_size=HIDDEN // 2,
        num_hidden_layers=LAYERS,
        num_attention_heads=HEADS,
        num_key_value_heads=KV_HEADS,
        head_dim=HIDDEN // HEADS,
        num_experts=4,
        num_experts_per_tok=2,
        decoder_sparse_step=1,
        mlp_only_layers=[],
        norm_topk_prob=True,
        max_position_embeddings=4096,
        tie_word_embeddings=False,  # as Qwen3-30B-A3B
        bos_token_id=endoftext,
        eos_token_id=im_end,
        pad_token_id=endoftext,
        dtype="bfloat16",
    )
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        model = Qwen3MoeForCausalLM(config).to(torch.bfloat16)
    model.generation_config = GenerationConfig(
        bos_token_id=endoftext, eos_token_id=[im_end, endoftext], pad_token_id=endoftext
    )
    out.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{out.name}.building-", dir=out.parent))
    try:
        model.save_pretrained(staging, safe_serialization=True)
        tokenizer.save_pretrained(staging)
        if out.exists():
            out.rmdir()
        staging.rename(out)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("kind", choices=["dense", "moe"])
    parser.add_argument("out", type=Path)
    args = parser.parse_args(argv)
    print((build_dense if args.kind == "dense" else build_moe)(args.out))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
