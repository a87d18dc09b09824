"""The ladder stand-in designer (``rollout.name=hf_ladder``) for ``make learn MODE=spade``: SPADE's signal, real agent.

A 135M model cannot write a valid environment (``recipe.spade.laptop.design_validity``), so to see the designer's
reward respond to a *learning* agent the designs come from a stand-in: every designer prompt is answered with the
source of a starter-ladder rung (``spade_envs/builtin/ladder``), the levels in turn (``rollout.custom.ladder_levels``:
rung names, easiest first). With ``spade.envs_per_regen`` equal to the number of levels and ``spade.regen_every=1``,
each step designs every level once; each design then goes through the real path: validation in the sandbox, the hint
written by the real model, the paired no-hint / hint / placebo plays by the real agent, the designer reward. Every
other request (agent turns, hints) goes to the real model. The stand-in is named as such wherever it is used; it
shows the reward tracking a learning agent, not a model learning to design.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from typing import Any

from transformers import AutoTokenizer
from verl.workers.rollout.replica import TokenOutput

from recipe.spade.cpu.hf_rollout import HFReplica, HFRolloutServer
from spade_envs.builtin.ladder import LADDER, ladder_source

__all__ = ["LadderDesignerReplica", "LadderDesignerServer", "ladder_answers"]

#: The end of every designer prompt (both settings): how a request is told to be a design.
_DESIGNER_TAIL = "holding the complete module, and write nothing after it."


def ladder_answers(levels: Sequence[str]) -> itertools.cycle:
    """The stand-in's answers in order: one fenced rung source per level, cycling; unknown names are an error."""
    known = {r.name for r in LADDER}
    if not levels or any(name not in known for name in levels):
        raise ValueError(f"rollout.custom.ladder_levels must name ladder rungs ({', '.join(sorted(known))}), "
                         f"got {list(levels)!r}")  # fmt: skip
    return itertools.cycle([f"Here is the environment.\n```python\n{ladder_source(n)}```" for n in levels])


class LadderDesignerServer(HFRolloutServer):
    """:class:`HFRolloutServer` whose designer answers are ladder rungs, the levels in turn (module docstring)."""

    def __init__(self, config: Any, model_config: Any, replica_rank: int = 0, max_batch: int = 32) -> None:
        super().__init__(config, model_config, replica_rank, max_batch)
        path = getattr(model_config, "local_path", None) or model_config.path
        self.tokenizer = AutoTokenizer.from_pretrained(path)
        custom = self.config.custom or {}
        self.answers = ladder_answers(list(custom.get("ladder_levels") or ()))
        self.scripted = 0

    async def generate(self, prompt_ids: list[int], sampling_params: dict[str, Any], request_id: str,
                       **kwargs: Any) -> TokenOutput:  # fmt: skip
        text = self.tokenizer.decode(prompt_ids[-400:], skip_special_tokens=True)
        if _DESIGNER_TAIL not in text:  # agent turns and hints: the real model
            return await super().generate(prompt_ids, sampling_params, request_id, **kwargs)
        self.scripted += 1
        end = self.tokenizer.convert_tokens_to_ids("<|im_end|>")  # both models here use ChatML
        ids = self.tokenizer.encode(next(self.answers), add_special_tokens=False) + [end]
        logprobs = [0.0] * len(ids) if sampling_params.get("logprobs") else None
        return TokenOutput(token_ids=ids, log_probs=logprobs, stop_reason="completed",
                           extra_fields={"global_steps": self.global_steps})  # fmt: skip


class LadderDesignerReplica(HFReplica):
    """:class:`HFReplica` that launches :class:`LadderDesignerServer`."""

    server_class = LadderDesignerServer
