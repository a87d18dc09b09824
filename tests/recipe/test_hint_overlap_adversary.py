"""Adversarial checks of the hint written while validation runs (``SpadeDesignerLoop._measure``, issue 39).

The hint task starts before validation ends; these try to make it outlive the design, answer the wrong code, wait
forever, or let an exception out of the loop. The harness is ``test_failure_rule_on_cpu.py``'s (tiny tokenizer,
scripted server, local env pool, real sandbox and validation); a fake ``admit`` drives ``on_loaded`` where the
order of events must be exact.
"""

import asyncio
import gc
import json
import logging
import threading

import pytest
from test_failure_rule_on_cpu import GAME, LocalPool, Server, design, run_loop, spade_config
from test_hint_during_validation_on_cpu import LOSES
from transformers import AutoTokenizer
from verl.experimental.agent_loop.agent_loop import DictConfigWrap
from verl.utils.dataset.rl_dataset import RLHFDataset

import recipe.spade.agent_loops as loops
import spade_envs.design.validate as validate
from recipe.spade.cpu.tiny_model import build_tiny_qwen3
from spade_envs.builtin import builtin_source
from spade_envs.design.validate import ValidationReport

HINT = "Work one step at a time."
REAL_ADMIT = loops.admit


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    return build_tiny_qwen3(tmp_path_factory.mktemp("tiny") / "model")


@pytest.fixture(scope="module")
def tokenizer(model_dir):
    return AutoTokenizer.from_pretrained(model_dir)


@pytest.fixture
def asyncio_errors(caplog):
    """What asyncio logged at ERROR ("Task was destroyed but it is pending", "exception was never retrieved")."""
    caplog.set_level(logging.ERROR, logger="asyncio")

    def errors() -> list[str]:
        gc.collect()  # such warnings come when the forgotten task is collected
        return [r.getMessage() for r in caplog.records if r.name == "asyncio"]

    return errors


