"""One rule for failures: nothing an environment or the sandbox does raises out of a SPADE agent loop.

The real loops (``SpadeEnvAgentLoop``, ``SpadeDesignerLoop``) run on verl's real ``AgentLoopBase`` with the tiny Qwen3
tokenizer and a real sandbox. Two stand-ins, each at the narrowest interface: the LLM server at
``server_manager.generate`` (scripted answers), and the env-pool Ray actor at ``.remote`` (a local object, so no Ray
cluster is needed). A failure is injected at each sandbox call site in turn; every run must return a sample verl can
store (``AgentLoopOutput.as_dict()`` succeeds), masked and tagged with its fault (agent) or failure code (designer).
"""

import asyncio
from pathlib import Path

import pytest
from hydra import compose, initialize_config_dir
from transformers import AutoTokenizer
from verl.experimental.agent_loop.agent_loop import DictConfigWrap
from verl.utils.dataset.rl_dataset import RLHFDataset
from verl.workers.rollout.replica import TokenOutput

import recipe.spade.agent_loops as loops
from recipe.spade.cpu.tiny_model import build_tiny_qwen3
from recipe.spade.reward_manager import designer_reward_config, score_sample
from spade_envs.builtin import builtin_source
from spade_envs.builtin.tool_use.trip_booking import TripBookingEnv
from spade_envs.sandbox import AsyncSandboxEnv, SandboxError

CONFIG_DIR = Path(__file__).resolve().parents[2] / "recipe" / "spade" / "config"
GAME = builtin_source("SequenceOracleEnv")


@pytest.fixture(scope="module")
def tokenizer(tmp_path_factory):
    return AutoTokenizer.from_pretrained(build_tiny_qwen3(tmp_path_factory.mktemp("tiny") / "model"))


def spade_config(tmp_path, setting="games", *extra):
    with initialize_config_dir(config_dir=str(CONFIG_DIR), version_base=None):
        cfg = compose(
            config_name="spade_trainer",
            overrides=[f"spade.setting={setting}", "spade.fixed_env.enable=true", f"spade.run_dir={tmp_path}",
                       "spade.plays_per_arm=2", "spade.max_turns=3", "spade.turn_tokens=256",
                       "spade.designer.max_tokens=16384", "spade.hint.max_tokens=64", "spade.sandbox.pool_size=1",
                       "actor_rollout_ref.rollout.response_length=16384",
                       "actor_rollout_ref.rollout.prompt_length=8192", *extra],
        )  # fmt: skip
    return cfg


class Server:
    """``server_manager``: designer prompts get ``design``, hint prompts a fixed hint, agent turns ``agent``."""

    def __init__(self, tokenizer, design: str, agent: list[str], audit: str = "\\boxed{yes}") -> None:
        self.tokenizer, self.design, self.agent, self.turn, self.audit = tokenizer, design, agent, 0, audit

    async def generate(self, request_id, *, prompt_ids, sampling_params, **_):
        prompt = self.tokenizer.decode(prompt_ids[-300:])
        if "holding the complete module" in prompt:
            text = self.design
        elif "if the task can be completed" in prompt:
            text = self.audit
        elif "Reply with the hint text only" in prompt:
            text = "Work one step at a time."
        else:
            text = self.agent[self.turn % len(self.agent)]
            self.turn += 1
        ids = self.tokenizer.encode(text, add_special_tokens=False)[: sampling_params["max_tokens"] - 1]
        ids.append(self.tokenizer.eos_token_id)
        logps = [-0.5] * len(ids) if sampling_params.get("logprobs") else None
        return TokenOutput(token_ids=ids, log_probs=logps, extra_fields={"global_steps": 1})


class LocalPool:
    """The env pool actor's interface (``actor.method.remote(...)`` awaited), answered locally."""

    def __init__(self, source: str, setting: str) -> None:
        self.source, self.setting, self.plays, self.designs, self.records = source, setting, [], [], []

    def __getattr__(self, name):
        async def call(*args):
            return getattr(self, f"_{name}")(*args)

        return type("Method", (), {"remote": staticmethod(call)})

    def _agent_task(self, step, slot):
        return {"env_id": "e1", "source": self.source, "setting": self.setting, "seed": 5, "skill": "x", "step": step}

    def _record_play(self, *args):
        self.plays.append(args)

    def _seed_secret(self):  # the run's seed secret (drawn by the real pool at a fresh start)
        return bytes(range(32))

    def _designer_task(self, step, slot):
        content = "Design: end with one block holding the complete module, and write nothing after it."
        return {"setting": self.setting, "skill": "logical_deduction", "doc_id": None,
                "messages": [{"role": "user", "content": content}]}  # fmt: skip

    def _register_design(self, step, outcome):
        self.designs.append(outcome)

    def _record(self, entries):  # the run record (spade.record)
        self.records.extend(entries)


