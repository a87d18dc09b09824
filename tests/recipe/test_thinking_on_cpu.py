"""Thinking mode (``spade.agent.thinking``, issue 15): one training sample per assistant turn, each turn prompted
with the chat template's own rendering of the conversation so far.

Real parts: verl 0.9.1's ``AgentLoopBase`` (its Continuous Token builder renders the prompts), the tiny Qwen3
tokenizer with a thinking template that drops earlier ``<think>`` blocks as Qwen3-8B's does, the sandbox, verl's
``PPOTrainer._compute_advantage`` and GRPO, verl's ``ppo_loss``, verl's ``_update_actor``. Stand-ins: the LLM server
(scripted replies with made-up log-probs), TransferQueue (an in-memory store with its calls), the actor worker group.
The end-to-end run is the last test: two SPADE steps through verl's real trainer on CPU with the tiny model.
"""

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from hydra import compose, initialize_config_dir
from omegaconf import OmegaConf
from tensordict import TensorDict
from test_failure_rule_on_cpu import GAME, Boom, LocalPool, Server, failing, spade_config
from test_group_baselines_on_cpu import MemoryTQ
from test_spade_on_cpu import metric, step_lines
from transfer_queue import KVBatchMeta
from verl.experimental.agent_loop.agent_loop import AgentLoopBase, DictConfigWrap
from verl.experimental.agent_loop.tool_parser import ToolParser
from verl.trainer.ppo.v1 import trainer_base
from verl.utils import tensordict_utils as tu
from verl.utils.config import omega_conf_to_dataclass
from verl.utils.dataset.rl_dataset import RLHFDataset
from verl.workers.rollout.replica import TokenOutput
from verl.workers.utils.losses import ppo_loss

import recipe.spade.agent_loops as loops
import recipe.spade.trainer as spade_trainer
from recipe.spade.agent_loops import turn_outputs
from recipe.spade.budget import budget_of
from recipe.spade.cpu.tiny_model import build_tokenizer
from recipe.spade.trainer import SpadeTrainer, role_metrics
from recipe.spade.turn_batches import check_thinking_config
from recipe.spade.turns import play_turns
from spade_envs.builtin import builtin_source
from spade_envs.builtin.games.sequence_oracle import SequenceOracleEnv
from spade_envs.builtin.tool_use.trip_booking import TripBookingEnv
from spade_envs.envs.contract import extract_command
from spade_envs.play.prompts import agent_messages
from spade_envs.sandbox import AsyncSandboxEnv, SandboxConfig, WorkerPool

CONFIG_DIR = Path(__file__).resolve().parents[2] / "recipe" / "spade" / "config"
SCRIPT = Path(__file__).resolve().parents[2] / "examples" / "run_spade_tiny_cpu.sh"
REPLIES = ["<think>plan zero</think>\\boxed{reveal}", "<think>plan one</think>\\boxed{reveal}",
           "<think>plan two</think>\\boxed{predict 7}"]  # fmt: skip


@pytest.fixture(scope="module")
def tokenizer():
    return build_tokenizer(thinking_template=True)


@pytest.fixture(scope="module")
def sandbox():
    with WorkerPool(SandboxConfig(call_timeout_s=5.0, soft_timeout_s=2.0, pool_size=1)) as pool:
        yield pool


CUT = "<cut>"  # a reply ending in this marker gets no EOS (the rollout stopped it); None is an empty generation


class ScriptedServer:
    """``server_manager`` answering turn k with ``replies[k]`` (+ EOS), log-prob -0.01 * (k + 1) - 0.001 * i."""

    def __init__(self, tokenizer, replies: list[str]) -> None:
        self.tokenizer, self.replies, self.calls = tokenizer, replies, []

    async def generate(self, request_id, *, prompt_ids, sampling_params, **_):
        k = len(self.calls)
        reply = self.replies[k]
        eos = [] if reply is None or reply.endswith(CUT) else [self.tokenizer.eos_token_id]
        ids = self.tokenizer.encode((reply or "").removesuffix(CUT), add_special_tokens=False) + eos if reply else []
        ids = ids[: sampling_params["max_tokens"]]
        logps = [-0.01 * (k + 1) - 0.001 * i for i in range(len(ids))]
        self.calls.append((request_id, list(prompt_ids), ids, logps, sampling_params["max_tokens"]))
        return TokenOutput(token_ids=ids, log_probs=logps, extra_fields={"global_steps": 5})


class Loop(AgentLoopBase):
    async def run(self, sampling_params, **kwargs):
        raise NotImplementedError("play_turns drives this loop's helpers directly")


