"""The memory table counts what verl 0.9.1's FSDP log-prob path and a regeneration step's sandboxes really hold.

Review 3 (issue 37, findings 20 and 21). The 8B table counted one bf16 copy of a pack's logits. verl's FSDP engine
also divides them by the temperature into a new tensor (``_scale_logits_by_temperature``, T = 0.6), and the
old-log-prob pass computes entropy (``trainer_base._compute_old_log_prob``: ``calculate_entropy=True``), over the
whole pack unless ``entropy_from_logits_with_chunking`` is on. The sandbox line counted two measurement arms, where
``spade.hint.placebo`` (on by default) plays three at once. Here the log-prob pass runs through verl's real
``FSDPEngineWithLMHead.forward_step`` on CPU (``fsdp_logprob_peak.py``, its own process) and its measured peak is held
against ``recipe.spade.gpu_memory``'s arithmetic at the same size.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
from omegaconf import OmegaConf
from test_gpu_readiness import GPU_LAUNCHERS, config_of, designer_episodes_per_sample, plan
from test_launchers import composed
from verl.utils.config import omega_conf_to_dataclass

from recipe.spade.budget import designer_rows
from recipe.spade.gpu_memory import GIB, fsdp_logit_bytes, memory_report, peak_episodes

HERE = Path(__file__).resolve().parent
FSDP = [s for s in GPU_LAUNCHERS if config_of(s).actor_rollout_ref.actor.strategy in ("fsdp", "fsdp2")]


def report_gib(cfg, what: str, gpu_gib: float = 79.2) -> float:
    line = next(ln for ln in memory_report(cfg, gpu_gib).splitlines() if ln.strip().startswith(what))
    return float(re.search(r"([\d.]+) GiB", line).group(1))


@pytest.mark.parametrize("script", FSDP)
def test_fsdp_launchers_give_verl_an_eager_chunked_entropy(script):
    """What the engine is built with (``FSDPActorConfig.engine``, as ``engine_workers`` passes it): entropy over
    2,048-token chunks, not compiled. Only then is the old-log-prob pass's memory known: compiled, its temporaries
    are whatever inductor's fusion keeps (on CPU one fp32 copy of the whole pack); eager over the whole pack, two
    fp32 copies (softmax and its product with the logits, under CUDA autocast)."""
    engine = omega_conf_to_dataclass(config_of(script).actor_rollout_ref.actor).engine
    assert engine.entropy_from_logits_with_chunking and not engine.use_torch_compile
    assert engine.entropy_from_logits_chunk_size == 2048 and not engine.entropy_checkpointing


@pytest.fixture(scope="module")
def measured():
    """verl's FSDP old-log-prob step on CPU for the 8B launcher's engine and temperature, and RLVE's T = 1."""
    scripts, requests = ("run_spade_8b.sh", "run_fixed_rlve_8b.sh"), []
    for script in scripts:
        cfg = config_of(script)
        requests.append({
            "actor": OmegaConf.to_container(cfg.actor_rollout_ref.actor, resolve=True),
            "temperature": cfg.actor_rollout_ref.rollout.temperature,
            "lengths": [2048, 1024, 1024],  # 4,096 tokens: two of the engine's 2,048-token entropy chunks
            "vocab": 8192,
        })  # fmt: skip
    out = subprocess.run([sys.executable, str(HERE / "fsdp_logprob_peak.py")], input=json.dumps(requests),
                         capture_output=True, text=True, timeout=600)  # fmt: skip
    assert out.returncode == 0, out.stderr[-3000:]
    results = json.loads(out.stdout.strip().splitlines()[-1])
    return {s: (config_of(s), r, got) for s, r, got in zip(scripts, requests, results, strict=True)}


