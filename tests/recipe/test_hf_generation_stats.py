"""The CPU rollout reports its generation work per training step (``rollout.custom.hf_stats_path``).

``bench_spade_step.py`` splits each step into the engine's own work and the rest with it: SPADE's design steps
generate for hints and measurement plays that never train, which a ratio per trained token otherwise charges to
the machinery. A real tiny Qwen3 and the real batched engine generate here.
"""

from __future__ import annotations

import asyncio
import json
import types

import pytest
from omegaconf import OmegaConf

from recipe.spade.cpu.hf_rollout import HFRolloutServer
from recipe.spade.cpu.scripted import _DESIGNER_TAIL, ScriptedDesignerServer
from recipe.spade.cpu.tiny_model import build_tiny_qwen3


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    return build_tiny_qwen3(tmp_path_factory.mktemp("tiny") / "model")


def _server(model_dir, custom: dict, cls: type = HFRolloutServer, name: str = "hf") -> HFRolloutServer:
    config = OmegaConf.create({"_target_": "verl.workers.config.RolloutConfig", "name": name,
                               "prompt_length": 512, "response_length": 16, "custom": custom})  # fmt: skip
    return cls(config, types.SimpleNamespace(path=str(model_dir), local_path=str(model_dir)))


def _drive(server: HFRolloutServer, script: list) -> list[list[int]]:
    """Run ``script`` on one event loop: token lists are generated together, ints are ``set_global_steps`` calls."""

    async def run() -> list[list[int]]:
        answers: list[list[int]] = []
        for item in script:
            if isinstance(item, int):
                await server.set_global_steps(item)
                continue
            params = {"temperature": 1.0, "max_tokens": 16, "logprobs": False}
            outs = await asyncio.gather(*(server.generate(list(p), dict(params), f"r{i}") for i, p in enumerate(item)))
            answers += [list(o.token_ids) for o in outs]
        await server.engine.aclose()  # the engine's batching task: stopped here, not left to the GC
        return answers

    return asyncio.run(run())


def test_each_weight_sync_writes_the_work_done_since_the_previous_one(model_dir, tmp_path):
    path = tmp_path / "gen.jsonl"
    server = _server(model_dir, {"hf_stats_path": str(path)})
    first, second, third = [5, 6, 7] * 10, [8, 9] * 40, [10, 11, 12, 13] * 5
    answers = _drive(server, [0, [first, second], 1, [third], 2])
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    assert [line["step"] for line in lines] == [0, 1, 2]
    assert lines[0] == {"step": 0, "replica": 0, "requests": 0, "prompt_tokens": 0, "generated_tokens": 0,
                        "busy_s": 0.0}  # fmt: skip
    assert (lines[1]["requests"], lines[1]["prompt_tokens"]) == (2, len(first) + len(second))
    assert lines[1]["generated_tokens"] == len(answers[0]) + len(answers[1]) > 0
    assert (lines[2]["requests"], lines[2]["prompt_tokens"], lines[2]["generated_tokens"]) == (1, 20, len(answers[2]))
    assert lines[1]["busy_s"] > 0 and lines[2]["busy_s"] > 0
    stats = asyncio.run(server.stats())  # the totals, as before plus the work
    assert (stats["requests"], stats["prompt_tokens"]) == (3, len(first) + len(second) + len(third))
    assert stats["busy_s"] == pytest.approx(lines[1]["busy_s"] + lines[2]["busy_s"], abs=1e-3)


def test_without_a_path_nothing_is_written(model_dir, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    server = _server(model_dir, {})
    _drive(server, [[[5, 6, 7]], 1])
    assert list(tmp_path.iterdir()) == []
    assert server.engine.requests_run == 1


def test_a_priced_scripted_answer_counts_as_generated_work(model_dir, tmp_path):
    path = tmp_path / "gen.jsonl"
    server = _server(model_dir, {"hf_stats_path": str(path), "scripted_generates": True}, ScriptedDesignerServer,
                     "hf_scripted")  # fmt: skip
    design = server.tokenizer.encode(f"Design a game. {_DESIGNER_TAIL}", add_special_tokens=False)
    _drive(server, [[design], 1])
    (line,) = [json.loads(row) for row in path.read_text().splitlines()]
    assert line["generated_tokens"] == server.priced_tokens == 16  # capped by the server's response_length
    assert line["prompt_tokens"] == len(design)


def test_a_stats_path_that_cannot_be_written_is_refused_at_start(model_dir, tmp_path):
    with pytest.raises(ValueError, match="hf_stats_path=.*cannot be written"):
        _server(model_dir, {"hf_stats_path": str(tmp_path / "no-such-dir" / "gen.jsonl")})