def play(tokenizer, sandbox, source, replies, prompt_length=4096, **kwargs):
    """One per-turn episode on a real AgentLoopBase whose chat template kwargs say *not* to think, as the launchers'."""
    asyncio.set_event_loop(asyncio.new_event_loop())  # AgentLoopBase captures the current loop
    server = ScriptedServer(tokenizer, replies)
    config = {"actor_rollout_ref": {"rollout": {"response_length": 512, "prompt_length": prompt_length}}}
    data = OmegaConf.create({"apply_chat_template_kwargs": {"enable_thinking": False}})
    loop = Loop(DictConfigWrap(OmegaConf.create(config)), server, tokenizer, None, RLHFDataset, DictConfigWrap(data),
                hf_model_type="qwen3")  # fmt: skip
    try:
        episode = loop.loop.run_until_complete(
            play_turns(loop, sandbox, source, 4, {"temperature": 1.0, "logprobs": True}, **kwargs)
        )
    finally:
        loop.loop.close()
        asyncio.set_event_loop(None)
    return episode, server.calls


def rendered(tokenizer, messages) -> list[int]:
    text = tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True, enable_thinking=True)
    return tokenizer.encode(text, add_special_tokens=False)


def test_each_turn_is_prompted_with_the_templates_rendering_of_the_turns_before_it(tokenizer, sandbox):
    episode, calls = play(tokenizer, sandbox, builtin_source("SequenceOracleEnv"), REPLIES, max_turns=3,
                          turn_tokens=40)  # fmt: skip
    assert episode.fault is None and episode.turns == len(episode.samples) == len(calls) == 3
    env = SequenceOracleEnv()  # the trusted built-in, replayed here to know every observation
    obs, _ = env.reset(seed=4)
    messages = agent_messages("games", obs)
    for k, (sample, (_, prompt, ids, logps, max_tokens)) in enumerate(zip(episode.samples, calls)):
        assert sample.prompt_ids == prompt == rendered(tokenizer, messages), f"turn {k}"
        assert sample.response_ids == ids and sample.response_logprobs == logps  # the turn, as generated
        assert max_tokens == 40  # min(turn_tokens, response_length): each turn has its own budget
        history = tokenizer.decode(prompt)
        assert history.endswith("<|im_start|>assistant\n"), "the agent's turn is rendered thinking (no empty block)"
        assert not any(f"plan {w}" in history for w in ("zero", "one", "two")), "earlier reasoning was stripped"
        assert history.count("\\boxed{reveal}") == k  # but every earlier answer is there
        messages.append({"role": "assistant", "content": REPLIES[k]})
        obs, reward, terminated, truncated, _ = env.step(extract_command(REPLIES[k]))
        messages.append({"role": "user", "content": obs})
    assert len({c[0] for c in calls}) == 1, "one request id per episode (sticky routing)"
    assert episode.outcome == (reward if terminated else 0.0) and episode.info["max_global_steps"] == 5


def test_turn_samples_carry_exact_masks_log_probs_and_the_episodes_fields(tokenizer, sandbox):
    episode, calls = play(tokenizer, sandbox, builtin_source("SequenceOracleEnv"), REPLIES, max_turns=3,
                          turn_tokens=40)  # fmt: skip
    extra = {"spade_role": "agent", "spade_outcome": episode.outcome, "spade_excluded": False}
    outputs = turn_outputs(episode, extra, n=64, pad_id=0, logprobs=True)
    assert len(outputs) == 3
    for k, (out, (_, prompt, ids, logps, _)) in enumerate(zip(outputs, calls)):
        assert out.prompt_ids == prompt and out.response_ids == ids
        assert out.response_mask == [1] * len(ids) and out.response_logprobs == logps
        assert out.extra_fields["spade_turn"] == k and out.extra_fields["spade_turns"] == 3
        assert out.extra_fields["spade_outcome"] == episode.outcome and out.reward_score is None
    assert len({id(o.extra_fields) for o in outputs}) == 3, "verl writes reward info into each output's own dict"


def test_an_env_fault_mid_episode_masks_every_turn_sample(tokenizer, sandbox):
    source = builtin_source("SequenceOracleEnv").replace(
        "        self.turn += 1\n",
        "        self.turn += 1\n        if self.turn == 2:\n            raise RuntimeError('boom')\n",
    )
    episode, calls = play(tokenizer, sandbox, source, REPLIES, max_turns=3, turn_tokens=40)
    assert episode.fault == "env_raised" and episode.outcome == 0.0 and len(episode.samples) == len(calls) == 2
    extra = {"spade_role": "agent", "spade_outcome": 0.0, "spade_excluded": True}
    outputs = turn_outputs(episode, extra, n=64, pad_id=0, logprobs=True)
    assert [set(o.response_mask) for o in outputs] == [{0}, {0}]
    assert all(o.extra_fields["spade_excluded"] for o in outputs)


def test_a_tool_use_episode_renders_tool_calls_and_results_into_each_turns_history(tokenizer, sandbox):
    env = TripBookingEnv()  # trusted built-in, only to read the reference answers for seed 4
    env.reset(seed=4)
    replies = [f"<think>step {k}</think>{reply}" for k, reply in enumerate(env.solution())]
    parser = ToolParser.get_tool_parser("hermes", tokenizer)
    episode, calls = play(tokenizer, sandbox, builtin_source("TripBookingEnv"), replies, tool_parser=parser,
                          max_turns=10, turn_tokens=512, prompt_length=32768)  # fmt: skip
    assert episode.fault is None and episode.outcome == 1.0 and len(episode.samples) == len(replies)
    last = tokenizer.decode(episode.samples[-1].prompt_ids)
    # verl's parser leaves the EOS in the content it returns; the history must not carry it as text
    assert last.count("<|im_end|>") == last.count("<|im_start|>") - 1  # each message closed once (not the last)
    assert last.count("<|im_start|>user\n<tool_response>") == len(replies) - 1  # every turn's tool results
    assert "HD-" in last  # hold_seat really ran in the sandboxed env
    assert "step 0" in last, "reasoning inside one chain of tool calls stays (no user message since), as in Qwen3"


