"""Peak CPU memory of one old-log-prob micro-batch through verl 0.9.1's real FSDP engine (a helper process).

``test_review3_gpu_memory.py`` runs this file in its own interpreter: verl fixes its platform at import
(``VERL_PLATFORM=cpu`` must be set first) and the engine needs a one-rank process group. It reads JSON on stdin
(``actor``: a launcher's resolved ``actor_rollout_ref.actor``; ``temperature``; ``lengths``: the pack's sequence
lengths; ``vocab``), builds ``FSDPEngineWithLMHead`` from verl's own ``FSDPActorConfig.engine`` of that config, and runs
its ``forward_step`` as ``compute_log_prob`` does (no grad, ``calculate_entropy=True``) on a tiny real Qwen3 whose
vocabulary makes the logits the only large tensors. It prints JSON: the peak of bytes allocated during the step
(torch's profiler, allocator events), the entropy function the engine chose, and how many log-probs came back.
A JSON list of such requests gets a list of results (one interpreter start for all).

Where the code stops being verl's: the module is a plain ``Qwen3ForCausalLM`` set on the engine (not FSDP-wrapped:
one rank holds all of it anyway), and verl picks ``logprobs_from_logits_v2`` on CPU where a GPU has flash-attn's
cross entropy; neither allocates a vocab-sized tensor without grad (v2 works one row at a time).
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
import warnings

warnings.filterwarnings("ignore")
os.environ["VERL_PLATFORM"] = "cpu"

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
from omegaconf import OmegaConf  # noqa: E402
from tensordict import TensorDict  # noqa: E402
from torch._C._profiler import _EventType  # noqa: E402
from torch.profiler import ProfilerActivity, profile  # noqa: E402
from transformers import Qwen3Config, Qwen3ForCausalLM  # noqa: E402
from verl.utils import tensordict_utils as tu  # noqa: E402
from verl.utils.config import omega_conf_to_dataclass  # noqa: E402
from verl.workers.engine.fsdp.transformer_impl import FSDPEngineWithLMHead  # noqa: E402


class ModelConfig(dict):
    """The two fields ``FSDPEngine.__init__`` reads from an ``HFModelConfig`` (the model is set below)."""

    use_remove_padding = True
    lora_rank = 0


def peak_bytes(step) -> int:
    """The most bytes live at once among those allocated while ``step`` runs (profiler allocation events)."""
    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        step()
    events, stack = [], list(prof.profiler.kineto_results.experimental_event_tree())
    while stack:
        event = stack.pop()
        stack.extend(event.children)
        if event.tag == _EventType.Allocation:
            events.append((event.start_time_ns, event.extra_fields.alloc_size))
    live = peak = 0
    for _, size in sorted(events):
        live += size
        peak = max(peak, live)
    return peak


def measure(request: dict) -> dict:
    actor = omega_conf_to_dataclass(OmegaConf.create(request["actor"]))
    engine = FSDPEngineWithLMHead(ModelConfig(), actor.engine, actor.optim, actor.checkpoint)
    vocab, lengths = request["vocab"], request["lengths"]
    torch.manual_seed(0)
    engine.module = Qwen3ForCausalLM(Qwen3Config(
        vocab_size=vocab, hidden_size=16, intermediate_size=32, num_hidden_layers=1, num_attention_heads=1,
        num_key_value_heads=1, head_dim=16, tie_word_embeddings=False, attn_implementation="sdpa",
    ))  # fmt: skip
    ids = torch.nested.nested_tensor([torch.randint(0, vocab, (n,)) for n in lengths], layout=torch.jagged)
    positions = torch.nested.nested_tensor([torch.arange(n) for n in lengths], layout=torch.jagged)
    batch = TensorDict({"input_ids": ids, "position_ids": positions}, batch_size=[len(lengths)])
    tu.assign_non_tensor(batch, temperature=request["temperature"], calculate_entropy=True,
                         use_remove_padding=True, use_fused_kernels=False)  # fmt: skip
    out = {}

    def step() -> None:
        with torch.no_grad():  # FSDPEngine.forward_backward_batch, forward_only
            out.update(engine.forward_step(batch, loss_function=None, forward_only=True)[1]["model_output"])

    peak = peak_bytes(step)
    return {"peak": peak, "entropy_fn": getattr(engine.compute_entropy_from_logits, "__name__", "?"),
            "log_probs": int(out["log_probs"].values().numel())}  # fmt: skip


def main() -> None:
    requests = json.load(sys.stdin)
    with tempfile.TemporaryDirectory() as store:
        dist.init_process_group("gloo", rank=0, world_size=1, init_method=f"file://{store}/pg")
        try:
            print(json.dumps([measure(r) for r in requests]))
        finally:
            dist.destroy_process_group()


if __name__ == "__main__":
    main()
