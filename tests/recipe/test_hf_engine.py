"""The hf rollout's batched generator on a real tiny Qwen3: sampling rules, log-probs, batching, weight updates."""

import asyncio

import pytest
import torch
from transformers import AutoModelForCausalLM

from recipe.spade.cpu.hf_engine import BatchedGenerator, SamplingRequest, length_groups
from recipe.spade.cpu.tiny_model import build_tiny_qwen3


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    return build_tiny_qwen3(tmp_path_factory.mktemp("tiny") / "model")


@pytest.fixture
def engine(model_dir):
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32, attn_implementation="sdpa")
    yield BatchedGenerator(model, eos_ids=[408, 406], pad_id=406, max_batch=8)
    torch.set_num_threads(threads)


PROMPTS = [[407, 72, 105, 408], [407, 50, 51, 52, 53, 54, 408, 10], [407, 65]]


def greedy(prompt, n=8, **kw):
    return SamplingRequest(prompt_ids=prompt, max_tokens=n, temperature=0.0, logprobs=True, **kw)


def test_greedy_is_deterministic_and_respects_max_tokens(engine):
    first = engine.run_batch([greedy(p) for p in PROMPTS])
    second = engine.run_batch([greedy(p) for p in PROMPTS])
    assert [g.token_ids for g in first] == [g.token_ids for g in second]
    for g in first:
        assert 1 <= len(g.token_ids) <= 8 and len(g.log_probs) == len(g.token_ids)
        assert g.stop_reason in ("completed", "length")
        assert g.stop_reason == "completed" or len(g.token_ids) == 8


def test_batched_rows_equal_unbatched_rows_despite_padding(engine):
    batched = engine.run_batch([greedy(p) for p in PROMPTS])
    alone = [engine.run_batch([greedy(p)])[0] for p in PROMPTS]
    assert [g.token_ids for g in batched] == [g.token_ids for g in alone]
    for a, b in zip(batched, alone):
        assert max(abs(x - y) for x, y in zip(a.log_probs, b.log_probs)) < 1e-4


def test_log_probs_match_a_plain_forward_pass(engine):
    prompt = PROMPTS[1]
    gen = engine.run_batch([greedy(prompt, ignore_eos=True)])[0]
    ids = torch.tensor([prompt + gen.token_ids])
    with torch.no_grad():
        logits = engine.model(input_ids=ids).logits[0].float()
    expected = torch.log_softmax(logits[len(prompt) - 1 : -1], -1)
    reference = [float(expected[i, t]) for i, t in enumerate(gen.token_ids)]
    assert max(abs(a - b) for a, b in zip(gen.log_probs, reference)) < 1e-5


def test_sampling_parameters(engine):
    torch.manual_seed(0)
    top1 = engine.run_batch([SamplingRequest(PROMPTS[0], 6, temperature=1.3, top_k=1, logprobs=True)])[0]
    assert top1.token_ids == engine.run_batch([greedy(PROMPTS[0], 6)])[0].token_ids[: len(top1.token_ids)]
    torch.manual_seed(1)
    hot = [engine.run_batch([SamplingRequest(PROMPTS[0], 6, temperature=5.0, ignore_eos=True)])[0] for _ in range(4)]
    assert len({tuple(g.token_ids) for g in hot}) > 1, "high-temperature sampling should vary"
    assert all(g.log_probs is None for g in hot), "log-probs only when asked"
    assert all(len(g.token_ids) == 6 for g in hot), "ignore_eos runs to max_tokens"


def test_concurrent_requests_are_batched(engine):
    async def main():
        requests = [greedy(p) for p in PROMPTS * 3]
        return await asyncio.gather(*(engine.generate(r) for r in requests))

    results = asyncio.run(main())
    assert len(results) == 9 and engine.batches_run < 9 and engine.largest_batch > 1
    assert [g.token_ids for g in results[:3]] == [g.token_ids for g in results[3:6]]


def test_weight_updates_apply_and_mismatches_are_refused(engine):
    before = engine.run_batch([greedy(PROMPTS[1], ignore_eos=True)])[0].log_probs
    state = {k: v.clone() * 1.5 for k, v in engine.model.state_dict().items() if k != "lm_head.weight"}
    engine.load_state_dict(state, tied_embeddings=True)
    after = engine.run_batch([greedy(PROMPTS[1], ignore_eos=True)])[0].log_probs
    assert before != after
    with pytest.raises(KeyError, match="unexpected"):
        engine.load_state_dict({**state, "extra.weight": torch.zeros(1)}, tied_embeddings=True)
    partial = dict(state)
    partial.pop("model.norm.weight")
    with pytest.raises(KeyError, match="missing"):
        engine.load_state_dict(partial, tied_embeddings=True)