def run_loop(cls, cfg, tokenizer, server, pool, monkeypatch, role):
    monkeypatch.setattr(loops, "_env_pool", lambda spade: pool)
    asyncio.set_event_loop(asyncio.new_event_loop())
    loop = cls(DictConfigWrap(cfg), server, tokenizer, None, RLHFDataset, DictConfigWrap(cfg.data),
               hf_model_type="qwen3")  # fmt: skip
    params = {"temperature": 1.0, "top_p": 1.0, "logprobs": True}
    try:
        out = loop.loop.run_until_complete(loop.run(params, extra_info={"role": role, "step": 0, "slot": 0}))
    finally:
        loop.loop.close()
        asyncio.set_event_loop(None)
    out.as_dict()  # what verl's worker does next: must not raise (an empty response used to, with IndexError)
    assert len(out.response_ids) == len(out.response_mask) == len(out.response_logprobs) >= 1
    return out


def failing(kind_error):
    async def fail(*args, **kwargs):
        raise kind_error

    return fail


class Boom(SandboxError):
    kind = "env_crashed"


@pytest.mark.parametrize(
    ("setting", "method"),
    [("games", "create"), ("games", "reset"), ("games", "step"), ("games", "close"),
     ("tool_use", "tools"), ("tool_use", "step_calls")],
)  # fmt: skip
@pytest.mark.parametrize("error", [Boom("injected"), RuntimeError("host bug")], ids=["sandbox_error", "host_error"])
def test_a_failure_at_any_agent_call_site_gives_a_masked_tagged_sample(tmp_path, tokenizer, monkeypatch, setting,
                                                                        method, error):  # fmt: skip
    source = GAME if setting == "games" else builtin_source("TripBookingEnv")
    if setting == "games":
        replies = ["\\boxed{reveal}"]
    else:
        env = TripBookingEnv()
        env.reset(seed=5)
        replies = env.solution()
    if method == "create":
        monkeypatch.setattr(AsyncSandboxEnv, "create", classmethod(lambda cls, *a, **k: failing(error)()))
    else:
        monkeypatch.setattr(AsyncSandboxEnv, method, failing(error))
    pool = LocalPool(source, setting)
    out = run_loop(loops.SpadeEnvAgentLoop, spade_config(tmp_path, setting), tokenizer, Server(tokenizer, "", replies),
                   pool, monkeypatch, "agent")  # fmt: skip
    kind = "env_crashed" if isinstance(error, SandboxError) else "host_error"
    extra = out.extra_fields
    assert extra["spade_env_fault"] == kind and extra["spade_excluded"] is True
    assert set(out.response_mask) == {0}
    assert pool.plays == [("e1", 0, 0.0, kind, 0)]
    assert score_sample(designer_reward_config(spade_config(tmp_path)), extra)[0] == 0.0


def test_an_env_that_raises_at_reset_on_the_agent_seed_gives_a_masked_sample(tmp_path, tokenizer, monkeypatch):
    source = GAME.replace("    def reset(self, seed", "    def reset(self, seed=None, options=None):\n"
                          "        raise ValueError('no seed 5')\n\n    def _old_reset(self, seed", 1)  # fmt: skip
    out = run_loop(loops.SpadeEnvAgentLoop, spade_config(tmp_path), tokenizer, Server(tokenizer, "", ["x"]),
                   LocalPool(source, "games"), monkeypatch, "agent")  # fmt: skip
    assert out.extra_fields["spade_env_fault"] == "env_raised" and out.response_mask == [0]


def design(source: str) -> str:
    return f"Here it is.\n```python\n{source}```"


@pytest.mark.parametrize("site", ["validation", "hint_vetting", "measurement_reset", "measurement_step"])
def test_a_failure_at_any_designer_call_site_is_a_designer_failure_code(tmp_path, tokenizer, monkeypatch, site):
    if site == "validation":
        monkeypatch.setattr(loops, "admit", lambda *a, **k: (_ for _ in ()).throw(RuntimeError("host bug")))
    elif site == "hint_vetting":
        monkeypatch.setattr(loops, "vet_hint_on_seeds", lambda *a: (_ for _ in ()).throw(Boom("died on a seed")))
    elif site == "measurement_reset":
        monkeypatch.setattr(AsyncSandboxEnv, "reset", failing(Boom("died")))
    else:
        monkeypatch.setattr(AsyncSandboxEnv, "step", failing(Boom("died")))
    pool = LocalPool(GAME, "games")
    cfg = spade_config(tmp_path)
    out = run_loop(loops.SpadeDesignerLoop, cfg, tokenizer, Server(tokenizer, design(GAME), ["\\boxed{reveal}"]),
                   pool, monkeypatch, "designer")  # fmt: skip
    extra = out.extra_fields
    expected = {"validation": "crashed", "hint_vetting": "crashed", "measurement_reset": "crashed",
                "measurement_step": "crashed"}  # fmt: skip
    assert extra["spade_valid"] is False and extra["spade_failure"] == expected[site]
    assert pool.designs[0]["valid"] is False
    assert score_sample(designer_reward_config(cfg), extra)[0] < 0  # a penalty, the designer's signal
    assert set(out.response_mask) == {1}  # the design itself trains (with its penalty)


