"""A scripted stand-in for the designer at the model boundary, for CPU tests of the valid-environment path.

A tiny random model never writes a valid environment, so on CPU every designer sample would be rejected and the
admitted-environment path (validation passes, hint, paired measurement, memory, live envs) would never run
through the real trainer. This rollout server (``rollout.name=hf_scripted``) answers *designer* prompts
alternately with the source of a built-in environment and with broken code (the first answer valid, the second
broken, ...), so half of a step's designs are admitted and the designer's per-skill centring has a signal;
*hint-writer* prompts get a fixed, leak-free hint. Every other request (the agent's turns) goes to the real model.
Nothing else is faked. Use it only in tests and demos that say so.

A scripted answer costs no generation, so a step timed with it is cheaper than a real designer's. With
``rollout.custom.scripted_generates: true`` (benchmarks: ``bench_spade_step.py``) the model first generates as many
tokens as the answer holds, up to the request's ``max_tokens``, with ``ignore_eos``, and throws them away: the step
then pays what a designer (and hint writer) writing an answer of that length would. Off by default (tests).
"""

from __future__ import annotations

import itertools
from typing import Any

from transformers import AutoTokenizer
from verl.workers.rollout.replica import TokenOutput

from recipe.spade.cpu.hf_rollout import HFReplica, HFRolloutServer
from spade_envs.builtin import BUILTINS, builtin_source
from spade_envs.design.measure import training_seed

__all__ = [
    "ScriptedDesignerReplica",
    "ScriptedDesignerServer",
    "SoakDesignerReplica",
    "SOAK_SEED_SECRET",
    "SoakDesignerServer",
    "soak_designs",
]

_DESIGNER_TAIL = "holding the complete module, and write nothing after it."
_HINT_TAIL = "Reply with the hint text only."
_HINT = "Act one step at a time and use what each observation reveals before you commit to an answer."


class ScriptedDesignerServer(HFRolloutServer):
    """:class:`HFRolloutServer` whose designer and hint-writer answers are scripted (see the module docstring)."""

    def __init__(self, config: Any, model_config: Any, replica_rank: int = 0, max_batch: int = 32) -> None:
        super().__init__(config, model_config, replica_rank, max_batch)
        path = getattr(model_config, "local_path", None) or model_config.path
        self.tokenizer = AutoTokenizer.from_pretrained(path)
        self.sources = {
            setting: itertools.cycle([builtin_source(e.name) for e in BUILTINS if e.setting == setting])
            for setting in ("games", "tool_use")
        }
        self.scripted = 0
        self.designs_answered = 0
        # rollout.custom.scripted_generates: pay the generation of each scripted answer (module docstring)
        self.generates = bool((self.config.custom or {}).get("scripted_generates", False))
        self.priced_tokens = 0  # tokens generated and thrown away to price scripted answers

    async def generate(self, prompt_ids: list[int], sampling_params: dict[str, Any], request_id: str,
                       **kwargs: Any) -> TokenOutput:  # fmt: skip
        text = self.tokenizer.decode(prompt_ids[-400:], skip_special_tokens=True)
        if _DESIGNER_TAIL in text:
            setting = "tool_use" if "Plan the world, the tools" in text else "games"
            answer = self.design_answer(setting)
        elif _HINT_TAIL in text:
            answer = _HINT
        else:
            return await super().generate(prompt_ids, sampling_params, request_id, **kwargs)
        self.scripted += 1
        ids = self.tokenizer.encode(answer, add_special_tokens=False) + [
            self.tokenizer.convert_tokens_to_ids("<|im_end|>")
        ]
        if self.generates:
            await self._price(prompt_ids, sampling_params, len(ids), request_id)
        logprobs = [0.0] * len(ids) if sampling_params.get("logprobs") else None
        return TokenOutput(token_ids=ids, log_probs=logprobs, stop_reason="completed",
                           extra_fields={"global_steps": self.global_steps})  # fmt: skip

    async def _price(
        self, prompt_ids: list[int], sampling_params: dict[str, Any], length: int, request_id: str
    ) -> None:
        """Generate ``length`` tokens (at most what the request may generate) after the prompt, and drop them."""
        params = {**sampling_params, "ignore_eos": True, "logprobs": False}
        params["max_tokens"] = min(length, self.max_tokens(prompt_ids, params))
        out = await super().generate(prompt_ids, params, f"{request_id}-priced")
        self.priced_tokens += len(out.token_ids)

    def design_answer(self, setting: str) -> str:
        """The designer's answer: alternately a built-in env and broken code (half of a step's designs valid)."""
        self.designs_answered += 1
        if self.designs_answered % 2 == 0:
            # env text is untrusted: the markup in the comment must show as text in `spade-envs browse`'s pages
            return f"Here is the environment.\n```python\nclass BrokenEnv(:  # {MARKUP}\n    pass\n```"
        return f"Here is the environment.\n```python\n{next(self.sources[setting])}```"