def test_failures_reach_every_waiter(engine):
    async def main():
        bad = SamplingRequest(prompt_ids=[10**6], max_tokens=2)  # out of vocabulary
        return await asyncio.gather(engine.generate(bad), return_exceptions=True)

    (error,) = asyncio.run(main())
    assert isinstance(error, (IndexError, RuntimeError))


def test_a_gather_window_batches_requests_that_arrive_apart(engine):
    """Agent loops reach the model a few ms apart; with a window they share one batch instead of 1 + the rest."""
    engine.gather_s = 2.0

    async def main():
        async def late(i, r):
            await asyncio.sleep(0.02 * i)
            return await engine.generate(r)

        return await asyncio.gather(*(late(i, greedy(p)) for i, p in enumerate(PROMPTS * 2)))

    results = asyncio.run(main())
    assert len(results) == 6 and engine.batches_run == 1 and engine.largest_batch == 6
    alone = [engine.run_batch([greedy(p)])[0].token_ids for p in PROMPTS * 2]
    assert [g.token_ids for g in results] == alone, "each waiter gets its own row's result"


def test_a_negative_gather_window_or_pad_slack_is_refused(model_dir):
    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32, attn_implementation="sdpa")
    with pytest.raises(ValueError, match="gather_s must be >= 0"):
        BatchedGenerator(model, eos_ids=[408], pad_id=406, gather_s=-0.1)
    with pytest.raises(ValueError, match="pad_slack must be >= 0"):
        BatchedGenerator(model, eos_ids=[408], pad_id=406, pad_slack=-1)


def _long(n: int, start: int = 0) -> list[int]:
    return [407] + [10 + (start + i) % 390 for i in range(n - 1)]


def test_rows_of_very_different_lengths_in_one_batch_equal_each_row_alone(engine):
    """Short rows padded far on the right (the prompt pass runs without a padding mask) get their own answers."""
    prompts = [_long(600), PROMPTS[0], _long(300, 7), PROMPTS[2]]
    batched = engine.run_batch([greedy(p, ignore_eos=True) for p in prompts])
    alone = [engine.run_batch([greedy(p, ignore_eos=True)])[0] for p in prompts]
    assert [g.token_ids for g in batched] == [g.token_ids for g in alone]
    for a, b in zip(batched, alone):
        assert max(abs(x - y) for x, y in zip(a.log_probs, b.log_probs)) < 1e-4


def test_length_groups_bound_each_rows_padding():
    # SPADE's mixed batch: three designer prompts and an agent turn; a hint prompt with three agent turns
    assert length_groups([3400, 3371, 3388, 703], 256) == [[3], [1, 2, 0]]
    assert length_groups([4024, 703, 731, 731], 256) == [[1, 2, 3], [0]]
    assert length_groups([4, 8, 2], 256) == [[2, 0, 1]]  # a few tokens of padding: one batch
    assert length_groups([4, 8, 2], 0) == [[2, 0], [1]]  # 4 at most doubles 2; 8 would more than double 4
    assert length_groups([], 256) == []
    for lengths in ([5, 900, 901, 2000, 4100, 12, 300], [1] * 5 + [700] * 3):
        groups = length_groups(lengths, 256)
        assert sorted(i for g in groups for i in g) == list(range(len(lengths)))
        for g in groups:
            assert all(max(lengths[j] for j in g) - lengths[i] <= max(lengths[i], 256) for i in g)


def test_a_gathered_batch_of_mixed_lengths_runs_shortest_group_first(engine):
    """A short turn is answered before a long prompt's batch runs, and nothing waits on a row of another group."""
    engine.gather_s, engine.pad_slack = 1.0, 16
    order = []

    async def main():
        async def ask(name, request):
            result = await engine.generate(request)
            order.append(name)
            return result

        return await asyncio.gather(ask("long", greedy(_long(400), 8)), ask("short", greedy(PROMPTS[1], 8)))

    long, short = asyncio.run(main())
    assert order == ["short", "long"] and engine.batches_run == 2 and engine.largest_batch == 1
    assert long.token_ids == engine.run_batch([greedy(_long(400), 8)])[0].token_ids


def test_aclose_stops_the_batching_task_and_a_later_request_starts_another(engine):
    async def main():
        await engine.aclose()  # nothing running yet: a no-op
        first = await engine.generate(greedy([5, 6, 7], 3))
        task = engine._worker
        await engine.aclose()
        assert task.cancelled() and engine._worker is None
        second = await engine.generate(greedy([5, 6, 7], 3))
        await engine.aclose()
        return first, second

    first, second = asyncio.run(main())
    assert first.token_ids == second.token_ids
