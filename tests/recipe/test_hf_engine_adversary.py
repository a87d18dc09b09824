"""Adversarial checks of the hf engine's right padding, hole-masked decoding and length groups (tiny Qwen3)."""

import asyncio
import types

import pytest
import torch
from omegaconf import OmegaConf
from transformers import AutoModelForCausalLM, Qwen3Config

from recipe.spade.cpu.hf_engine import BatchedGenerator, SamplingRequest
from recipe.spade.cpu.scripted import _DESIGNER_TAIL, ScriptedDesignerServer
from recipe.spade.cpu.tiny_model import build_tiny_qwen3

# 2 and 83 come up mid-answer under repetition_penalty=3 (steps 4 to 23): as extra EOS ids they stop rows early
EOS = [408, 406, 2, 83]


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    return build_tiny_qwen3(tmp_path_factory.mktemp("tiny") / "model")


def _engine(model_dir, attn="sdpa", eos=(408, 406)):
    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32, attn_implementation=attn)
    return BatchedGenerator(model, eos_ids=list(eos), pad_id=406, max_batch=16)


@pytest.fixture
def engine(model_dir):
    torch.set_num_threads(1)  # the machine is shared: one thread
    return _engine(model_dir)


def _long(n: int, start: int = 0) -> list[int]:
    return [407] + [10 + (start + i) % 390 for i in range(n - 1)]


def req(prompt, n=20, temperature=0.0, **kw):
    return SamplingRequest(prompt_ids=list(prompt), max_tokens=n, temperature=temperature, logprobs=True, **kw)


def _same(a, b, tol=1e-4):
    assert (a.token_ids, a.stop_reason, len(a.log_probs)) == (b.token_ids, b.stop_reason, len(b.log_probs))
    assert max((abs(x - y) for x, y in zip(a.log_probs, b.log_probs)), default=0.0) < tol


RP = {"repetition_penalty": 3.0}  # a random tiny model repeats one token; the penalty makes every step differ
CASES = {
    "one_token_prompts": [req([65], **RP), req([300], **RP), req(_long(40), **RP), req([407, 65], **RP)],
    "equal_lengths": [req(_long(6, s), **RP) for s in (0, 50, 100)] + [req(_long(6, 50))],
    "max_tokens_1_beside_40": [req([65], 1), req(_long(30), 40, **RP), req([300], 1, **RP), req(_long(3, 9), 2)],
    "eos_rows_beside_ignore_eos_rows": [
        req(p, 30, ignore_eos=ign, **RP)
        for p in ([407, 65], [65], [300], _long(40), [407, 50, 51, 52, 53, 54, 408, 10])
        for ign in (False, True)
    ],
    "penalty_below_one_and_long_pad": [req(_long(300, 5), 12, repetition_penalty=0.7), req([65], 12, **RP)],
    "top_k_1_and_tiny_top_p_are_greedy": [
        req([65], 15, temperature=0.8, top_k=1, **RP),
        req(_long(40), 15, temperature=1.7, top_p=1e-6, **RP),
        req(_long(90, 3), 15, temperature=0.5, top_k=1, top_p=0.5),
    ],
}


@pytest.mark.parametrize("case", CASES)
def test_each_row_of_an_edge_batch_equals_the_row_alone(model_dir, engine, case):
    engine.eos_ids = set(EOS)
    requests = CASES[case]
    batched = engine.run_batch(requests)
    for r, got in zip(requests, batched):
        _same(got, engine.run_batch([r])[0])
        assert 1 <= len(got.token_ids) <= r.max_tokens
        assert got.stop_reason == "length" or (got.token_ids[-1] in EOS and not r.ignore_eos)
    if case == "eos_rows_beside_ignore_eos_rows":  # the case really mixes early stops with full-length rows
        assert {g.stop_reason for g in batched} == {"completed", "length"}
        assert len({len(g.token_ids) for g in batched}) >= 4
    if case == "top_k_1_and_tiny_top_p_are_greedy":
        for r, got in zip(requests, batched):
            greedy = req(r.prompt_ids, r.max_tokens, repetition_penalty=r.repetition_penalty)
            assert got.token_ids == engine.run_batch([greedy])[0].token_ids


def _reference(model, r, tokens):
    """Log-probs and greedy choices from one plain full forward pass over the row's prompt and answer, alone."""
    with torch.no_grad():
        logits = model(input_ids=torch.tensor([r.prompt_ids + tokens])).logits[0].float()
    logps, argmaxes = [], []
    for j, t in enumerate(tokens):
        row = logits[len(r.prompt_ids) - 1 + j].clone()
        seen = sorted(set(r.prompt_ids + tokens[:j]))
        if r.repetition_penalty != 1.0:
            p = row[seen]
            row[seen] = torch.where(p > 0, p / r.repetition_penalty, p * r.repetition_penalty)
        argmaxes.append(int(torch.argmax(row)))
        scaled = row if r.temperature <= 0 else row / r.temperature
        logps.append(float(torch.log_softmax(scaled, -1)[t]))
    return logps, argmaxes


@pytest.mark.parametrize("attn", ["sdpa", "eager"])
def test_hole_masked_decoding_matches_a_plain_forward_pass_per_row(model_dir, attn):
    """Short rows decode with long holes (pads between prompt and answer); each row equals its own full pass."""
    torch.set_num_threads(1)
    engine = _engine(model_dir, attn, EOS)
    torch.manual_seed(3)
    requests = [req(_long(200, 1), 25, **RP), req([65], 25, **RP), req([407, 65], 25, ignore_eos=True, **RP)]
    requests += [req(_long(120, 7), 3), req(_long(57, 2), 25, temperature=1.3)]
    requests += [req([300], 25, temperature=0.9, top_k=20, top_p=0.9, **RP)]
    batched = engine.run_batch(requests)
    for r, got in zip(requests, batched):
        logps, argmaxes = _reference(engine.model, r, got.token_ids)
        assert max(abs(a - b) for a, b in zip(got.log_probs, logps)) < 1e-4
        if r.temperature <= 0:
            assert got.token_ids == argmaxes
    assert {len(g.token_ids) for g in batched} >= {3, 25} and any(g.stop_reason == "completed" for g in batched)


