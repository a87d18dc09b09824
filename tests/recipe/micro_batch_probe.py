"""Micro-batch sizes through verl 0.9.1's real FSDP engine on CPU (a helper process for test_micro_batches_on_cpu).

verl fixes its platform at import, so this runs in its own interpreter with ``VERL_PLATFORM=cpu`` and the SPADE CPU
plugin loaded (its patches applied, as in every Ray worker of a CPU run). It reads JSON on stdin: ``rows``, a list of
``[prompt_length, response_length]``. It composes the CPU preset (``recipe/spade/config/cpu.yaml``), builds
``FSDPEngineWithLMHead`` from that config's actor engine on the tiny random Qwen3 (``build_tiny_qwen3``), and runs the
same mini-batch through ``forward_backward_batch`` two ways: ``preset`` (the preset's
``ppo_micro_batch_size_per_gpu``) and ``pairs`` (two rows per micro-batch, the preset before). Each way runs
old-log-prob style (no grad, entropy) and then an update's forward-backward with verl's ``ppo_loss``.

It prints JSON: per way the per-row log-probs and entropies as returned, each micro-batch's row indices and padded
positions (from the ``input_ids`` the model received) and whether its attention mask had padding, the summed loss and
the flattened gradient; plus each row's log-probs from a plain forward of that row alone. The module is a plain
``Qwen3ForCausalLM`` set on the engine (one rank holds all of it; not FSDP-wrapped), in fp32.
"""

from __future__ import annotations

import functools
import json
import os
import sys
import tempfile
import warnings
from pathlib import Path

warnings.filterwarnings("ignore")
os.environ["VERL_PLATFORM"] = "cpu"
ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
from hydra import compose, initialize_config_dir  # noqa: E402
from tensordict import TensorDict  # noqa: E402
from transformers import AutoModelForCausalLM  # noqa: E402
from verl.utils import tensordict_utils as tu  # noqa: E402
from verl.utils.config import omega_conf_to_dataclass  # noqa: E402
from verl.workers.engine.fsdp.transformer_impl import FSDPEngineWithLMHead  # noqa: E402
from verl.workers.utils.losses import ppo_loss  # noqa: E402

import recipe.spade.cpu.plugin  # noqa: E402, F401  (applies the CPU patches: VERL_PLATFORM=cpu)
from recipe.spade.cpu.tiny_model import build_tiny_qwen3  # noqa: E402


class ModelConfig(dict):
    """The two fields ``FSDPEngine.__init__`` reads from an ``HFModelConfig`` (the module is set below)."""

    use_remove_padding = False
    lora_rank = 0


def preset_actor():
    """The CPU preset's actor section, as ``main_cpu`` composes it."""
    with initialize_config_dir(config_dir=str(ROOT / "recipe" / "spade" / "config"), version_base=None):
        cfg = compose(config_name="cpu")
    return cfg.actor_rollout_ref.actor


def make_batch(rows: list[list[int]], vocab: int) -> TensorDict:
    """A mini-batch as the V1 trainer hands it to the engine: nested (no-padding) fields, response-only masks."""
    gen = torch.Generator().manual_seed(1)
    ids = [torch.randint(0, vocab, (p + r,), generator=gen) for p, r in rows]
    nested = functools.partial(torch.nested.as_nested_tensor, layout=torch.jagged)
    resp_mask = [torch.ones(r, dtype=torch.int64) for _, r in rows]
    resp_mask[0][-3:] = 0  # a row whose last tokens are masked out (an early stop), so masks matter
    batch = TensorDict(
        {
            "input_ids": nested(ids),
            "position_ids": nested([torch.arange(p + r) for p, r in rows]),
            "prompts": nested([x[:p] for x, (p, _) in zip(ids, rows)]),
            "responses": nested([x[p:] for x, (p, _) in zip(ids, rows)]),
            "response_mask": nested(resp_mask),
            "loss_mask": nested(resp_mask),
            "old_log_probs": nested([-torch.rand(r, generator=gen) * 3 for _, r in rows]),
            "advantages": nested([torch.randn(1, generator=gen).expand(r).clone() for _, r in rows]),
        },
        batch_size=[len(rows)],
    )
    tu.assign_non_tensor(batch, temperature=1.0, use_fused_kernels=False, use_remove_padding=False,
                         global_batch_size=len(rows), dp_size=1)  # fmt: skip
    return batch


