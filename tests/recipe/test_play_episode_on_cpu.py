"""``recipe/spade/play.py`` (the agent loops' episode) on verl's real AgentLoopBase, tokenizer and tool parser.

The only stand-in is the LLM server at ``server_manager.generate`` (verl's narrowest rollout interface): it answers
with scripted text, tokenised by the tiny Qwen3 tokenizer, and made-up log-probs, and records every request, so the
token bookkeeping can be checked exactly. One test uses the real tiny model behind the same interface instead.
Environments run in the real sandbox.
"""

import asyncio
from pathlib import Path

import pytest
import torch
from omegaconf import OmegaConf
from transformers import AutoModelForCausalLM, AutoTokenizer
from verl.experimental.agent_loop.agent_loop import AgentLoopBase, DictConfigWrap
from verl.experimental.agent_loop.tool_parser import ToolParser
from verl.utils.dataset.rl_dataset import RLHFDataset
from verl.workers.rollout.replica import TokenOutput

from recipe.spade.cpu.hf_engine import BatchedGenerator, SamplingRequest
from recipe.spade.cpu.tiny_model import build_tiny_qwen3
from recipe.spade.play import play_episode
from spade_envs.builtin import builtin_source
from spade_envs.builtin.tool_use.trip_booking import TripBookingEnv
from spade_envs.sandbox import SandboxConfig, WorkerPool

BUDGET = 2048


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory) -> Path:
    return build_tiny_qwen3(tmp_path_factory.mktemp("tiny") / "model")


@pytest.fixture(scope="module")
def tokenizer(model_dir):
    return AutoTokenizer.from_pretrained(model_dir)


@pytest.fixture(scope="module")
def sandbox():
    with WorkerPool(SandboxConfig(call_timeout_s=5.0, soft_timeout_s=2.0, pool_size=1)) as pool:
        yield pool


class ScriptedServer:
    """``server_manager`` answering turn k with ``replies[k]`` (+ EOS), log-prob -0.01 * (k + 1) per token."""

    def __init__(self, tokenizer, replies: list[str]) -> None:
        self.tokenizer, self.replies, self.calls = tokenizer, replies, []

    async def generate(self, request_id, *, prompt_ids, sampling_params, **_):
        k = len(self.calls)
        ids = self.tokenizer.encode(self.replies[k], add_special_tokens=False) + [self.tokenizer.eos_token_id]
        ids = ids[: sampling_params["max_tokens"]]
        logps = [-0.01 * (k + 1)] * len(ids)
        self.calls.append((list(prompt_ids), ids, logps))
        return TokenOutput(token_ids=ids, log_probs=logps, extra_fields={"global_steps": 3})


class ModelServer:
    """``server_manager`` backed by the real tiny model (the hf rollout's batched generator), sampling."""

    def __init__(self, model_dir, tokenizer) -> None:
        model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32, attn_implementation="sdpa")
        self.engine = BatchedGenerator(model, eos_ids=[tokenizer.eos_token_id], pad_id=tokenizer.pad_token_id)
        self.calls = []

    async def generate(self, request_id, *, prompt_ids, sampling_params, **_):
        request = SamplingRequest(list(prompt_ids), sampling_params["max_tokens"], temperature=1.0, logprobs=True)
        out = self.engine.run_batch([request])[0]
        self.calls.append((list(prompt_ids), list(out.token_ids), list(out.log_probs)))
        return TokenOutput(token_ids=list(out.token_ids), log_probs=list(out.log_probs))


class Loop(AgentLoopBase):
    async def run(self, sampling_params, **kwargs):
        raise NotImplementedError("play_episode drives this loop's helpers directly")


def make_loop(tokenizer, server) -> Loop:
    asyncio.set_event_loop(asyncio.new_event_loop())  # AgentLoopBase captures the current loop
    config = OmegaConf.create({"actor_rollout_ref": {"rollout": {"response_length": BUDGET, "prompt_length": 4096}}})
    return Loop(DictConfigWrap(config), server, tokenizer, None, RLHFDataset, DictConfigWrap(OmegaConf.create({})),
                hf_model_type="qwen3")  # fmt: skip


def play(loop, sandbox, source, seed, **kwargs):
    """Run one episode on the event loop the agent loop captured at construction, as verl's worker does."""
    try:
        return loop.loop.run_until_complete(play_episode(loop, sandbox, source, seed, {"temperature": 1.0}, **kwargs))
    finally:
        loop.loop.close()
        asyncio.set_event_loop(None)