def test_a_history_that_outgrows_the_prompt_length_ends_the_episode_truncated(tokenizer, sandbox):
    first = len(rendered(tokenizer, agent_messages("games", SequenceOracleEnv().reset(seed=4)[0])))
    episode, calls = play(tokenizer, sandbox, builtin_source("SequenceOracleEnv"), REPLIES, prompt_length=first + 5,
                          max_turns=3, turn_tokens=40)  # fmt: skip
    assert len(calls) == 1 and len(episode.samples) == 1, "turn 2's history did not fit: no second turn"
    assert episode.truncated_by_length and episode.fault is None and episode.outcome == 0.0


@pytest.fixture
def env_steps(monkeypatch):
    """Every action the sandboxed env is sent: ``("step", action)`` or ``("calls", calls, answer)``."""
    sent: list[tuple] = []
    step, step_calls = AsyncSandboxEnv.step, AsyncSandboxEnv.step_calls

    async def recording_step(self, action):
        sent.append(("step", action))
        return await step(self, action)

    async def recording_calls(self, calls, answer=None):
        sent.append(("calls", calls, answer))
        return await step_calls(self, calls, answer)

    monkeypatch.setattr(AsyncSandboxEnv, "step", recording_step)
    monkeypatch.setattr(AsyncSandboxEnv, "step_calls", recording_calls)
    return sent


def test_the_env_acts_only_on_the_answer_after_the_last_think_end(tokenizer, sandbox, env_steps):
    replies = ["<think>draft \\boxed{reveal}</think>I will not box", "<think>a</think>x</think>\\boxed{reveal}"]
    episode, calls = play(tokenizer, sandbox, builtin_source("SequenceOracleEnv"), replies, max_turns=2,
                          turn_tokens=40)  # fmt: skip
    assert env_steps == [("step", "I will not box"), ("step", "reveal")], "the draft in the reasoning is not acted on"
    assert episode.fault is None and len(episode.samples) == 2 and not episode.truncated_by_length
    history = tokenizer.decode(calls[1][1])
    assert "I will not box" in history and "draft" not in history  # the template stripped turn 0's reasoning


def test_the_tool_parser_reads_only_the_answer(tokenizer, sandbox, env_steps):
    env = TripBookingEnv()
    env.reset(seed=4)
    call = env.solution()[0]  # a native tool call
    assert "<tool_call>" in call
    replies = [f"<think>maybe {call}</think>No call yet.", f"<think>now</think>{call}"]
    parser = ToolParser.get_tool_parser("hermes", tokenizer)
    episode, calls = play(tokenizer, sandbox, builtin_source("TripBookingEnv"), replies, tool_parser=parser,
                          max_turns=2, turn_tokens=512, prompt_length=32768)  # fmt: skip
    assert env_steps[0] == ("step", "No call yet."), "a drafted tool call inside <think> is not executed"
    assert env_steps[1][0] == "calls" and len(env_steps) == 2
    history = tokenizer.decode(calls[1][1])  # a plain answer gets a user message back: the template strips the draft
    assert "No call yet." in history and "maybe" not in history and episode.fault is None


@pytest.mark.parametrize("reply", ["<think>draft \\boxed{predict 7} and then", "<think>ok</think>\\boxed{reveal}<cut>"])
def test_a_turn_cut_off_ends_the_episode_truncated_with_no_env_step(tokenizer, sandbox, env_steps, reply):
    """No </think> (cut mid-thought, or a reply that never closes it), or no EOS at the turn budget (cut mid-answer)."""
    budget = len(tokenizer.encode(reply.removesuffix(CUT), add_special_tokens=False))
    episode, calls = play(tokenizer, sandbox, builtin_source("SequenceOracleEnv"), [reply, *REPLIES], max_turns=3,
                          turn_tokens=budget + 1 if "</think>" not in reply else budget)  # fmt: skip
    assert env_steps == [] and len(calls) == 1
    assert len(episode.samples) == 1 and episode.samples[0].response_ids == calls[0][2], "the turn is still trained"
    assert episode.truncated_by_length and not episode.terminated and episode.outcome == 0.0 and not episode.fault
    out = turn_outputs(episode, {"spade_excluded": False}, n=64, pad_id=0, logprobs=True)
    assert len(out) == 1 and set(out[0].response_mask) == {1}


