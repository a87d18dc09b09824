"""Prompts that fit ``rollout.prompt_length`` by construction: the document is shortened, never the head of the prompt.

verl's ``ct_build_initial_tokens`` left-truncates a prompt longer than ``rollout.prompt_length`` with only a warning
("left-truncating"), which drops the system prompt and the task. A designer prompt grows with its corpus document (a
6,000-word document of dense text can pass 16,384 tokens) and a hint prompt with the environment's source. Here the
prompt is rendered uncapped; when it is too long, the document's tail is cut by as many tokens as the prompt is over
(plus a small margin for re-tokenisation at the cut), and the prompt is rendered again. When even the prompt without
its document leaves fewer than ``MIN_DOCUMENT`` tokens, optional parts (a designer prompt's memory exemplars, last
first) are removed before the document is cut: the document is shortened first, then the exemplars, never the
instructions. A prompt that still does not fit is refused: the caller does not send it.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any

__all__ = ["Fitted", "fit_prompt"]

#: Tokens cut beyond the excess, for the tokens that merge differently where the document is cut.
MARGIN = 8
#: Document tokens the prompt keeps room for before it drops optional parts (exemplars) to make that room.
MIN_DOCUMENT = 256
#: Renders before giving up (each cut is exact up to re-tokenisation, so the second render nearly always fits).
ATTEMPTS = 4


@dataclass(frozen=True)
class Fitted:
    """A rendered prompt and how it was fitted: ``fits``, ``shortened`` (document or parts cut) or ``refused``."""

    ids: list[int]
    status: str
    dropped_tokens: int = 0
    dropped_parts: int = 0


def _replace(messages: Sequence[dict[str, Any]], old: str, new: str) -> list[dict[str, Any]]:
    """The messages with the (first) occurrence of ``old`` in their contents replaced by ``new``."""
    out, done = [], False
    for message in messages:
        content = message.get("content")
        if not done and isinstance(content, str) and old in content:
            message, done = {**message, "content": content.replace(old, new, 1)}, True
        out.append(message)
    return out


async def fit_prompt(
    render: Callable[[list[dict[str, Any]]], Awaitable[list[int]]],
    tokenizer: Any,
    messages: Sequence[dict[str, Any]],
    document: str | None,
    limit: int,
    cuts: Sequence[str] = (),
) -> Fitted:
    """Render ``messages``; if over ``limit`` tokens, shorten ``document`` (a substring of a message) from its end.

    ``cuts`` are substrings removed in order (``spade_envs.design.prompts.exemplar_cuts``) only while the prompt without
    its
    document has no room for ``MIN_DOCUMENT`` tokens. ``render`` must not cap the prompt itself
    (``recipe.spade.turns.render_history`` does not).
    """
    ids = list(await render(list(messages)))
    if len(ids) <= limit:
        return Fitted(ids, "fits")
    current, dropped = list(messages), 0
    if document and not _contains(current, document):
        document = document.strip()  # prompts may quote it stripped (a fenced code block)
    if document and not _contains(current, document):
        document = None
    for cut in cuts:
        bare = await render(_replace(current, document, "")) if document else ids
        if len(bare) <= limit - (MIN_DOCUMENT if document else 0) or not _contains(current, cut):
            break
        current, dropped = _replace(current, cut, ""), dropped + 1
        ids = list(await render(current))
        if len(ids) <= limit:
            return Fitted(ids, "shortened", 0, dropped)
    if not document:
        return Fitted(ids, "refused", 0, dropped)
    doc_ids = list(tokenizer.encode(document, add_special_tokens=False))
    kept = len(doc_ids)
    for _ in range(ATTEMPTS):
        kept -= len(ids) - limit + MARGIN
        if kept <= 0:
            return Fitted(ids, "refused", len(doc_ids), dropped)
        shorter = tokenizer.decode(doc_ids[:kept])
        current = _replace(current, document, shorter)
        document = shorter
        ids = list(await render(current))
        if len(ids) <= limit:
            return Fitted(ids, "shortened", len(doc_ids) - kept, dropped)
    return Fitted(ids, "refused", len(doc_ids) - kept, dropped)


def _contains(messages: Sequence[dict[str, Any]], part: str) -> bool:
    return any(part in str(m.get("content", "")) for m in messages)