def test_the_designer_samples_at_the_rollout_temperature(tmp_path, tokenizer, monkeypatch):
    seen = []

    class Recording(Server):
        async def generate(self, request_id, *, prompt_ids, sampling_params, **kw):
            seen.append(dict(sampling_params))
            return await super().generate(request_id, prompt_ids=prompt_ids, sampling_params=sampling_params, **kw)

    cfg = spade_config(tmp_path)
    assert "temperature" not in cfg.spade.designer  # no second temperature to drift from the trained one
    run_loop(loops.SpadeDesignerLoop, cfg, tokenizer, Recording(tokenizer, "no code", []), LocalPool(GAME, "games"),
             monkeypatch, "designer")  # fmt: skip
    assert seen[0]["temperature"] == 1.0 and seen[0]["top_p"] == 1.0


def test_every_turn_of_an_episode_uses_one_request_id(tmp_path, tokenizer, monkeypatch):
    ids = []

    class Recording(Server):
        async def generate(self, request_id, **kw):
            ids.append(request_id)
            return await super().generate(request_id, **kw)

    server = Recording(tokenizer, "", ["\\boxed{reveal}"])
    out = run_loop(loops.SpadeEnvAgentLoop, spade_config(tmp_path), tokenizer, server, LocalPool(GAME, "games"),
                   monkeypatch, "agent")  # fmt: skip
    assert out.num_turns >= 4 and len(ids) >= 2 and len(set(ids)) == 1


@pytest.mark.parametrize("compact", [True, False])
def test_the_compact_filter_masks_tool_use_episodes_the_env_did_not_end(tmp_path, tokenizer, monkeypatch, compact):
    env = TripBookingEnv()
    env.reset(seed=5)
    calls_only = [step for step in env.solution() if "<answer>" not in step]  # never answers: turns run out
    cfg = spade_config(tmp_path, "tool_use", f"spade.agent.compact_filter={compact}", "spade.max_turns=2")
    out = run_loop(loops.SpadeEnvAgentLoop, cfg, tokenizer, Server(tokenizer, "", calls_only),
                   LocalPool(builtin_source("TripBookingEnv"), "tool_use"), monkeypatch, "agent")  # fmt: skip
    assert out.extra_fields["spade_env_fault"] == ""
    assert out.extra_fields["spade_compact_filtered"] is compact and out.extra_fields["spade_excluded"] is compact
    assert (set(out.response_mask) == {0}) is compact


@pytest.mark.parametrize(("verdict", "code"), [("\\boxed{no}", "audit_rejected"), ("\\boxed{yes}", "")])
def test_the_tool_use_audit_asks_the_policy_and_rejects_only_on_no(tmp_path, tokenizer, monkeypatch, verdict, code):
    source = builtin_source("TripBookingEnv")
    cfg = spade_config(
        tmp_path,
        "tool_use",
        "spade.audit.enable=true",
        "spade.audit.max_tokens=64",
        "spade.max_turns=25",
        "actor_rollout_ref.rollout.prompt_length=32768",  # the audit reads the whole env: no room, no verdict
    )
    server = Server(tokenizer, design(source), ["<answer>done</answer>"], audit=verdict)
    out = run_loop(loops.SpadeDesignerLoop, cfg, tokenizer, server, LocalPool(source, "tool_use"), monkeypatch,
                   "designer")  # fmt: skip
    assert out.extra_fields["spade_failure"] == code and out.extra_fields["spade_valid"] is (not code)


def test_the_loops_sandbox_pools_leave_no_worker_behind_when_shut_down(tmp_path):
    """A loop's sandbox pool lives as long as its process; ``shutdown_sandboxes`` (also run at exit) kills it all."""
    from pathlib import Path as _Path

    from spade_envs.sandbox import process

    def workers() -> list[int]:  # this process's children running the worker script (bwrap wraps one in two)
        script = str(_Path(process.__file__).resolve().with_name("worker.py"))
        found = []
        for children in _Path("/proc/self/task").glob("*/children"):
            for pid in children.read_text().split():
                try:
                    if script in _Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace"):
                        found.append(int(pid))
                except OSError:
                    continue
        return found

    loops.shutdown_sandboxes()
    pool = loops._sandbox({"pool_size": 2, "preload_numpy": False})
    assert pool.acquire(timeout=30) is not None and workers()
    loops.shutdown_sandboxes()
    assert not loops._SANDBOXES and not workers()
