"""A scripted stand-in for the designer at the model boundary, for CPU tests of the valid-environment path.

A tiny random model never writes a valid environment, so on CPU every designer sample would be rejected and the
admitted-environment path (validation passes, hint, paired measurement, memory, live envs) would never run
through the real trainer. This rollout server (``rollout.name=hf_scripted``) answers *designer* prompts
alternately with the source of a built-in environment and with broken code (the first answer to a given prompt is
valid, the second broken, ...), so the samples of one designer row get different rewards and GRPO has a signal;
*hint-writer* prompts get a fixed, leak-free hint. Every other request (the agent's turns) goes to the real model.
Nothing else is faked. Use it only in tests and demos that say so.
"""

from __future__ import annotations

import itertools
from typing import Any

from transformers import AutoTokenizer
from verl.workers.rollout.replica import TokenOutput

from recipe.spade.cpu.hf_rollout import HFReplica, HFRolloutServer
from spade_envs.builtin import BUILTINS, builtin_source

__all__ = ["ScriptedDesignerReplica", "ScriptedDesignerServer"]

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
        self.seen: dict[int, int] = {}

    async def generate(self, prompt_ids: list[int], sampling_params: dict[str, Any], request_id: str,
                       **kwargs: Any) -> TokenOutput:  # fmt: skip
        text = self.tokenizer.decode(prompt_ids[-400:], skip_special_tokens=True)
        if _DESIGNER_TAIL in text:
            key = hash(tuple(prompt_ids))
            self.seen[key] = self.seen.get(key, 0) + 1
            setting = "tool_use" if "Plan the world, the tools" in text else "games"
            if self.seen[key] % 2 == 0:
                answer = "Here is the environment.\n```python\nclass BrokenEnv(:\n    pass\n```"
            else:
                answer = f"Here is the environment.\n```python\n{next(self.sources[setting])}```"
        elif _HINT_TAIL in text:
            answer = _HINT
        else:
            return await super().generate(prompt_ids, sampling_params, request_id, **kwargs)
        self.scripted += 1
        ids = self.tokenizer.encode(answer, add_special_tokens=False) + [
            self.tokenizer.convert_tokens_to_ids("<|im_end|>")
        ]
        logprobs = [0.0] * len(ids) if sampling_params.get("logprobs") else None
        return TokenOutput(token_ids=ids, log_probs=logprobs, stop_reason="completed",
                           extra_fields={"global_steps": self.global_steps})  # fmt: skip


class ScriptedDesignerReplica(HFReplica):
    """:class:`HFReplica` that launches :class:`ScriptedDesignerServer`."""

    server_class = ScriptedDesignerServer
