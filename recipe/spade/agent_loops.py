"""SPADE's two agent loops on verl's ``AgentLoopBase``: the Reasoning Agent and the Environment Designer.

Registered through ``config/agent_loops.yaml`` (``rollout.agent.agent_loop_config_path``); each dataset row names
its loop in ``agent_name`` and carries ``extra_info = {role, step, slot}``. The loops report what happened in
``extra_fields`` (``spade_*`` keys); the reward itself is computed by SPADE's reward manager
(``recipe/spade/reward_manager.py``) on verl's reward loop, from the ``reward.*`` config.

* ``spade_agent``: asks the env pool which live env and seed to play, plays it in the sandbox (no hint), and
  returns the episode with its outcome. An env fault yields a masked-out sample and is reported as a fault. With
  ``spade.agent.thinking`` it returns one sample per assistant turn (``turns.py``), all sharing the episode's
  outcome, fault and exclusion, tagged ``spade_turn`` / ``spade_turns``.
* ``spade_designer``: asks the pool for a design task, generates an environment, validates it in the sandbox while
  the policy writes its hint at low temperature (requested once the env has loaded; dropped if validation rejects
  the env), vets the hint for leaks, then measures the policy on the env
  ``plays_per_arm`` times without and with the hint on the same seeds, and with a placebo hint of the same shape
  (``spade.hint.placebo``; measurement only: these plays never train) and returns the designer sample with its
  validation outcome and the measurement.
"""

from __future__ import annotations

import asyncio
import atexit
import functools
import logging
import time
import uuid
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

import ray
from omegaconf import OmegaConf
from verl.experimental.agent_loop.agent_loop import AgentLoopBase, AgentLoopOutput
from verl.experimental.agent_loop.tool_parser import ToolParser
from verl.workers.rollout.replica import TokenOutput

from recipe.spade.env_pool import ACTOR_NAME, SpadeEnvPool
from recipe.spade.play import Episode, play_episode, weight_versions
from recipe.spade.prompt_fit import fit_prompt
from recipe.spade.recording import design_entry, episode_entry
from recipe.spade.reward_manager import designer_reward_config
from recipe.spade.turns import play_turns, render_history
from spade_envs.browse.run_record import RecordCaps
from spade_envs.design.ast_hash import without_comments
from spade_envs.design.designer import admit
from spade_envs.design.measure import measurement_seeds, unpaired_seeds, vet_hint_on_seeds
from spade_envs.design.placebo import placebo_hint
from spade_envs.design.prompts import audit_messages, audit_verdict, hint_messages
from spade_envs.design.rewards import WindowStats, credited_regret, win_rate
from spade_envs.design.validate import ValidationConfig
from spade_envs.envs.failures import FAILURE_CODES, fault_code
from spade_envs.sandbox import SandboxConfig, WorkerPool

__all__ = ["SpadeDesignerLoop", "SpadeEnvAgentLoop", "loop_output", "turn_outputs"]

logger = logging.getLogger(__name__)

_SANDBOXES: dict[str, WorkerPool] = {}


def _sandbox(config: dict[str, Any]) -> WorkerPool:
    """One sandbox worker pool per agent-loop worker process (worker processes are not shareable)."""
    key = repr(sorted(config.items()))
    if key not in _SANDBOXES:
        _SANDBOXES[key] = WorkerPool(SandboxConfig.from_dict(config))
    return _SANDBOXES[key]


def shutdown_sandboxes() -> None:
    """Kill every sandbox worker this process started (at exit, and for tests that drive loops in-process)."""
    while _SANDBOXES:
        _SANDBOXES.popitem()[1].shutdown()


atexit.register(shutdown_sandboxes)


_POOL: list[Any] = []


def _env_pool(spade: dict[str, Any]) -> Any:
    """The run's env pool actor, created by the first loop anywhere.

    Detached so that no loop owns it (loops are created per sample); the run's Ray cluster ends it with the job.
    """
    if not _POOL:
        actor = ray.remote(SpadeEnvPool).options(name=ACTOR_NAME, get_if_exists=True, lifetime="detached", num_cpus=0)
        _POOL.append(actor.remote(spade))
    return _POOL[0]