def test_a_turn_ended_on_its_own_only_if_it_closed_with_the_eos_or_stopped_short_of_its_budget(tokenizer):
    from types import SimpleNamespace

    from recipe.spade.turns import _ended

    eos, word = tokenizer.eos_token_id, tokenizer.encode("ok", add_special_tokens=False)[-1]

    def out(ids, stop="completed"):
        return SimpleNamespace(token_ids=ids, stop_reason=stop)

    assert _ended(tokenizer, out([word, eos]), 2) and _ended(tokenizer, out([word, eos], "length"), 2)
    assert _ended(tokenizer, out([word]), 2), "stopped short of its budget (a stop string)"
    assert not _ended(tokenizer, out([word, word]), 2), "vLLM says completed for a length stop"
    assert not _ended(tokenizer, out([word], "length"), 2) and not _ended(tokenizer, out([word, eos], "aborted"), 2)


def test_an_empty_generation_is_no_sample_and_ends_the_episode(tokenizer, sandbox, env_steps):
    episode, calls = play(tokenizer, sandbox, builtin_source("SequenceOracleEnv"), [REPLIES[0], None, REPLIES[2]],
                          max_turns=3, turn_tokens=40)  # fmt: skip
    assert len(calls) == 2 and env_steps == [("step", "reveal")]
    assert len(episode.samples) == 1 and episode.samples[0].response_ids == calls[0][2]
    assert episode.fault is None and episode.outcome == 0.0 and not episode.terminated
    # the episode's last (advantage-carrying) row is a trained turn, never an all-masked one
    assert set(turn_outputs(episode, {"spade_excluded": False}, n=64, pad_id=0, logprobs=True)[-1].response_mask) == {1}
    # nothing generated at all: as without thinking, one masked pad token and a no_turn fault (excluded)
    episode, _ = play(tokenizer, sandbox, builtin_source("SequenceOracleEnv"), [None], max_turns=3, turn_tokens=40)
    assert episode.fault == "no_turn" and len(episode.samples) == 1 and episode.response_mask == [0]


# -- the real agent loops in thinking mode (test_failure_rule_on_cpu's stand-ins: scripted server, local env pool) --


