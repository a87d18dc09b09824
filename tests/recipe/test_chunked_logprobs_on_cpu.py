"""The CPU backend's token log-probs in row blocks: verl's values and gradients, bitwise, without per-token calls.

verl 0.9.1 without flash-attn or torch_npu computes token log-probs one row of its input at a time, and its FSDP
engine hands it ``(tokens, vocab)`` logits, so on CPU that is a Python loop over tokens. Patch 5 (``patches.py``)
swaps in ``chunked_logprobs.logprobs_from_logits_chunked`` in the engine.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from verl.utils.torch_functional import logprobs_from_logits_v2

from recipe.spade.cpu import chunked_logprobs
from recipe.spade.cpu.chunked_logprobs import logprobs_from_logits_chunked

HERE = Path(__file__).resolve().parent


def _both(logits: torch.Tensor, labels: torch.Tensor) -> tuple[tuple[torch.Tensor, torch.Tensor], ...]:
    """(log-probs, gradient of a weighted sum) from verl's fallback and from ours, on the same logits."""
    weights = torch.randn(labels.shape, generator=torch.Generator().manual_seed(3))
    out = []
    for fn in (logprobs_from_logits_v2, logprobs_from_logits_chunked):
        x = logits.detach().clone().requires_grad_(True)
        values = fn(x, labels)
        (values.float() * weights).sum().backward()
        out.append((values.detach(), x.grad))
    return tuple(out)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16])
@pytest.mark.parametrize("chunk", [1 << 18, 300, 1])
def test_same_values_and_gradients_as_verls_fallback(monkeypatch, dtype, chunk):
    """Bitwise equal in every dtype verl distinguishes, with one block, blocks with a remainder, and one row each."""
    monkeypatch.setattr(chunked_logprobs, "CHUNK_ELEMENTS", chunk)
    gen = torch.Generator().manual_seed(0)
    logits = (torch.randn(257, 97, generator=gen) * 4).to(dtype)
    labels = torch.randint(0, 97, (257,), generator=gen)
    (ref, ref_grad), (ours, our_grad) = _both(logits, labels)
    assert ours.dtype == ref.dtype and ours.shape == ref.shape == (257,)
    assert torch.equal(ours, ref) and torch.equal(our_grad, ref_grad)


def test_batched_shape_is_kept():
    """``(batch, seq, vocab)`` logits (verl's padded callers) give ``(batch, seq)``, the same as verl's loop."""
    gen = torch.Generator().manual_seed(1)
    logits, labels = torch.randn(3, 11, 50, generator=gen), torch.randint(0, 50, (3, 11), generator=gen)
    (ref, ref_grad), (ours, our_grad) = _both(logits, labels)
    assert ours.shape == (3, 11) and torch.equal(ours, ref) and torch.equal(our_grad, ref_grad)


def test_mismatched_labels_are_refused():
    with pytest.raises(ValueError, match=r"logits \(4, 10\) do not match labels \(5,\)"):
        logprobs_from_logits_chunked(torch.zeros(4, 10), torch.zeros(5, dtype=torch.long))


ENGINE = """
import json, sys
sys.path.insert(0, {here!r})
import micro_batch_probe as probe  # VERL_PLATFORM=cpu, the plugin's patches applied
import torch, torch.distributed as dist, tempfile
from pathlib import Path
import verl.utils.torch_functional as functional
import verl.workers.engine.fsdp.transformer_impl as impl
from transformers import AutoModelForCausalLM
from verl.utils.config import omega_conf_to_dataclass

rows = [[300, 20], [60, 16], [280, 20]]
patched = impl.logprobs_from_logits
actor = probe.preset_actor()
cfg = omega_conf_to_dataclass(actor)
with tempfile.TemporaryDirectory() as tmp:
    dist.init_process_group("gloo", rank=0, world_size=1, init_method=f"file://{{tmp}}/pg")
    model = AutoModelForCausalLM.from_pretrained(probe.build_tiny_qwen3(Path(tmp) / "m"), dtype=torch.float32)
    engine = probe.FSDPEngineWithLMHead(probe.ModelConfig(), cfg.engine, cfg.optim, cfg.checkpoint)
    engine.module, engine._autocast_dtype = model, torch.float32
    calls = {{"n": 0}}
    def counting(*args, **kwargs):
        calls["n"] += 1
        return patched(*args, **kwargs)
    impl.logprobs_from_logits = counting
    ours = probe.run_way(engine, actor, rows, model.config.vocab_size, 1)
    impl.logprobs_from_logits = functional.logprobs_from_logits  # verl's own, per-token on CPU
    verls = probe.run_way(engine, actor, rows, model.config.vocab_size, 1)
    dist.destroy_process_group()
print(json.dumps({{"patched": getattr(patched, "_spade_cpu_patched", False), "calls": calls["n"],
                  "same": all(ours[k] == verls[k] for k in ("log_probs", "entropy", "loss", "grad"))}}))
"""


def test_the_engine_trains_on_the_same_numbers():
    """verl's FSDP engine with the patch in place (as every CPU worker has it) against verl's own function: the
    same log-probs, entropies, loss and gradient, to the bit, through the patched name."""
    code = ENGINE.format(here=str(HERE))
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600, cwd=HERE.parents[1])
    assert out.returncode == 0, out.stderr[-3000:]
    facts = json.loads(out.stdout.strip().splitlines()[-1])
    assert facts["patched"] and facts["calls"] == 6  # 3 rows, one per micro-batch, old log-probs and the update
    assert facts["same"]