class _SpadeLoop(AgentLoopBase):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.spade: dict[str, Any] = OmegaConf.to_container(self.config.spade, resolve=True)
        self.response_length = self.rollout_config.response_length
        self.tool_parser = ToolParser.get_tool_parser(self.rollout_config.multi_turn.format, self.tokenizer)
        self.sandbox = _sandbox(self.spade["sandbox"])
        self.pool = _env_pool(self.spade)
        self.record = RecordCaps.from_dict(self.spade.get("record"))

    async def _play(self, source: str, seed: int, sampling_params: dict[str, Any], hint: str | None) -> Episode:
        """One episode: one growing sequence, or one sample per turn in thinking mode (measurement plays too)."""
        play = play_turns if self.spade["agent"]["thinking"] else play_episode
        return await play(self, self.sandbox, source, seed, sampling_params, hint=hint,
                          max_turns=self.spade["max_turns"], turn_tokens=self.spade["turn_tokens"],
                          tool_parser=self.tool_parser)  # fmt: skip

    def _output(self, prompt_ids: list[int], response_ids: list[int], mask: list[int], logprobs: Any,
                turns: int, extra: dict[str, Any]) -> AgentLoopOutput:  # fmt: skip
        return loop_output(self.response_length, prompt_ids, response_ids, mask, logprobs, turns, extra)


def loop_output(n: int, prompt_ids: list[int], response_ids: list[int], mask: list[int], logprobs: Any, turns: int,
                extra: dict[str, Any]) -> AgentLoopOutput:  # fmt: skip
    """One sample for verl, its response cut to ``n`` tokens (``rollout.response_length``); verl scores it."""
    return AgentLoopOutput(
        prompt_ids=prompt_ids,
        response_ids=response_ids[:n],
        response_mask=mask[:n],
        response_logprobs=logprobs[:n] if logprobs else None,
        reward_score=None,  # scored by recipe/spade/reward_manager.py on verl's reward loop
        num_turns=max(2, 2 * turns),
        metrics={},
        extra_fields={"turn_scores": [], "tool_rewards": [], **extra},
    )


def turn_outputs(episode: Episode, extra: dict[str, Any], n: int, pad_id: int, logprobs: bool) -> list[AgentLoopOutput]:
    """Thinking mode: one sample per turn of ``episode``, each with the episode's ``extra`` and its turn index.

    A turn is trained (mask 1 on all its tokens) unless the episode is excluded (``spade_excluded``: an env fault or
    the compact filter); a turn that generated nothing gets one masked pad token, since verl needs a response.
    """
    trained = not extra["spade_excluded"]
    outputs = []
    for k, turn in enumerate(episode.samples):
        ids = turn.response_ids or [pad_id]
        turn_logprobs = turn.response_logprobs if turn.response_ids else ([0.0] if logprobs else None)
        mask = [int(trained and bool(turn.response_ids))] * len(ids)
        turn_extra = {**extra, "spade_turn": k, "spade_turns": len(episode.samples)}
        outputs.append(loop_output(n, turn.prompt_ids, ids, mask, turn_logprobs, 1, turn_extra))
    return outputs


class SpadeEnvAgentLoop(_SpadeLoop):
    """The Reasoning Agent's training play (no hint): one sample, or one per assistant turn in thinking mode.

    verl's V1 worker stores each output of a list under its own key and copies the last output's reward to the
    others; its GRPO takes each session's last output as the episode (``compute_advantage_for_multi_trajectories``)
    and gives every output of the session that advantage, so an episode's turn samples share outcome and advantage.
    """

    async def run(self, sampling_params: dict[str, Any], **kwargs: Any) -> AgentLoopOutput | list[AgentLoopOutput]:
        info = kwargs["extra_info"]
        step, slot = int(info["step"]), int(info["slot"])
        task = await self.pool.agent_task.remote(step, slot)
        episode = await self._play(task["source"], task["seed"], sampling_params, hint=None)
        await self.pool.record_play.remote(task["env_id"], step, episode.outcome, episode.fault, slot)
        record = self.record
        if record.enable and slot < record.episodes_per_step and int(kwargs.get("session_id", 0)) == 0:
            await self.pool.record.remote([episode_entry(step, slot, task, episode, self.tokenizer)])
        # the compact filter (tool use): an episode the env did not end (turns or tokens ran out) is not trained
        filtered = bool(self.spade["agent"]["compact_filter"] and task["setting"] == "tool_use"
                        and episode.fault is None and not episode.terminated)  # fmt: skip
        mask = [0] * len(episode.response_mask) if filtered else episode.response_mask
        extra = {"spade_role": "agent", "spade_env_id": task["env_id"], "spade_skill": task["skill"],
                 "spade_step": step, "spade_seed": task["seed"], "spade_outcome": episode.outcome,
                 "spade_env_fault": episode.fault or "", "spade_excluded": episode.fault is not None or filtered,
                 "spade_compact_filtered": filtered, "spade_truncated_by_length": bool(episode.truncated_by_length),
                 "spade_sandbox_s": episode.sandbox_s, "spade_wall_s": episode.wall_s, **episode.info}  # fmt: skip
        if not episode.samples:
            return self._output(episode.prompt_ids, episode.response_ids, mask, episode.response_logprobs,
                                episode.turns, extra)  # fmt: skip
        pad = self.tokenizer.pad_token_id or 0
        return turn_outputs(episode, extra, self.response_length, pad, bool(sampling_params.get("logprobs")))