class Gate(Server):
    """The scripted server; the hint's generation can be held (until cancelled or the audit is asked) or fail."""

    def __init__(self, *args, hold=None, error=None, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.hold, self.error, self.hint_prompts = hold, error, []
        self.hint_started, self.hint_cancelled, self.audit_asked = (
            threading.Event(),
            threading.Event(),
            threading.Event(),
        )
        self.release, self.hint_finished = threading.Event(), threading.Event()

    async def generate(self, request_id, *, prompt_ids, sampling_params, **kw):
        tail = self.tokenizer.decode(prompt_ids[-300:])
        if "if the task can be completed" in tail:
            self.audit_asked.set()
        if "Reply with the hint text only" in tail:
            self.hint_prompts.append(self.tokenizer.decode(prompt_ids))
            self.hint_started.set()
            try:
                if self.hold == "forever":
                    await asyncio.Event().wait()
                elif self.hold == "release":  # the hint answers once the test releases it
                    assert await asyncio.get_running_loop().run_in_executor(None, self.release.wait, 20)
                    self.hint_finished.set()
                elif self.hold == "audit":  # the hint answers only once the validation thread's audit is asked
                    assert await asyncio.get_running_loop().run_in_executor(None, self.audit_asked.wait, 20)
                if self.error is not None:
                    raise self.error
            except asyncio.CancelledError:
                self.hint_cancelled.set()
                raise
        return await super().generate(request_id, prompt_ids=prompt_ids, sampling_params=sampling_params, **kw)


def _designer(tmp_path, tokenizer, server, monkeypatch, pool=None, *extra):
    pool = pool or LocalPool(GAME, "games")
    setting = pool.setting
    out = run_loop(loops.SpadeDesignerLoop, spade_config(tmp_path, setting, *extra), tokenizer, server, pool,
                   monkeypatch, "designer")  # fmt: skip
    return out, pool


@pytest.mark.parametrize("ending", ["rejects", "raises"])
def test_validation_ending_badly_after_the_load_waits_out_the_hint_in_flight(tmp_path, tokenizer, monkeypatch, ending,
                                                                             asyncio_errors):  # fmt: skip
    # not cancelled: verl's server_manager.generate, cancelled while it awaits the load balancer, leaves a server's
    # request count one too high; the server generates the hint either way
    server = Gate(tokenizer, design(GAME), ["\\boxed{reveal}"], hold="release")

    def admit(text, pool, setting, config, *, on_loaded, **kwargs):
        on_loaded(GAME)
        assert server.hint_started.wait(10)  # the hint's generation is under way
        if ending == "raises":
            raise RuntimeError("host bug after the load")
        return None, ValidationReport(ok=False, code="solution_does_not_win", reason="never wins")

    real_drop = loops._drop

    async def drop(task, requested):  # the hint is still in flight when it is dropped; it may end from then on
        server.release.set()
        await real_drop(task, requested)

    monkeypatch.setattr(loops, "admit", admit)
    monkeypatch.setattr(loops, "_drop", drop)
    out, pool = _designer(tmp_path, tokenizer, server, monkeypatch)
    assert out.extra_fields["spade_failure"] == ("crashed" if ending == "raises" else "solution_does_not_win")
    assert server.hint_finished.is_set() and not server.hint_cancelled.is_set()  # waited for before returning
    assert pool.designs[0]["valid"] is False and pool.records[0]["hint_text"] is None
    assert asyncio_errors() == []


def test_validation_raising_before_the_load_asks_no_hint(tmp_path, tokenizer, monkeypatch, asyncio_errors):
    server = Gate(tokenizer, design(GAME), ["\\boxed{reveal}"])
    monkeypatch.setattr(loops, "admit", lambda *a, **k: (_ for _ in ()).throw(RuntimeError("host bug")))
    out, _ = _designer(tmp_path, tokenizer, server, monkeypatch)
    assert out.extra_fields["spade_failure"] == "crashed" and not server.hint_started.is_set()
    assert asyncio_errors() == []


def test_a_hint_that_fails_while_validation_rejects_the_env_stays_out_of_the_result(tmp_path, tokenizer, monkeypatch,
                                                                                    asyncio_errors):  # fmt: skip
    server = Gate(tokenizer, design(LOSES), ["\\boxed{reveal}"], error=RuntimeError("server died on the hint"))
    original = validate._check_resets

    def held(*args, **kwargs):  # validation goes on only once the hint has been asked for (and has failed)
        assert server.hint_started.wait(10)
        return original(*args, **kwargs)

    monkeypatch.setattr(validate, "_check_resets", held)
    out, _ = _designer(tmp_path, tokenizer, server, monkeypatch)
    assert out.extra_fields["spade_valid"] is False
    assert out.extra_fields["spade_failure"] == "solution_does_not_win"  # validation's verdict, not the hint's error
    assert asyncio_errors() == []  # the failed hint was retrieved ("exception was never retrieved" otherwise)


def test_a_hint_that_fails_for_a_valid_env_raises_as_it_did_when_asked_after_validation(tmp_path, tokenizer,
                                                                                        monkeypatch):  # fmt: skip
    server = Gate(tokenizer, design(GAME), ["\\boxed{reveal}"], error=RuntimeError("server died on the hint"))
    with pytest.raises(RuntimeError, match="server died on the hint"):  # the server's failure, not the design's
        _designer(tmp_path, tokenizer, server, monkeypatch)


@pytest.mark.parametrize("calls", [0, 1, 2], ids=["never_loaded", "once", "twice"])
def test_the_hint_is_asked_once_however_often_on_loaded_is_called(tmp_path, tokenizer, monkeypatch, calls):
    def admit(*args, on_loaded, **kwargs):
        repeat = None if calls == 0 else lambda code: [on_loaded(code) for _ in range(calls)] and None
        return REAL_ADMIT(*args, on_loaded=repeat, **kwargs)

    monkeypatch.setattr(loops, "admit", admit)
    server = Gate(tokenizer, design(GAME), ["\\boxed{reveal}"])
    out, pool = _designer(tmp_path, tokenizer, server, monkeypatch)
    assert out.extra_fields["spade_valid"] is True and len(server.hint_prompts) == 1  # never waits forever
    assert pool.records[0]["hint_text"] == HINT


def test_the_hint_writer_reads_the_admitted_code_without_the_designers_comments(tmp_path, tokenizer, monkeypatch):
    planted = GAME.replace("def solution(self) -> list[str]:", "def solution(self) -> list[str]:  # XYZZYPLUGH", 1)
    assert planted != GAME
    admitted = []

    def admit(*args, **kwargs):
        source, report = REAL_ADMIT(*args, **kwargs)
        admitted.append(source)
        return source, report

    monkeypatch.setattr(loops, "admit", admit)
    server = Gate(tokenizer, design(planted), ["\\boxed{reveal}"])
    out, _ = _designer(tmp_path, tokenizer, server, monkeypatch)
    assert out.extra_fields["spade_valid"] is True and admitted == [planted]
    (prompt,) = server.hint_prompts
    assert "XYZZYPLUGH" not in prompt and "def solution(self) -> list[str]:" in prompt


def test_cancelling_the_designer_mid_validation_cancels_its_hint(tmp_path, tokenizer, monkeypatch, asyncio_errors):
    server = Gate(tokenizer, design(GAME), ["\\boxed{reveal}"], hold="forever")
    release = threading.Event()
    original = validate._check_resets

    def held(*args, **kwargs):  # validation stays after the load until the test lets it go
        release.wait(20)
        return original(*args, **kwargs)

    monkeypatch.setattr(validate, "_check_resets", held)
    monkeypatch.setattr(loops, "_env_pool", lambda spade: LocalPool(GAME, "games"))
    event_loop = asyncio.new_event_loop()
    asyncio.set_event_loop(event_loop)
    cfg = spade_config(tmp_path)
    agent = loops.SpadeDesignerLoop(DictConfigWrap(cfg), server, tokenizer, None, RLHFDataset, DictConfigWrap(cfg.data),
                                    hf_model_type="qwen3")  # fmt: skip

    async def scenario():
        run = asyncio.ensure_future(agent.run({"temperature": 1.0, "top_p": 1.0, "logprobs": True},
                                              extra_info={"role": "designer", "step": 0, "slot": 0}))  # fmt: skip
        assert await asyncio.get_running_loop().run_in_executor(None, server.hint_started.wait, 20)
        run.cancel()
        with pytest.raises(asyncio.CancelledError):
            await run
        return server.hint_cancelled.is_set(), [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]

    try:
        cancelled, left = event_loop.run_until_complete(scenario())
    finally:
        release.set()
        event_loop.run_until_complete(event_loop.shutdown_default_executor())
        event_loop.close()
        asyncio.set_event_loop(None)
    assert cancelled and left == []  # nothing of the design outlives it
    assert asyncio_errors() == []


@pytest.mark.parametrize(("verdict", "code"), [("\\boxed{no}", "audit_rejected"), ("\\boxed{yes}", "")])
def test_the_audit_from_the_validation_thread_and_the_hint_run_at_once(tmp_path, tokenizer, monkeypatch, verdict,
                                                                       code, asyncio_errors):  # fmt: skip
    source = builtin_source("TripBookingEnv")
    server = Gate(tokenizer, design(source), ["<answer>done</answer>"], audit=verdict, hold="audit")
    out, pool = _designer(tmp_path, tokenizer, server, monkeypatch, LocalPool(source, "tool_use"),
                          "spade.audit.enable=true", "spade.audit.max_tokens=64", "spade.max_turns=25",
                          "actor_rollout_ref.rollout.prompt_length=32768")  # fmt: skip
    assert server.hint_started.is_set() and server.audit_asked.is_set()  # the hint waited on the audit: no deadlock
    assert out.extra_fields["spade_failure"] == code and out.extra_fields["spade_valid"] is (not code)
    assert pool.records[0]["hint_text"] == (None if code else HINT)
    assert asyncio_errors() == []


def test_an_env_too_deep_for_the_hint_writers_code_view_is_a_designer_outcome(tmp_path, tokenizer, monkeypatch):
    """Code that compiles and validates, but nests deeper than ``ast.unparse`` recurses (a long ``1+1+...`` chain)."""
    deep = GAME + "\n_DEPTH = " + "+".join(["1"] * 600) + "\n"
    server = Gate(tokenizer, design(deep), ["\\boxed{reveal}"])
    out, pool = _designer(tmp_path, tokenizer, server, monkeypatch)  # raised RecursionError out of the loop
    assert out.extra_fields["spade_valid"] is True and pool.designs[0]["valid"] is True
    assert server.hint_prompts == [] and pool.records[0]["hint"] is None  # no hint: no regret to be had
    assert pool.designs[0]["regret"] == 0.0


def test_a_failed_batch_counts_no_work_in_the_stats_line(model_dir, tmp_path, monkeypatch):
    """Change 2: the generation counters move only for batches that answered."""
    from test_hf_generation_stats import _drive, _server

    path = tmp_path / "gen.jsonl"
    server = _server(model_dir, {"hf_stats_path": str(path)})
    monkeypatch.setattr(server.engine, "_decode", lambda requests: (_ for _ in ()).throw(RuntimeError("no memory")))
    with pytest.raises(RuntimeError, match="no memory"):
        _drive(server, [[[5, 6, 7], [8, 9]]])
    _drive(server, [1])
    (line,) = [json.loads(row) for row in path.read_text().splitlines()]
    assert line == {"step": 1, "replica": 0, "requests": 0, "prompt_tokens": 0, "generated_tokens": 0, "busy_s": 0.0}