@pytest.mark.parametrize("script", ["run_spade_8b.sh", "run_fixed_rlve_8b.sh"])
def test_the_tables_log_prob_pass_is_what_verls_engine_allocates(measured, script):
    cfg, request, got = measured[script]
    assert got["entropy_fn"] == "entropy_from_logits_with_chunking"
    tokens = sum(request["lengths"])
    assert got["log_probs"] == tokens
    engine = cfg.actor_rollout_ref.actor.fsdp_config
    model = fsdp_logit_bytes(tokens, request["vocab"], request["temperature"], engine.entropy_from_logits_chunk_size)
    # the tiny model's own activations are well under 1% of the logits at this vocabulary
    assert model.log_prob_pass <= got["peak"] <= 1.01 * model.log_prob_pass, (got["peak"], model)
    # the 8B launcher samples at T = 0.6: the 1/T copy is a second logits-sized tensor; RLVE's T = 1 has none
    assert model.scaled == (0 if request["temperature"] == 1 else model.logits)


def test_the_8b_table_counts_the_copy_and_the_entropy_and_still_fits_an_h100():
    cfg = config_of("run_spade_8b.sh")
    pack = cfg.actor_rollout_ref.actor.ppo_max_token_len_per_gpu
    logits = pack * 151936 * 2 / GIB  # Qwen3-8B's vocabulary, bf16: 11.6 GiB
    assert report_gib(cfg, "logits of the pack") == pytest.approx(logits, abs=0.05)
    assert report_gib(cfg, "its 1/T copy") == pytest.approx(logits, abs=0.05)
    assert report_gib(cfg, "log-prob pass: logits + their 1/T copy") == pytest.approx(2 * logits, abs=0.05)
    assert report_gib(cfg, "log-prob pass: entropy") == pytest.approx(3 * 2048 * 151936 * 4 / GIB, abs=0.05)
    shards = sum(report_gib(cfg, w) for w in ("fp32 param shard", "fp32 grad shard", "Adam m, v shard"))
    # the update: checkpointed layer inputs throughout; the logits and a recomputed layer are never live at once
    update = shards + report_gib(cfg, "layer inputs") + max(report_gib(cfg, "one layer recomputed"), 2 * logits)
    log_prob = report_gib(cfg, "fp32 param shard") + 2 * logits + report_gib(cfg, "log-prob pass: entropy")
    text = memory_report(cfg, 79.2)
    assert float(re.search(r"actor update peak per GPU: ([\d.]+) GiB of 79.2 \(fits", text).group(1)) == (
        pytest.approx(update, abs=0.15))  # fmt: skip
    assert float(re.search(r"log-prob pass peak per GPU: ([\d.]+) GiB of 79.2 \(fits", text).group(1)) == (
        pytest.approx(log_prob, abs=0.15))  # fmt: skip


def test_whole_pack_entropy_is_counted_as_two_fp32_copies_of_the_pack():
    """verl's default (no chunks): softmax and its product with the logits, fp32 under CUDA autocast, 46 GiB at 8B."""
    config_name, overrides = plan("run_spade_8b.sh")
    whole = composed(config_name, [*overrides, "actor_rollout_ref.actor.entropy_from_logits_with_chunking=false"])
    pack = whole.actor_rollout_ref.rollout.log_prob_max_token_len_per_gpu
    assert report_gib(whole, "log-prob pass: entropy") == pytest.approx(2 * pack * 151936 * 4 / GIB, abs=0.05)
    assert report_gib(whole, "log-prob pass: entropy") > 10 * report_gib(config_of("run_spade_8b.sh"),
                                                                          "log-prob pass: entropy")  # fmt: skip


@pytest.mark.parametrize("script", ["run_spade_30b.sh", "run_spade_8b.sh"])
def test_the_sandbox_line_counts_every_measurement_arm(script):
    """A regeneration step plays every arm of every design at once (``SpadeDesignerLoop._measure`` gathers arms x
    seeds): 3 x 8 x 24 + 21 x 8 = 744 sandboxes with the placebo arm (on by default), 552 without it."""
    cfg = config_of(script)
    n = cfg.actor_rollout_ref.rollout.n
    designers = designer_rows(cfg.spade, n)
    expected = designers * n * designer_episodes_per_sample(cfg) + (cfg.data.train_batch_size - designers) * n
    assert peak_episodes(cfg) == expected == 744
    assert f"{expected} at once x 31 MB" in memory_report(cfg, 79.2)
    config_name, overrides = plan(script)
    two_arms = composed(config_name, [*overrides, "spade.hint.placebo=false"])
    assert peak_episodes(two_arms) == 552 and "552 at once" in memory_report(two_arms, 79.2)