class SpadeDesignerLoop(_SpadeLoop):
    """The Environment Designer's sample, with the hint-based regret measurement the reward manager scores.

    The design is sampled with the rollout's own sampling parameters (temperature included): verl computes the old
    log-probs and trains every sample at ``actor_rollout_ref.rollout.temperature``, so any other temperature would
    make the designer sample off-policy.
    """

    async def run(self, sampling_params: dict[str, Any], **kwargs: Any) -> AgentLoopOutput:
        info = kwargs["extra_info"]
        step, slot = int(info["step"]), int(info["slot"])
        design = slot * self.rollout_config.n + int(kwargs.get("session_id", 0))  # every design its own task
        began = time.perf_counter()
        self.trace: dict[str, Any] = {}  # what _measure saw, for the run record (a loop serves one sample)
        text = None
        task = await self.pool.designer_task.remote(step, design)
        designer = self.spade["designer"]
        # fitted to rollout.prompt_length by shortening the document (verl would left-truncate the head)
        fitted = await self._fit(task["messages"], task.get("document"), task.get("cuts", ()))
        if fitted.status == "refused":  # not sent, not trained: raise rollout.prompt_length (MAX_PROMPT)
            logger.warning("spade: designer prompt of %d tokens does not fit rollout.prompt_length=%d without its "
                           "document; refused", len(fitted.ids), self.rollout_config.prompt_length)  # fmt: skip
            prompt_ids = fitted.ids[: self.rollout_config.prompt_length]  # the masked sample's shape only
            out = TokenOutput(token_ids=[], log_probs=None)
            outcome = {"skill": task["skill"], "doc_id": task["doc_id"], "valid": False, "code": "prompt_too_long",
                       "sandbox_s": 0.0, "excluded": True}  # fmt: skip
        else:
            prompt_ids = fitted.ids
            params = {**sampling_params, "max_tokens": min(designer["max_tokens"], self.response_length)}
            out = await self.server_manager.generate(request_id=uuid.uuid4().hex, prompt_ids=prompt_ids,
                                                     sampling_params=params)  # fmt: skip
            text = self.tokenizer.decode(out.token_ids, skip_special_tokens=True)
            key = f"step {step} design {design}"  # draws this design's validation seeds
            outcome = await self._measure(task, text, step, design, sampling_params, key)
        await self.pool.register_design.remote(step, outcome)
        if self.record.enable:
            entry = design_entry(step, design, task, text, outcome, self.trace, self.tokenizer,
                                 self.record.transcripts_per_arm)  # fmt: skip
            await self.pool.record.remote([entry])
        # not trained: a machine failure (excluded), or the frozen-designer ablation (spade.designer.train=false)
        excluded = bool(outcome.get("excluded")) or not designer["train"]
        extra = {"spade_role": "designer", "spade_skill": task["skill"], "spade_step": step, "spade_design": design,
                 "spade_valid": outcome["valid"], "spade_failure": outcome["code"] or "",
                 "spade_measure": outcome.get("measure"), "spade_excluded": excluded,
                 "spade_sandbox_s": outcome["sandbox_s"], "spade_wall_s": time.perf_counter() - began,
                 "spade_prompt_fit": fitted.status, "spade_hint_prompt_fit": outcome.get("hint_prompt", ""),
                 **weight_versions([out.extra_fields])}  # fmt: skip
        ids = list(out.token_ids) or [self.tokenizer.eos_token_id or 0]  # verl cannot take an empty response
        mask = [0 if excluded else 1] * len(ids) if out.token_ids else [0]
        logprobs = out.log_probs if out.token_ids else ([0.0] if sampling_params.get("logprobs") else None)
        return self._output(prompt_ids, ids, mask, logprobs, 1, extra)

    async def _measure(
        self, task: dict[str, Any], text: str, step: int, design: int, sampling_params: dict[str, Any], key: str = ""
    ) -> dict:
        """Validate, hint, and measure both arms on paired seeds (the reward manager turns this into the reward).

        Whatever the env does here ends as a failure code (with its penalty), never as an exception.
        """
        secret = await self.pool.seed_secret.remote()  # keys this design's validation and measurement seeds
        validation = replace(ValidationConfig.from_dict(self.spade["validation"]), secret=secret)
        setting, skill = task["setting"], task["skill"]
        loop = asyncio.get_running_loop()
        started = time.perf_counter()
        base = {"skill": skill, "doc_id": task["doc_id"], "valid": False, "code": None, "sandbox_s": 0.0}
        audit = self._audit(loop) if self.spade["audit"]["enable"] and setting == "tool_use" else None
        # the hint is written while validation runs: requested once the env has loaded (most rejections come
        # earlier: no code, syntax, construction), discarded if validation then rejects it
        loaded: asyncio.Future[str] = loop.create_future()
        hint_task = loop.create_task(self._hint_when_loaded(loaded, setting))

        def on_loaded(code: str) -> None:
            loop.call_soon_threadsafe(lambda: loaded.done() or loaded.set_result(code))

        try:
            source, report = await loop.run_in_executor(None, functools.partial(
                admit, text, self.sandbox, setting, validation, key=key, audit=audit, on_loaded=on_loaded))  # fmt: skip
        except asyncio.CancelledError:
            hint_task.cancel()
            raise
        except Exception as exc:  # admit reports env faults itself; this is a host-side bug on odd output
            await _drop(hint_task, requested=loaded.done())
            return {**base, **_fault(exc, "load"), "sandbox_s": time.perf_counter() - started}
        base.update(valid=source is not None, code=report.code, sandbox_s=time.perf_counter() - started)
        self.trace["reason"] = report.reason
        if source is None:  # no worker could be had (machine_fault): the machine's condition, excluded
            await _drop(hint_task, requested=loaded.done())
            return {**base, "code": report.code or "crashed", "excluded": report.code == "machine_fault"}
        plays = self.spade["plays_per_arm"]
        # hashed, not 1 mod 7; keyed by the run's secret, so no env can recompute them from spade.seed and the key
        seeds = measurement_seeds(self.spade["seed"], f"step {step} design {design}", plays, secret=secret)
        if not loaded.done():  # admitted code always loaded first; kept so that the hint can never wait forever
            loaded.set_result(source)
        hint_text, base["hint_prompt"] = await hint_task
        started = time.perf_counter()
        try:
            vetting = await loop.run_in_executor(None, vet_hint_on_seeds, source, hint_text, self.sandbox, setting,
                                                 seeds)  # fmt: skip
        except Exception as exc:  # the env broke on a measurement seed while its hint was checked
            return {**base, **_fault(exc, "reset"), "sandbox_s": base["sandbox_s"] + time.perf_counter() - started}
        base["sandbox_s"] += time.perf_counter() - started
        hint, hint_failure = vetting.hint, vetting.failure
        self.trace.update(hint_text=hint_text, hint=hint, hint_reason=vetting.reason)
        if hint_failure in FAILURE_CODES:  # an env failure reported by vetting (not a hint failure)
            return {**base, "valid": False, "code": hint_failure}
        arms = [None, hint] if hint is not None else [None]
        if hint is not None and self.spade["hint"]["placebo"]:  # regret only beyond a content-free hint (placebo.py)
            arms.append(placebo_hint(hint, key))
        episodes = await asyncio.gather(*(self._play(source, s, sampling_params, h) for h in arms for s in seeds))
        self.trace.update(seeds=seeds, by_arm=[episodes[i * plays : (i + 1) * plays] for i in range(len(arms))])
        faults = [e for e in episodes if e.fault]
        base["sandbox_s"] += sum(e.sandbox_s for e in episodes)
        if faults:  # the env broke while the policy played it: a designer failure, never an agent one
            first = faults[0]
            return {**base, "valid": False, "code": fault_code(first.fault, "step" if first.turns else "reset"),
                    "excluded": all(e.fault in _INFRA_FAULTS for e in faults)}  # fmt: skip
        by_arm = [episodes[i * plays : (i + 1) * plays] for i in range(len(arms))]
        no_hint, hinted, placebo = ([e.outcome for e in arm] for arm in [*by_arm, [], []][:3])
        hashes = [[e.info["spade_first_obs"] for e in arm] for arm in by_arm]
        if unpaired_seeds(seeds, vetting.first_obs, *hashes):  # the same seed built different instances
            return {**base, "valid": False, "code": "unpaired"}
        window = WindowStats(skill, no_hint, no_hint if hinted else (), hinted, seeds if hinted else (),
                             seeds if hinted else (), hint_failure, paired_placebo=placebo)  # fmt: skip
        w = window.win_rate  # wins only, as the reward and memory count them: partial credit is no win
        return {
            **base,
            "source": source,
            "seeds": seeds,
            "win_rate": w,
            # what the reward counts (placebo, hint failure and feasibility gates applied); memory stores this one
            "regret": credited_regret(designer_reward_config(self.config), window) if hinted else 0.0,
            "raw_regret": (win_rate(hinted) - w) if hinted else 0.0,
            "hint_failure": hint_failure,
            "measure": {
                "no_hint": no_hint,
                "hint": hinted,
                "placebo": placebo,
                "seeds": seeds,
                "hint_failure": hint_failure or "",
                "lp_slow": task.get("lp_slow"),
            },
        }

    async def _hint_when_loaded(self, loaded: asyncio.Future[str], setting: str) -> tuple[str, str]:
        """The hint for the code ``loaded`` delivers, and how its prompt fitted (:meth:`_generate_text`)."""
        source = await loaded
        try:
            code = without_comments(source)  # the code as the hint writer reads it: what the fit may shorten
            messages = hint_messages(setting, source)
        except RecursionError:  # valid code nested deeper than ast.unparse recurses (1+1+...): no hint, no regret
            logger.warning("spade: the hint writer's view of the env's code recursed too deep; no hint")
            return "", "refused"
        return await self._generate_text(messages, self.spade["hint"], document=code)

    def _audit(self, loop: asyncio.AbstractEventLoop) -> Any:
        """The LLM audit of tool-use validation: the policy judges (from a validation thread) if the env is possible."""
        settings = {**self.spade["audit"], "top_p": 1.0}

        def judge(source: str) -> bool:
            future = asyncio.run_coroutine_threadsafe(self._generate_text(audit_messages(source), settings), loop)
            return audit_verdict(future.result(timeout=self.spade["audit"]["timeout_s"])[0])

        return judge

    async def _fit(self, messages: list[dict[str, Any]], document: str | None, cuts: Sequence[str] = ()) -> Any:
        """``messages`` within ``rollout.prompt_length``: ``document`` shortened, then ``cuts`` dropped (prompt_fit)."""
        render = functools.partial(render_history, self.continuous_token_builder)
        limit = self.rollout_config.prompt_length
        return await fit_prompt(render, self.tokenizer, messages, document, limit, cuts)

    async def _generate_text(
        self, messages: list[dict[str, str]], sampling: dict[str, Any], document: str | None = None
    ) -> tuple[str, str]:
        """The policy's text for a side prompt (hint, audit) and how its prompt fitted; a refused prompt: no text."""
        fitted = await self._fit(messages, document)
        if fitted.status == "refused":
            return "", fitted.status
        prompt_ids = fitted.ids
        params = {"temperature": sampling["temperature"], "top_p": sampling["top_p"],
                  "max_tokens": min(sampling["max_tokens"], self.response_length), "logprobs": False}  # fmt: skip
        out = await self.server_manager.generate(request_id=uuid.uuid4().hex, prompt_ids=prompt_ids,
                                                 sampling_params=params)  # fmt: skip
        return self.tokenizer.decode(out.token_ids, skip_special_tokens=True), fitted.status