def run_way(engine, actor, rows, vocab, micro: int) -> dict:
    """The mini-batch in micro-batches of ``micro`` rows: what came back and what the model computed."""
    seen, prepare = [], engine.prepare_model_inputs
    row_of = {tuple(x.tolist()): i for i, x in enumerate(make_batch(rows, vocab)["input_ids"].unbind())}

    def recording(micro_batch):
        inputs, args = prepare(micro_batch)
        seen.append({"rows": [row_of[tuple(x.tolist())] for x in micro_batch["input_ids"].unbind()],
                     "positions": int(inputs["input_ids"].numel()),
                     "masked": bool((inputs["attention_mask"] == 0).any())})  # fmt: skip
        return inputs, args

    engine.prepare_model_inputs = recording
    try:
        out = {}
        for phase in ("log_prob", "update"):
            seen.clear()
            data = make_batch(rows, vocab)
            tu.assign_non_tensor(data, use_dynamic_bsz=bool(actor.use_dynamic_bsz), micro_batch_size_per_gpu=micro,
                                 max_token_len_per_gpu=actor.ppo_max_token_len_per_gpu,
                                 calculate_entropy=phase == "log_prob")  # fmt: skip
            engine.module.zero_grad(set_to_none=True)
            if phase == "log_prob":
                with torch.no_grad():
                    res = engine.forward_backward_batch(data, loss_function=None, forward_only=True)
                mo = res["model_output"]
                out["log_probs"] = [t.tolist() for t in mo["log_probs"].unbind()]
                out["entropy"] = [t.tolist() for t in mo["entropy"].unbind()]
            else:
                loss_fn = functools.partial(ppo_loss, config=omega_conf_to_dataclass(actor))
                res = engine.forward_backward_batch(data, loss_function=loss_fn, forward_only=False)
                out["loss"] = float(sum(res["loss"]))
                out["grad"] = torch.cat([p.grad.flatten() for p in engine.module.parameters()]).tolist()
            out[f"{phase}_micro_batches"] = [s["rows"] for s in seen]
            out[f"{phase}_positions"] = sum(s["positions"] for s in seen)
            out[f"{phase}_masked"] = sum(s["masked"] for s in seen)
        return out
    finally:
        engine.prepare_model_inputs = prepare


def compare(rows: list[list[int]]) -> dict:
    actor = preset_actor()
    with tempfile.TemporaryDirectory() as tmp:
        dist.init_process_group("gloo", rank=0, world_size=1, init_method=f"file://{tmp}/pg")
        try:
            model = AutoModelForCausalLM.from_pretrained(build_tiny_qwen3(Path(tmp) / "model"), dtype=torch.float32)
            cfg = omega_conf_to_dataclass(actor)
            engine = FSDPEngineWithLMHead(ModelConfig(), cfg.engine, cfg.optim, cfg.checkpoint)
            engine.module, engine._autocast_dtype = model, torch.float32
            vocab = model.config.vocab_size
            result = {"micro": int(actor.ppo_micro_batch_size_per_gpu), "dynamic": bool(actor.use_dynamic_bsz)}
            result["preset"] = run_way(engine, actor, rows, vocab, result["micro"])
            result["pairs"] = run_way(engine, actor, rows, vocab, 2)
            alone = []
            with torch.no_grad():
                for x in make_batch(rows, vocab)["input_ids"].unbind():
                    logp = torch.log_softmax(model(input_ids=x[None]).logits[0].float(), dim=-1)
                    alone.append(logp[:-1].gather(-1, x[1:, None])[:, 0].tolist())
            result["alone"] = alone
            return result
        finally:
            dist.destroy_process_group()


def main() -> None:
    print(json.dumps(compare(json.load(sys.stdin)["rows"])))


if __name__ == "__main__":
    main()
