"""The tiny tokenizer's thinking chat template: like Qwen3-8B's, it drops the reasoning of earlier assistant turns.

SPADE's thinking mode (``spade.agent.thinking``) re-renders each turn's history with the tokenizer's own template, so
what the model is trained on is what it is served with. Qwen3's template strips the ``<think>...</think>`` block of
every assistant message that comes before the last user message (tool results are not user messages, so the
reasoning inside one chain of tool calls is kept); this template does the same, written independently on top of the
tiny model's ChatML template, so CPU tests can check the per-turn samples against a template that behaves that way.

This module must not import verl (see ``tiny_model``).
"""

from __future__ import annotations

__all__ = ["thinking_template"]

# The assistant body of the plain template, and what replaces it: strip the reasoning before the last user message.
_BODY = "{%- set body = text_of(message.content) -%}"
_STRIPPED_BODY = (
    "{%- set body = text_of(message.content) -%}"
    "{%- if loop.index0 < last_query.index and '</think>' in body -%}"
    "{%- set body = (body.split('</think>') | last).lstrip('\\n') -%}"
    "{%- endif -%}"
)
# Where the message loop starts: find the last user message first (a namespace, since Jinja scopes loop variables).
_LOOP = "{%- for message in rest -%}"
_FIND_LAST_QUERY = (
    "{%- set last_query = namespace(index=-1) -%}"
    "{%- for message in rest -%}{%- if message.role == 'user' -%}{%- set last_query.index = loop.index0 -%}"
    "{%- endif -%}{%- endfor -%}"
)


def thinking_template(chatml: str) -> str:
    """``chatml`` (the tiny model's template) with earlier turns' reasoning stripped, as Qwen3's template does.

    Raises:
        ValueError: ``chatml`` lacks the pieces this rewrite expects (the tiny template changed).
    """
    for piece in (_BODY, _LOOP):
        if chatml.count(piece) != 1:
            raise ValueError(f"the chat template has {chatml.count(piece)} copies of {piece!r}, expected one")
    return chatml.replace(_LOOP, _FIND_LAST_QUERY + _LOOP).replace(_BODY, _STRIPPED_BODY)
