"""One row per micro-batch on the CPU backend: no padding, the same math as the two-row micro-batches it replaced.

The CPU backend runs verl's FSDP engine without remove-padding, so each micro-batch is padded to its longest row and
attends with a mask; two rows per micro-batch paired ~3.5k-token designer rows with ~0.8k-token agent rows.
``config/backend/cpu.yaml`` now gives every micro-batch one row. The engine tests run ``micro_batch_probe.py`` (its own
interpreter, ``VERL_PLATFORM=cpu``): verl's real ``FSDPEngineWithLMHead`` and ``ppo_loss`` on the tiny random Qwen3.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from hydra import compose, initialize_config_dir

HERE = Path(__file__).resolve().parent
CONFIG_DIR = HERE.parents[1] / "recipe" / "spade" / "config"
#: A design step's mini-batch in miniature, long (designer-like) and short (agent-like) rows interleaved, with the
#: response lengths differing too: [prompt, response] tokens.
ROWS = [[600, 20], [100, 20], [580, 20], [90, 20], [590, 16], [110, 16], [570, 20], [95, 20]]


@pytest.fixture(scope="module")
def ways() -> dict:
    out = subprocess.run([sys.executable, str(HERE / "micro_batch_probe.py")], input=json.dumps({"rows": ROWS}),
                         capture_output=True, text=True, timeout=600, cwd=HERE.parents[1])  # fmt: skip
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize(("config", "overrides"), [("cpu", []), ("spade_trainer", ["backend=cpu"])])
def test_cpu_backend_runs_one_row_per_micro_batch(config, overrides):
    """The update, the old log-probs and the reference log-probs, in both CPU presets (plain verl and SPADE)."""
    with initialize_config_dir(config_dir=str(CONFIG_DIR), version_base=None):
        cfg = compose(config_name=config, overrides=overrides).actor_rollout_ref
    assert not cfg.actor.use_dynamic_bsz and not cfg.model.use_remove_padding
    assert cfg.actor.ppo_micro_batch_size_per_gpu == 1
    assert cfg.rollout.log_prob_micro_batch_size_per_gpu == cfg.ref.log_prob_micro_batch_size_per_gpu == 1


def test_gpu_backend_is_left_alone():
    """GPU runs pack rows without padding (remove-padding) and keep their own micro-batching."""
    with initialize_config_dir(config_dir=str(CONFIG_DIR), version_base=None):
        gpu = compose(config_name="spade_trainer").actor_rollout_ref
    assert gpu.model.use_remove_padding
    assert gpu.actor.ppo_micro_batch_size_per_gpu is None and gpu.rollout.log_prob_micro_batch_size_per_gpu is None


def test_the_model_sees_no_padding(ways):
    """Two-row micro-batches padded every short row to its partner's length and attended with a padding mask; one
    row per micro-batch computes exactly the rows' own positions, unmasked."""
    assert ways["micro"] == 1 and not ways["dynamic"]
    real = sum(p + r for p, r in ROWS)
    for phase in ("log_prob", "update"):
        assert ways["preset"][f"{phase}_micro_batches"] == [[i] for i in range(len(ROWS))]
        assert ways["preset"][f"{phase}_positions"] == real and ways["preset"][f"{phase}_masked"] == 0
        assert ways["pairs"][f"{phase}_positions"] > 1.6 * real and ways["pairs"][f"{phase}_masked"] == 4


def test_rows_come_back_in_order_with_the_same_log_probs_and_entropy(ways):
    """Per-row log-probs and entropies as ``compute_log_prob`` returns them: in the mini-batch's order, equal to the
    two-row micro-batches' and to a plain forward of each row alone. Each row's last slot is left out: it scores
    verl's wrap-around label (the next row's first token, ``torch.roll`` over the micro-batch's ids), which
    ``response_from_nested`` and the loss never read."""
    preset, pairs = ways["preset"], ways["pairs"]
    for i, (p, r) in enumerate(ROWS):
        assert len(preset["log_probs"][i]) == p + r
        torch.testing.assert_close(torch.tensor(preset["log_probs"][i][:-1]), torch.tensor(pairs["log_probs"][i][:-1]))
        torch.testing.assert_close(torch.tensor(preset["log_probs"][i][:-1]), torch.tensor(ways["alone"][i]))
        torch.testing.assert_close(torch.tensor(preset["entropy"][i]), torch.tensor(pairs["entropy"][i]))


def test_the_update_has_the_same_loss_and_gradient(ways):
    """verl's ``ppo_loss`` divides each micro-batch's loss by the mini-batch's token count (``batch_num_tokens``), so
    the summed loss and the accumulated gradient do not depend on how the mini-batch is split."""
    preset, pairs = ways["preset"], ways["pairs"]
    assert preset["loss"] == pytest.approx(pairs["loss"], rel=1e-5)
    grad_preset, grad_pairs = torch.tensor(preset["grad"]), torch.tensor(pairs["grad"])
    assert grad_pairs.abs().max() > 0
    torch.testing.assert_close(grad_preset, grad_pairs, rtol=1e-4, atol=1e-7)