class RecordingServer(Server):
    """test_failure_rule's scripted server, recording every prompt it is sent."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.prompts: list[str] = []

    async def generate(self, request_id, *, prompt_ids, sampling_params, **kw):
        self.prompts.append(self.tokenizer.decode(prompt_ids))
        return await super().generate(request_id, prompt_ids=prompt_ids, sampling_params=sampling_params, **kw)


def run_thinking_loop(cls, cfg, tokenizer, server, pool, monkeypatch, role):
    monkeypatch.setattr(loops, "_env_pool", lambda spade: pool)
    asyncio.set_event_loop(asyncio.new_event_loop())
    loop = cls(DictConfigWrap(cfg), server, tokenizer, None, RLHFDataset, DictConfigWrap(cfg.data),
               hf_model_type="qwen3")  # fmt: skip
    try:
        params = {"temperature": 1.0, "top_p": 1.0, "logprobs": True}
        return loop.loop.run_until_complete(loop.run(params, extra_info={"role": role, "step": 0, "slot": 0}))
    finally:
        loop.loop.close()
        asyncio.set_event_loop(None)


def thinking_spade_config(tmp_path, *extra):
    return spade_config(tmp_path, "games", "spade.agent.thinking=true",
                        "+data.apply_chat_template_kwargs.enable_thinking=false", *extra)  # fmt: skip


@pytest.mark.parametrize("fault", [False, True])
def test_the_env_agent_loop_returns_one_sample_per_turn_and_records_one_play(tmp_path, tokenizer, monkeypatch, fault):
    if fault:
        monkeypatch.setattr(AsyncSandboxEnv, "step", failing(Boom("injected")))
    pool = LocalPool(GAME, "games")
    server = RecordingServer(tokenizer, "", ["<think>hm</think>\\boxed{reveal}"])
    outs = run_thinking_loop(loops.SpadeEnvAgentLoop, thinking_spade_config(tmp_path), tokenizer, server, pool,
                             monkeypatch, "agent")  # fmt: skip
    turns = 1 if fault else 3  # spade.max_turns=3; the fault ends the episode at its first step
    assert isinstance(outs, list) and len(outs) == turns == len(server.prompts)
    for k, out in enumerate(outs):
        out.as_dict()  # what verl's worker does with each output next
        assert out.extra_fields["spade_turn"] == k and out.extra_fields["spade_turns"] == turns
        assert out.extra_fields["spade_excluded"] is fault and set(out.response_mask) == {0 if fault else 1}
        assert out.response_logprobs == [-0.5] * len(out.response_ids)
    assert pool.plays == [("e1", 0, 0.0, "env_crashed" if fault else None, 0)], "one play per episode, not per turn"
    assert all(p.endswith("<|im_start|>assistant\n") for p in server.prompts), "the agent's turns think"


def test_a_compact_filtered_episode_masks_all_its_turn_samples(tmp_path, tokenizer, monkeypatch):
    env = TripBookingEnv()
    env.reset(seed=5)
    calls_only = [f"<think>k</think>{step}" for step in env.solution() if "<answer>" not in step]  # turns run out
    cfg = spade_config(tmp_path, "tool_use", "spade.agent.thinking=true", "spade.agent.compact_filter=true",
                       "spade.max_turns=2")  # fmt: skip
    outs = run_thinking_loop(loops.SpadeEnvAgentLoop, cfg, tokenizer, Server(tokenizer, "", calls_only),
                             LocalPool(builtin_source("TripBookingEnv"), "tool_use"), monkeypatch, "agent")  # fmt: skip
    assert len(outs) == 2 and all(o.extra_fields["spade_compact_filtered"] for o in outs)
    assert all(o.extra_fields["spade_excluded"] and set(o.response_mask) == {0} for o in outs)


def test_a_turn_cut_mid_thought_counts_as_not_ended_by_the_env(tmp_path, tokenizer, monkeypatch):
    cfg = spade_config(tmp_path, "tool_use", "spade.agent.thinking=true", "spade.agent.compact_filter=true")
    outs = run_thinking_loop(loops.SpadeEnvAgentLoop, cfg, tokenizer, Server(tokenizer, "", ["<think>never closed"]),
                             LocalPool(builtin_source("TripBookingEnv"), "tool_use"), monkeypatch, "agent")  # fmt: skip
    assert len(outs) == 1 and outs[0].extra_fields["spade_compact_filtered"] and outs[0].extra_fields["spade_excluded"]
    assert outs[0].extra_fields["spade_outcome"] == 0.0
    assert outs[0].extra_fields["spade_truncated_by_length"] is True  # counted in spade/agent/truncated_by_length_rate


def test_the_designer_does_not_think_but_its_measurement_plays_do(tmp_path, tokenizer, monkeypatch):
    server = RecordingServer(tokenizer, f"Here it is.\n```python\n{GAME}```", ["\\boxed{reveal}"])
    pool = LocalPool(GAME, "games")
    out = run_thinking_loop(loops.SpadeDesignerLoop, thinking_spade_config(tmp_path), tokenizer, server, pool,
                            monkeypatch, "designer")  # fmt: skip
    assert out.extra_fields["spade_valid"] is True and len(out.extra_fields["spade_measure"]["no_hint"]) == 2
    design, hint, *plays = server.prompts
    empty_think = "<|im_start|>assistant\n<think>\n\n</think>\n\n"
    assert design.endswith(empty_think) and hint.endswith(empty_think)  # data.apply_chat_template_kwargs: no thinking
    assert plays and all(p.endswith("<|im_start|>assistant\n") for p in plays)  # the agent's measurement turns think


# -- the trainer: advantages, loss weights, mini-batches ------------------------------------------------------------


def compose_cfg(*overrides: str):
    with initialize_config_dir(config_dir=str(CONFIG_DIR), version_base=None):
        return compose(config_name="spade_trainer", overrides=["spade.corpus=x", "spade.agent.thinking=true",
                       "data.train_batch_size=4",
                       "actor_rollout_ref.actor.ppo_mini_batch_size=2",
                       "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=1", *overrides])  # fmt: skip


L = 3  # response tokens per turn row in the store


def turn_rows(uid: str, session: int, turns: int, score: float, excluded: bool = False) -> list[tuple]:
    extra = {"spade_role": "agent", "spade_env_fault": "env_raised" if excluded else "", "spade_excluded": excluded,
             "spade_outcome": score, "spade_skill": "logic"}  # fmt: skip
    return [(f"{uid}_{session}_{k}", score, {**extra, "spade_turn": k, "spade_turns": turns}) for k in range(turns)]


def run_advantage(store, cfg, rows):
    for key, score, extra in rows:
        mask = torch.full((L,), 0 if extra.get("spade_excluded") else 1, dtype=torch.int64)
        rm = torch.zeros(L)
        rm[-1] = score
        store.rows[key] = {"uid": key.split("_")[0], "response_mask": mask, "rm_scores": rm, "extra_fields": extra}
    trainer = object.__new__(SpadeTrainer)
    trainer.config, trainer.global_steps = cfg, 1
    keys = [key for key, _, _ in rows]
    metrics: dict = {}
    trainer._compute_advantage(KVBatchMeta(keys=keys, tags=[{} for _ in keys], partition_id="train"), metrics)
    return keys, metrics


@pytest.fixture
def store(monkeypatch):
    memory = MemoryTQ()
    monkeypatch.setattr(spade_trainer, "tq", memory)
    monkeypatch.setattr(trainer_base, "tq", memory)
    return memory


def test_every_turn_sample_gets_its_episodes_grpo_advantage_and_a_weight_of_one_episode(store):
    cfg = compose_cfg(
        "actor_rollout_ref.actor.loss_agg_mode=seq-mean-token-mean", "algorithm.norm_adv_by_std_in_grpo=true"
    )
    rows = [*turn_rows("g", 0, 5, 1.0), *turn_rows("g", 1, 1, 0.0), *turn_rows("g", 2, 3, 0.0),
            *turn_rows("g", 3, 2, 0.0, excluded=True),  # an env fault: every turn out of the baseline
            ("d_0_0", 0.5, {"spade_role": "designer", "spade_skill": "logic", "spade_excluded": False}),
            ("d_1_0", -1.0, {"spade_role": "designer", "spade_skill": "logic", "spade_excluded": False})]  # fmt: skip
    keys, metrics = run_advantage(store, cfg, rows)
    adv = {key: store.rows[key]["advantages"] for key in keys}
    std = (((1 - 1 / 3) ** 2 + 2 * (1 / 3) ** 2) / 2) ** 0.5  # GRPO over the three healthy *episodes*, not 9 turns
    for k in range(5):
        assert adv[f"g_0_{k}"].tolist() == pytest.approx([(1 - 1 / 3) / std] * L, rel=1e-4)
    for key in ["g_1_0", "g_2_0", "g_2_1", "g_2_2"]:
        assert adv[key].tolist() == pytest.approx([(0 - 1 / 3) / std] * L, rel=1e-4)
    assert adv["g_3_0"].abs().max() == 0 and adv["g_3_1"].abs().max() == 0
    assert metrics["spade/excluded_samples"] == 2 and metrics["spade/excluded_episodes"] == 1
    # the designer scale is the paper's, from the step's configured plays, never from the turn rows:
    # min(50, train_batch_size 4 x n 4 / 2 designer samples x regen_every 4) = 32
    assert metrics["spade/designer/advantage_scale"] == 32.0
    # seq-mean: a turn row weighs rows per mini-batch / (episodes per mini-batch x its episode's turns); k = 4 / 2
    rows_per_mini_batch, episodes = len(keys) // 2, 2 * 4
    for key, _, extra in rows:
        expected = rows_per_mini_batch / (episodes * extra.get("spade_turns", 1))
        assert store.rows[key]["rollout_is_weights"].tolist() == pytest.approx([expected] * L), key


def test_under_token_mean_no_weight_is_written(store):
    cfg = compose_cfg("actor_rollout_ref.actor.loss_agg_mode=token-mean")
    keys, _ = run_advantage(store, cfg, [*turn_rows("g", 0, 5, 1.0), *turn_rows("g", 1, 1, 0.0)])
    assert all("rollout_is_weights" not in store.rows[key] for key in keys)


def episode_weight_in_verls_loss(cfg, turn_lengths: list[list[int]], weights: list[float]) -> list[float]:
    """Each episode's total weight in verl's ``ppo_loss``: the summed gradient of the loss w.r.t. its tokens' log-probs.

    ``turn_lengths[e]`` lists the response lengths of episode e's turn rows, ``weights[e]`` its rows' loss weight.
    Advantage 1 and log-prob = old log-prob (ratio 1, no clipping), so a token's gradient is minus its loss weight.
    """
    actor = omega_conf_to_dataclass(cfg.actor_rollout_ref.actor)
    lens = [n for turns in turn_lengths for n in turns]
    row_w = [w for turns, w in zip(turn_lengths, weights) for _ in turns]

    def nest(xs):
        return torch.nested.nested_tensor(xs, layout=torch.jagged)

    data = TensorDict({"prompts": nest([torch.ones(2, dtype=torch.long) for _ in lens]),
                       "responses": nest([torch.ones(n, dtype=torch.long) for n in lens]),
                       "response_mask": nest([torch.ones(n, dtype=torch.long) for n in lens]),
                       "old_log_probs": nest([torch.zeros(n) for n in lens]),
                       "advantages": nest([torch.ones(n) for n in lens]),
                       "rollout_is_weights": nest([torch.full((n,), w) for n, w in zip(lens, row_w)])},
                      batch_size=[len(lens)])  # fmt: skip
    tu.assign_non_tensor(data, dp_size=1, batch_num_tokens=sum(lens), global_batch_size=len(lens))
    log_probs = torch.zeros(sum(n + 2 for n in lens), requires_grad=True)
    offsets = torch.tensor([0, *torch.tensor([n + 2 for n in lens]).cumsum(0).tolist()])
    loss, _ = ppo_loss(actor, {"log_probs": torch.nested.nested_tensor_from_jagged(log_probs, offsets)}, data)
    loss.backward()
    per_row = [-float(g.sum()) for g in torch.split(log_probs.grad, [n + 2 for n in lens])]
    totals, i = [], 0
    for turns in turn_lengths:
        totals.append(sum(per_row[i : i + len(turns)]))
        i += len(turns)
    return totals


def test_a_five_turn_and_a_one_turn_episode_weigh_the_same_in_verls_loss():
    from recipe.spade.turn_batches import loss_weights

    five, one = [4, 9, 2, 7, 3], [6]  # response tokens per turn
    cfg = compose_cfg("actor_rollout_ref.actor.loss_agg_mode=seq-mean-token-mean")
    rows = len(five) + len(one)  # one mini-batch of two episodes (ppo_mini_batch_size x n = 2 x 1)
    weights = loss_weights([5, 1], "seq-mean-token-mean", rows, episodes=2)
    totals = episode_weight_in_verls_loss(cfg, [five, one], weights)
    assert totals == pytest.approx([0.5, 0.5]), "each episode is one of the mini-batch's two sequences"
    unweighted = episode_weight_in_verls_loss(cfg, [five, one], [1.0, 1.0])
    assert unweighted[0] == pytest.approx(5 * unweighted[1]), "without the weight, turns would count as episodes"
    # token-mean (verl's default): no weight, and the turns weigh what the same tokens weigh in one sequence
    cfg = compose_cfg("actor_rollout_ref.actor.loss_agg_mode=token-mean")
    assert loss_weights([5, 1], "token-mean", rows, episodes=2) == [1.0, 1.0]
    as_turns = episode_weight_in_verls_loss(cfg, [five, one], [1.0, 1.0])
    as_sequence = episode_weight_in_verls_loss(cfg, [[sum(five)], one], [1.0, 1.0])
    assert as_turns == pytest.approx(as_sequence)


class FakeActorGroup:
    def __init__(self) -> None:
        self.seen: list[dict] = []

    def update_actor(self, batch):
        self.seen.append(dict(batch.extra_info))
        return {"metrics": {"mfu": [0.0]}}


def test_a_step_keeps_its_number_of_mini_batches_whatever_its_row_count():
    cfg = compose_cfg("actor_rollout_ref.rollout.n=4")  # train_batch_size 4, ppo_mini_batch_size 2: k = 2
    trainer = object.__new__(SpadeTrainer)
    trainer.config, trainer.global_steps, trainer.actor_rollout_wg = cfg, 1, FakeActorGroup()
    trainer.use_critic = False
    multiple = trainer._get_required_batch_multiple(dp_size=2)
    assert multiple == 2 * 4  # k mini-batches of lcm(dp 2, n 4, dp x micro 1) rows
    for rows in (3 * multiple, 7 * multiple):  # e.g. 24 or 56 turn rows for the same 16 episodes
        keys = [f"u_{i}_0" for i in range(rows)]
        metrics: dict = {}
        trainer._update_actor(KVBatchMeta(keys=keys, tags=[{} for _ in keys], partition_id="train"), metrics)
        info = trainer.actor_rollout_wg.seen[-1]
        assert info["mini_batch_size"] == info["global_batch_size"] == rows // 2  # two optimizer steps, always
        assert rows % info["mini_batch_size"] == 0 and metrics["spade/update/rows_per_mini_batch"] == rows // 2
    assert cfg.actor_rollout_ref.actor.ppo_mini_batch_size == 2, "the config is left as it was"
    plain = compose_cfg("spade.agent.thinking=false", "actor_rollout_ref.rollout.n=4")
    trainer.config = plain
    assert trainer._get_required_batch_multiple(dp_size=2) == 2 * 4  # verl's own: ppo_mini_batch_size x n


def test_role_metrics_count_episodes_not_turn_samples():
    from recipe.spade.reward_manager import designer_reward_config

    extra = [e for _, _, e in [*turn_rows("g", 0, 5, 1.0), *turn_rows("g", 1, 1, 0.0)]]
    scores = [1.0] * 5 + [0.0]
    metrics = role_metrics(extra, scores, [True] * 6, designer_reward_config(compose_cfg()))
    assert metrics["spade/agent/samples"] == 2 and metrics["spade/agent/reward_mean"] == 0.5
    assert metrics["spade/agent/turn_samples"] == 6 and metrics["spade/agent/turns_mean"] == 3.0


def test_thinking_is_checked_at_start_and_said_in_the_budget_line():
    cfg = compose_cfg()
    check_thinking_config(cfg)
    assert budget_of(cfg).line().endswith(" agent_samples=per_turn")
    assert "agent_samples=" not in budget_of(compose_cfg("spade.agent.thinking=false")).line()
    with pytest.raises(ValueError, match="loss_mode=bypass_mode ignores"):
        check_thinking_config(compose_cfg("actor_rollout_ref.actor.loss_agg_mode=seq-mean-token-mean",
                                          "actor_rollout_ref.actor.policy_loss.loss_mode=bypass_mode"))  # fmt: skip
    with pytest.raises(ValueError, match="needs algorithm.adv_estimator=grpo, got 'rloo'"):
        check_thinking_config(compose_cfg("algorithm.adv_estimator=rloo"))
    with pytest.raises(
        ValueError, match=r"data.train_batch_size \(4\) to be a multiple of .*ppo_mini_batch_size \(3\)"
    ):
        check_thinking_config(compose_cfg("actor_rollout_ref.actor.ppo_mini_batch_size=3"))
    with pytest.raises(ValueError, match="cannot use algorithm.use_kl_in_reward=true"):
        check_thinking_config(compose_cfg("algorithm.use_kl_in_reward=true"))
    with pytest.raises(ValueError, match=r"needs trainer.v1.sync.parameter_sync_step=1, got 2"):
        check_thinking_config(compose_cfg("+trainer.v1.sync.parameter_sync_step=2"))
    check_thinking_config(compose_cfg("+trainer.v1.sync.parameter_sync_step=1"))
    with pytest.raises(ValueError, match="cannot use algorithm.rollout_correction.rollout_rs='token_k1'"):
        check_thinking_config(compose_cfg("algorithm.rollout_correction.rollout_rs=token_k1"))
    for key in ("algorithm.use_kl_in_reward=true", "algorithm.rollout_correction.rollout_rs=token_k1"):
        check_thinking_config(compose_cfg("spade.agent.thinking=false", key))  # only thinking mode refuses them


def test_the_batch_dump_gives_padding_rows_no_turn(tmp_path):
    """verl's padding rows copy the first real row's fields (extra_fields too); the dump must not show its turns."""
    extra = [{"spade_role": "agent", "spade_turn": 2, "spade_turns": 5}] * 2  # row 1 is padding, a copy of row 0
    padded = {"response_mask": torch.ones(2, 3, dtype=torch.int64), "rm_scores": torch.zeros(2, 3)}
    batch = KVBatchMeta(keys=["g_0_2", "pad_0_0"], tags=[{}, {"is_padding": True}], partition_id="train")
    spade_trainer._dump_batch(tmp_path, 1, batch, extra, [True, False], [False, False], padded, torch.zeros(2, 3),
                              torch.tensor([[0.1] * 3, [0.5] * 3]))  # fmt: skip
    real, pad = [json.loads(line) for line in (tmp_path / "batches.jsonl").read_text().splitlines()]
    assert (real["turn"], real["turns"], real["padding"]) == (2, 5, False)
    assert (pad["turn"], pad["turns"], pad["role"], pad["padding"]) == (None, None, None, True)


# -- end to end ------------------------------------------------------------------------------------------------------


def test_two_thinking_steps_run_through_verls_trainer_on_cpu(tmp_path):
    """Two SPADE steps (a regeneration step, then a play step) in thinking mode, the tiny model thinking-templated."""
    env = {**os.environ, "PYTHON": sys.executable, "RUN_DIR": str(tmp_path / "run"),
           "STEPS": "2"}  # fmt: skip
    command = ["bash", str(SCRIPT), f"spade_cpu.tiny_model_dir={tmp_path / 'model'}",
               "spade_cpu.tiny_thinking_template=true", "actor_rollout_ref.rollout.name=hf_scripted",
               "spade.agent.thinking=true", "spade.max_turns=2", "spade.validation.max_turns=25",
               "spade.dump_batches=true", "actor_rollout_ref.actor.loss_agg_mode=seq-mean-token-mean"]  # fmt: skip
    run = subprocess.run(command, capture_output=True, text=True, timeout=900, cwd=tmp_path, env=env)
    log = run.stdout + run.stderr
    assert run.returncode == 0, log[-5000:]
    assert "agent_samples=per_turn" in log
    lines = step_lines(log)
    # the scripted designer's valid env was measured by per-turn plays of both arms without an env fault
    assert metric(lines[1], "spade/designer/samples") == 4 and metric(lines[1], "spade/propose/validity_rate") == 0.5
    rows = [json.loads(line) for line in (tmp_path / "run" / "spade" / "batches.jsonl").read_text().splitlines()]
    for step in (1, 2):
        agent = [r for r in rows if r["global_step"] == step and r["role"] == "agent" and not r["padding"]]
        episodes = {r["uid"] + r["key"].rsplit("_", 2)[1] for r in agent}
        assert len(episodes) == (4 if step == 1 else 8)  # a play step fills the designer rows with agent rows
        assert metric(lines[step], "spade/agent/samples") == len(episodes)  # metrics count episodes
        assert metric(lines[step], "spade/agent/turn_samples") == len(agent)
        step_rows = [r for r in rows if r["global_step"] == step]  # two mini-batches (train_batch_size 4 / 2)
        assert metric(lines[step], "spade/update/rows_per_mini_batch") == len(step_rows) / 2
        for r in step_rows:  # seq-mean: a turn row weighs rows per mini-batch / (2 x n 2 episodes x its turns)
            if r["padding"]:  # verl's padding rows copy a real row's fields; their weight counts one turn
                assert r["turn"] is None and r["turns"] is None
            turns = r["turns"] if r["role"] == "agent" else 1
            assert r["loss_weight"] == pytest.approx(len(step_rows) / 2 / (4 * turns), rel=1e-5)
        assert len(agent) == sum(r["turns"] for r in agent if r["turn"] == r["turns"] - 1)
        # the random tiny model seldom closes its <think> (one token of 415): most episodes end truncated after one
        # turn, their turn still trained; several-turn episodes are covered by the unit tests above
        assert all(r["trained_tokens"] > 0 for r in agent if not r["excluded"])
        for episode in episodes:  # every turn row of an episode: its score and its advantage
            mine = [r for r in agent if r["uid"] + r["key"].rsplit("_", 2)[1] == episode]
            assert sorted(r["turn"] for r in mine) == list(range(mine[0]["turns"]))
            assert len({r["score"] for r in mine}) == 1 and len({round(r["advantage"], 6) for r in mine}) == 1