def check_bookkeeping(episode, calls):
    """Generated tokens are in the response with mask 1 and their own log-probs; all other tokens have mask 0.

    Each request's prompt must extend the previous request's prompt and output unchanged (no re-tokenisation
    drift), and the trained sequence must be the last request plus its output.
    """
    assert episode.prompt_ids == calls[0][0], "the prompt is the first request; everything after it is response"
    last_prompt, last_out, _ = calls[-1]
    assert episode.prompt_ids + episode.response_ids == last_prompt + last_out
    for (prompt, out, _), (next_prompt, _, _) in zip(calls, calls[1:]):
        assert next_prompt[: len(prompt) + len(out)] == prompt + out, "earlier tokens were re-tokenised"
    start = len(episode.prompt_ids)
    mask = [0] * len(episode.response_ids)
    logps = [0.0] * len(episode.response_ids)
    for prompt, out, out_logps in calls:
        for i, (token, logp) in enumerate(zip(out, out_logps)):
            pos = len(prompt) + i - start
            assert episode.response_ids[pos] == token
            mask[pos], logps[pos] = 1, logp
    assert episode.response_mask == mask
    assert len(episode.response_logprobs) == len(mask)
    assert [lp for lp, m in zip(episode.response_logprobs, mask) if m] == pytest.approx([lp for lp in logps if lp])


def test_a_game_episode_with_a_hint_only_in_the_first_observation(tokenizer, sandbox):
    source = builtin_source("SequenceOracleEnv")
    replies = ["I will look first. \\boxed{reveal}", "\\boxed{predict 1}", "\\boxed{predict 2}"]
    server = ScriptedServer(tokenizer, replies)
    hint = "HINT-7Q: look at the differences"
    episode = play(make_loop(tokenizer, server), sandbox, source, seed=4, hint=hint, max_turns=3, turn_tokens=64)
    assert episode.fault is None and episode.turns == len(server.calls) <= 3
    check_bookkeeping(episode, server.calls)
    text = tokenizer.decode(episode.prompt_ids + episode.response_ids)
    assert text.count("HINT-7Q") == 1 and "HINT-7Q" in tokenizer.decode(episode.prompt_ids)
    assert episode.info["max_global_steps"] == 3
    assert 0 < episode.sandbox_s < episode.wall_s


def test_tool_calls_are_parsed_by_verls_parser_dispatched_and_win(tokenizer, sandbox):
    env = TripBookingEnv()  # trusted built-in, only to read the reference answers for this seed
    env.reset(seed=11)
    replies = env.solution()
    server = ScriptedServer(tokenizer, replies)
    loop = make_loop(tokenizer, server)
    parser = ToolParser.get_tool_parser("hermes", tokenizer)
    episode = play(loop, sandbox, builtin_source("TripBookingEnv"), 11, tool_parser=parser, max_turns=10,
                   turn_tokens=256)  # fmt: skip
    assert episode.fault is None
    assert episode.outcome == 1.0 and episode.turns == len(replies)
    check_bookkeeping(episode, server.calls)
    observations = tokenizer.decode([t for t, m in zip(episode.response_ids, episode.response_mask) if not m])
    assert observations.count("<tool_response>") >= 3  # tool results come back as tool messages, masked out
    assert "HD-" in observations  # hold_seat really ran in the sandboxed env


def test_an_env_fault_is_reported_and_masks_the_whole_sample(tokenizer, sandbox):
    source = builtin_source("SequenceOracleEnv").replace(
        "    def step(self, action",
        "    def step(self, action):\n        raise RuntimeError('boom')\n\n    def _old_step(self, action",
        1,
    )
    server = ScriptedServer(tokenizer, ["\\boxed{reveal}"] * 3)
    episode = play(make_loop(tokenizer, server), sandbox, source, seed=1, max_turns=3, turn_tokens=32)
    assert episode.fault == "env_raised"
    assert episode.outcome == 0.0 and set(episode.response_mask) == {0}


def test_the_real_tiny_model_behind_the_same_interface_keeps_exact_bookkeeping(model_dir, tokenizer, sandbox):
    server = ModelServer(model_dir, tokenizer)
    episode = play(make_loop(tokenizer, server), sandbox, builtin_source("VaultCodeEnv"), seed=2, max_turns=3,
                   turn_tokens=24)  # fmt: skip
    assert episode.fault is None and episode.turns == len(server.calls) == 3  # random text never solves it
    check_bookkeeping(episode, server.calls)
    assert episode.outcome == 0.0