#: Sandbox failures that are the machine's, not the design's: such designer samples leave the update.
_INFRA_FAULTS = frozenset({"sandbox_unavailable", "host_error"})


async def _drop(task: asyncio.Task, requested: bool) -> None:
    """Discard a hint no longer wanted (whatever it returns or raises), once its task has ended.

    A hint not yet ``requested`` (the env never loaded) is cancelled. One already requested is waited for instead:
    the server keeps generating it either way, and cancelling verl's ``server_manager.generate`` while it awaits the
    load balancer's ``acquire_server`` would leave that server's request count one too high.
    """
    if not requested:
        task.cancel()
    try:
        await task
    except asyncio.CancelledError:
        if asyncio.current_task().cancelling():  # type: ignore[union-attr]  # our own caller was cancelled too
            raise
    except Exception as exc:  # noqa: BLE001  (the design is rejected either way; its hint was never to be used)
        logger.debug("spade: a dropped hint raised %s: %s", type(exc).__name__, exc)


def _fault(exc: BaseException, phase: str) -> dict[str, Any]:
    """A designer failure from an exception raised while the env was vetted (logged: it should not happen)."""
    kind = getattr(exc, "kind", None)
    logger.warning("spade: designer %s phase raised %s: %s", phase, type(exc).__name__, exc)
    return {"valid": False, "code": fault_code(exc, phase), "excluded": kind in _INFRA_FAULTS}