class ScriptedDesignerReplica(HFReplica):
    """:class:`HFReplica` that launches :class:`ScriptedDesignerServer`."""

    server_class = ScriptedDesignerServer


#: The soak runs' spade.seed (the default): the run seed their training seeds are drawn from.
_SOAK_RUN_SEED = 0
#: The seed secret soak runs pin (spade.seed_secret=SOAK_SEED_SECRET): public, so these envs can know their seeds.
SOAK_SEED_SECRET = "50a4" * 16
#: Seeds on which the soak's faulty envs misbehave: the agent's seeds of rows 0-15 of steps 1-9, recomputed as the
#: env pool draws them (spade_envs.design.measure.training_seed) under the pinned secret. Training seeds look like
#: measurement seeds (same hash, same range, same secret), so only such a list tells them apart; validation's and the
#: measurement's seeds are (almost surely) not in it, so these envs are admitted and then fail while the agent plays.
_FAULT_SEEDS = "(self._soak_seed or 0) in %r" % {
    training_seed(_SOAK_RUN_SEED, step, row, secret=bytes.fromhex(SOAK_SEED_SECRET))
    for step in range(1, 10)
    for row in range(16)
}
_SOAK_FAULTS = {
    "reset_raises": ("reset", f"if {_FAULT_SEEDS}:\n    raise RuntimeError('soak: no such instance')"),
    "step_raises": ("step", f"if {_FAULT_SEEDS} and self._soak_seed % 2:\n    raise ValueError('soak: odd seed')"),
    "worker_exits": ("step", f"if {_FAULT_SEEDS}:\n    import os\n    os._exit(3)"),
    # on every large seed: validation's or, failing that, the measurement plays' (seeds of steps >= 1) catch it
    "huge_observation": (
        "step",
        "if (self._soak_seed or 0) >= 10_000:\n    return 'x' * 5_000_000, 0.0, False, False, {}",
    ),
    "hangs": ("reset", "while True:\n    pass"),
}


#: Markup in the scripted designer's broken answers: a browser test checks it is shown as text, never run.
MARKUP = "<script>document.documentElement.dataset.pwned = 'yes'</script>"


def soak_designs() -> list[str]:
    """The soak designs in order: a good env, one per fault of :data:`_SOAK_FAULTS`, broken code, the good env again."""
    good = builtin_source("VaultCodeEnv")
    faulty = [_inject(good, method, code) for method, code in _SOAK_FAULTS.values()]
    return [good, *faulty, "class BrokenEnv(:\n    pass\n", good]


def _inject(source: str, method: str, code: str) -> str:
    """``source`` with ``code`` run first in ``method`` (reset also remembers its seed as ``self._soak_seed``)."""
    lines = source.splitlines()
    at = next(i for i, line in enumerate(lines) if line.startswith(f"    def {method}(") and line.endswith(":"))
    body = [" " * 8 + line for line in code.splitlines()]
    if method == "reset":
        body.insert(0, " " * 8 + "self._soak_seed = seed")
    else:
        reset = next(i for i, line in enumerate(lines) if line.startswith("    def reset(") and line.endswith(":"))
        lines.insert(reset + 1, " " * 8 + "self._soak_seed = seed")
        at += 1
    return "\n".join(lines[: at + 1] + body + lines[at + 1 :]) + "\n"


class SoakDesignerServer(ScriptedDesignerServer):
    """Designer answers cycle through :func:`soak_designs` (good, faulty, hanging, broken, duplicate): soak tests."""

    def __init__(self, config: Any, model_config: Any, replica_rank: int = 0, max_batch: int = 32) -> None:
        super().__init__(config, model_config, replica_rank, max_batch)
        self.designs = itertools.cycle(soak_designs())

    def design_answer(self, setting: str) -> str:
        return f"Here is the environment.\n```python\n{next(self.designs)}```"


class SoakDesignerReplica(HFReplica):
    """:class:`HFReplica` that launches :class:`SoakDesignerServer`."""

    server_class = SoakDesignerServer