def _serve(engine, *rounds, timeout=120.0):
    """Each round's requests sent together, round after round, on one event loop (the engine's queue binds to one)."""

    async def main():
        return [
            await asyncio.wait_for(asyncio.gather(*map(engine.generate, r), return_exceptions=True), timeout)
            for r in rounds
        ]

    return asyncio.run(main())


@pytest.mark.parametrize("extra, batches", [(256, 1), (257, 2)])
def test_a_prompt_longer_by_exactly_pad_slack_shares_the_batch(engine, extra, batches):
    engine.gather_s, engine.pad_slack = 0.5, 256
    requests = [req(_long(10), 6, **RP), req(_long(10 + extra, 3), 6, **RP), req(_long(10, 4), 6)]
    (results,) = _serve(engine, requests)
    assert engine.batches_run == batches
    for r, got in zip(requests, results):
        _same(got, engine.run_batch([r])[0])


@pytest.mark.parametrize("bad_is_long", [False, True])
def test_a_failing_group_leaves_the_other_groups_answered(engine, bad_is_long):
    engine.gather_s, engine.pad_slack = 0.5, 0
    bad = req(_long(80 if bad_is_long else 3)[:-1] + [10**6], 4)  # an out-of-vocabulary id fails the model call
    good = [req(_long(3 if bad_is_long else 80, 5), 4, **RP), req(_long(400, 2), 4), req(_long(12), 4)]
    (first, error, *rest), (after,) = _serve(engine, [good[0], bad, *good[1:]], [good[2]])
    assert isinstance(error, (IndexError, RuntimeError))
    for r, got in zip(good + good[2:], [first, *rest, after]):  # after: the worker survives the failure
        _same(got, engine.run_batch([r])[0])


def test_a_long_group_is_not_overtaken_and_a_cancelled_waiter_breaks_nothing(engine):
    """A turn sent while a gathered batch's long group runs waits for it; a waiter that gave up is skipped."""
    engine.gather_s, engine.pad_slack = 0.3, 0
    order = []

    async def main():
        async def ask(name, r):
            out = await engine.generate(r)
            order.append(name)
            if name == "short":  # sent once the short group is answered: the long group has started
                await ask("late", req([407, 65], 4))
            return out

        gone = asyncio.ensure_future(engine.generate(req(_long(60), 4)))
        await asyncio.sleep(0)  # queued, then its waiter gives up before the batch runs
        gone.cancel()
        return await asyncio.wait_for(
            asyncio.gather(ask("short", req([407, 66], 4)), ask("long", req(_long(500), 30))), 120
        )

    short, long = asyncio.run(main())
    assert order == ["short", "long", "late"]
    _same(long, engine.run_batch([req(_long(500), 30)])[0])


# Found by this file's adversary pass and fixed: the priced generation was capped by ``params.get("max_tokens")``
# only, so a request bounded by ``max_new_tokens`` or by the server's default budget was priced at the whole scripted
# answer (5,293 tokens); it now takes the server's own limit (HFRolloutServer.max_tokens).
@pytest.mark.parametrize("params, cap", [({"max_new_tokens": 16}, 16), ({}, 64)])
def test_scripted_pricing_is_capped_like_the_real_servers_generation(model_dir, params, cap):
    custom = {"scripted_generates": True}
    config = OmegaConf.create({"_target_": "verl.workers.config.RolloutConfig", "name": "hf_scripted",
                               "prompt_length": 512, "response_length": 64, "custom": custom})  # fmt: skip
    server = ScriptedDesignerServer(config, types.SimpleNamespace(path=str(model_dir), local_path=str(model_dir)))
    prompt = server.tokenizer.encode(f"Design a game. {_DESIGNER_TAIL}", add_special_tokens=False)

    async def main():
        answer = await server.generate(prompt, {"temperature": 1.0, **params}, "r1")
        await server.engine.aclose()
        return answer

    assert len(asyncio.run(main()).token_ids) > 64  # the scripted answer: a built-in's source
    assert server.priced_tokens == cap


# Found by this file's adversary pass and fixed: a sliding-window model (Mistral, Qwen2/3 with use_sliding_window,
# Gemma's sliding layers) windows the decode steps by cache index, not by position, so with right padding a short row
# lost its own prompt behind the pads (prompts of 60 and 5 tokens, window 16: its answer left the row alone's from
# the second token). Such a model keeps left padding (hf_engine._has_sliding_window).
def test_a_sliding_window_model_batches_like_each_row_alone(model_dir):
    torch.set_num_threads(1)
    base = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32, attn_implementation="sdpa")
    config = {**base.config.to_dict(), "use_sliding_window": True, "sliding_window": 16, "max_window_layers": 0}
    config.pop("layer_types", None)
    model = type(base)(Qwen3Config(**config)).eval()
    model.load_state_dict(base.state_dict())
    model.config._attn_implementation = "sdpa"
    assert set(model.config.layer_types) == {"sliding_attention"}
    engine = BatchedGenerator(model, eos_ids=[408, 406], pad_id=406)
    requests = [req(_long(60), 20, ignore_eos=True, **RP), req(_long(5, 9), 20, ignore_eos=True, **RP)]
    for r, got in zip(requests, engine.run_batch(requests)):
        _same(got, engine.run_batch([r])[0])
