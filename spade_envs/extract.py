"""Pull the environment source out of a designer response, and separate thinking from the visible answer.

The designer is asked to end its answer with one python code block. Responses are messy: a draft inside
``<think>``, prose with snippets, a block cut off by the token limit. The rule is strict on purpose, since every
failure is a designer sample with a penalty: take the **last complete** ```` ```python ```` (or ```` ```py ````)
block outside thinking; a bare ```` ``` ```` block counts only if it parses and defines an ``*Env`` class. There is
no automatic repair (the reference re-parsed up to 20 times fixing f-string braces): a response that needs repair
is a bad sample and should be scored as one.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass

__all__ = ["CodeExtraction", "extract_code", "split_thinking"]

_THINK_TAG = re.compile(r"</?think>", re.IGNORECASE)
_FENCE = re.compile(r"^[ \t]{0,3}(`{3,})[ \t]*([^`\s]*)[^`]*$")
_PYTHON_INFO = ("python", "py", "python3")


@dataclass(frozen=True)
class CodeExtraction:
    """The result of :func:`extract_code`.

    Attributes:
        code: the extracted source, or ``None`` when there is none.
        reason: how it was found (``"python block"``, ``"bare block"``) or why nothing was (``"no code block"``,
            ``"only an unclosed code block"``, ``"code only inside <think>"``).
    """

    code: str | None
    reason: str

    @property
    def failure(self) -> str | None:
        """The failure code (:data:`spade_envs.failures.FAILURE_CODES`) when no code was found, else ``None``."""
        return None if self.code is not None else "no_code_block"


def split_thinking(text: str) -> tuple[str, str]:
    """Split ``text`` into ``(visible, thinking)``.

    ``<think>...</think>`` sections are thinking; an unclosed ``<think>`` makes everything after it thinking (the
    response was cut off mid-thought). A ``</think>`` before any ``<think>`` means the chat template opened the
    section in the prompt, so everything before it is thinking. Nested tags inside a section are ignored.
    """
    visible: list[str] = []
    thinking: list[str] = []
    tags = list(_THINK_TAG.finditer(text))
    inside = bool(tags) and tags[0].group().lower() == "</think>"
    pos = 0
    for tag in tags:
        closing = tag.group().lower() == "</think>"
        if inside and closing:
            thinking.append(text[pos : tag.start()])
            inside, pos = False, tag.end()
        elif not inside and not closing:
            visible.append(text[pos : tag.start()])
            inside, pos = True, tag.end()
    (thinking if inside else visible).append(text[pos:])
    return "".join(visible), "".join(thinking)


@dataclass(frozen=True)
class _Block:
    info: str
    body: str
    closed: bool


def _fenced_blocks(text: str) -> list[_Block]:
    """Backtick-fenced blocks in order; a closing fence is a line of at least as many backticks and nothing else."""
    blocks: list[_Block] = []
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        opening = _FENCE.match(lines[i])
        if opening is None:
            i += 1
            continue
        fence, info = opening.group(1), opening.group(2).lower()
        body: list[str] = []
        i += 1
        while i < len(lines) and not re.fullmatch(rf"[ \t]{{0,3}}`{{{len(fence)},}}[ \t]*", lines[i]):
            body.append(lines[i])
            i += 1
        blocks.append(_Block(info, "\n".join(body) + "\n", closed=i < len(lines)))
        i += 1
    return blocks


def _defines_env_class(code: str) -> bool:
    try:
        tree = ast.parse(code)
    except (SyntaxError, ValueError):
        return False
    return any(isinstance(node, ast.ClassDef) and node.name.endswith("Env") for node in tree.body)


def extract_code(text: str) -> CodeExtraction:
    """Return the environment source in a designer response, or why there is none (see the module docstring)."""
    visible, thinking = split_thinking(text)
    blocks = _fenced_blocks(visible)
    python = [b for b in blocks if b.closed and b.info in _PYTHON_INFO and b.body.strip()]
    if python:
        return CodeExtraction(python[-1].body, "python block")
    bare = [b for b in blocks if b.closed and not b.info and _defines_env_class(b.body)]
    if bare:
        return CodeExtraction(bare[-1].body, "bare block")
    if any(not b.closed and b.info in (*_PYTHON_INFO, "") for b in blocks):
        return CodeExtraction(None, "only an unclosed code block")
    if any(b.closed and (b.info in _PYTHON_INFO or _defines_env_class(b.body)) for b in _fenced_blocks(thinking)):
        return CodeExtraction(None, "code only inside <think>")
    return CodeExtraction(None, "no code block")
