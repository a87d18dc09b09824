"""Token log-probs from logits in chunks of rows: verl's CPU fallback loops over single tokens.

Without flash-attn's cross-entropy (GPU) or torch_npu, verl 0.9.1's ``logprobs_from_logits`` falls back to
``logprobs_from_logits_v2``, which takes one ``logsumexp`` per row of its input to bound peak memory. The FSDP
engine hands it the unpadded logits as ``(tokens, vocab)``, so on CPU every token is a Python-level call forward
and another backward: 23% of a 3.5k-token row's update on the tiny model (docs/cpu.md, "Token log-probs").
This computes the same quantity, ``x[label] - logsumexp(x)`` (``log_softmax`` then gather for half precision, as
verl does), over blocks of rows whose logits hold at most :data:`CHUNK_ELEMENTS` values, so the extra memory stays
bounded as verl intended while the per-token calls go.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

__all__ = ["CHUNK_ELEMENTS", "logprobs_from_logits_chunked"]

#: Logit values per block (1 MiB in fp32, cache-sized; 2^16-2^20 measured alike, 2^24 slower): the extra memory.
CHUNK_ELEMENTS = 1 << 18


def logprobs_from_logits_chunked(
    logits: torch.Tensor, labels: torch.Tensor, inplace_backward: bool = True
) -> torch.Tensor:
    """Log-probability of each label under ``logits`` (shape ``labels.shape + (vocab,)``), in row blocks.

    ``inplace_backward`` is accepted for verl's signature and ignored (it concerns flash-attn's kernel only).
    """
    del inplace_backward
    if logits.shape[:-1] != labels.shape:
        raise ValueError(f"logits {tuple(logits.shape)} do not match labels {tuple(labels.shape)} plus a vocab axis")
    vocab = logits.shape[-1]
    flat, flat_labels = logits.reshape(-1, vocab), labels.reshape(-1)
    rows = max(1, CHUNK_ELEMENTS // max(1, vocab))
    parts = []
    # split, not slicing: one backward node that concatenates the blocks' gradients (a slice's backward would
    # allocate a zero gradient of the whole input per block)
    for block, block_labels in zip(flat.split(rows), flat_labels.unsqueeze(-1).split(rows), strict=True):
        if block.dtype in (torch.float32, torch.float64):
            parts.append(block.gather(-1, block_labels).squeeze(-1) - torch.logsumexp(block, dim=-1))
        else:  # logsumexp is unstable in bf16 (verl's note): log_softmax, then gather
            parts.append(F.log_softmax(block, dim=-1).gather(-1, block_labels).squeeze(-1))
    out = parts[0] if len(parts) == 1 else torch.cat(parts)
    return out.reshape(labels.shape)
