"""The scripted designer stand-in pays its answers' generation only when asked (``rollout.custom.scripted_generates``).

``bench_spade_step.py`` times SPADE's step with the stand-in; without this a design step skipped the designer's and
the hint writer's generation that a real run pays, and the ratio to plain GRPO on SPADE's shapes (which generates
after every designer-length prompt) flattered SPADE. A real tiny Qwen3 and the real batched engine generate here.
"""

from __future__ import annotations

import asyncio
import types

import pytest
from omegaconf import OmegaConf

from recipe.spade.cpu.scripted import _DESIGNER_TAIL, _HINT_TAIL, ScriptedDesignerServer
from recipe.spade.cpu.tiny_model import build_tiny_qwen3


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    return build_tiny_qwen3(tmp_path_factory.mktemp("tiny") / "model")


def _server(model_dir, custom: dict) -> ScriptedDesignerServer:
    config = OmegaConf.create({"_target_": "verl.workers.config.RolloutConfig", "name": "hf_scripted",
                               "prompt_length": 512, "response_length": 64, "custom": custom})  # fmt: skip
    return ScriptedDesignerServer(config, types.SimpleNamespace(path=str(model_dir), local_path=str(model_dir)))


def _ask(server: ScriptedDesignerServer, *requests: tuple[str, int]) -> list[list[int]]:
    """Each ``(prompt text, max_tokens)`` in turn on one event loop (the server's engine lives on one, as in Ray)."""

    async def run() -> list[list[int]]:
        answers = []
        for text, max_tokens in requests:
            prompt = server.tokenizer.encode(text, add_special_tokens=False)
            params = {"temperature": 1.0, "max_tokens": max_tokens, "logprobs": True}
            answers.append(list((await server.generate(prompt, params, "r1")).token_ids))
        await server.engine.aclose()  # the engine's batching task: stopped here, not left to the GC
        return answers

    return asyncio.run(run())


DESIGN = (f"Design a game. {_DESIGNER_TAIL}", 64)


def test_with_pricing_each_scripted_answer_costs_its_length_in_generated_tokens(model_dir):
    server = _server(model_dir, {"scripted_generates": True})
    design, hint = _ask(server, DESIGN, (f"Write a hint. {_HINT_TAIL}", 200))
    assert server.tokenizer.decode(design).startswith("Here is the environment.")  # the answer is still scripted
    assert len(design) > 64  # a built-in's source: the request's max_tokens caps what is priced
    # the hint is shorter than its max_tokens: priced at its own length (ignore_eos: never cut short by an EOS)
    assert server.priced_tokens == 64 + len(hint)
    assert server.engine.batches_run == 2


def test_by_default_scripted_answers_generate_nothing(model_dir):
    server = _server(model_dir, {})
    _ask(server, DESIGN, (f"Write a hint. {_HINT_TAIL}", 16))
    assert (server.priced_tokens, server.engine.batches_run) == (0, 0)
