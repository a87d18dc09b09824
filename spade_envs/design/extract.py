"""Pull the environment source out of a designer response, and separate thinking from the visible answer.

The designer is asked to end its answer with one python code block. Responses are messy: a draft inside
``<think>``, prose with snippets, usage examples after the code, a block cut off by the token limit, code that
itself handles ``<think>`` tags. The rule is strict on purpose, since every failure is a designer sample with a
penalty: take the **last complete** ```` ```python ```` (or ``py``, ``python3``, ``python:env.py``, ``{.python}``;
backtick or tilde fences, indented or not) block outside thinking that defines an ``*Env`` class; else a bare
```` ``` ```` block that parses and defines one; else the last complete python block (it will fail validation
with its own code). Think tags inside a visible code block are code. There is
no automatic repair (the reference re-parsed up to 20 times fixing f-string braces): a response that needs repair
is a bad sample and should be scored as one.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass

from spade_envs.envs.ast_parse import parse_source

__all__ = ["CodeExtraction", "extract_code", "split_thinking"]

_THINK_TAG = re.compile(r"</?think>", re.IGNORECASE)
_FENCE = re.compile(r"^([ \t]*)(`{3,}|~{3,})[ \t]*(.*)$")
_PYTHON_INFO = ("python", "py", "python3")
_ENV_CLASS_LINE = re.compile(r"^\s*class\s+\w*Env\b", re.MULTILINE)


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
        """The failure code (:data:`spade_envs.envs.failures.FAILURE_CODES`) when no code was found, else ``None``."""
        return None if self.code is not None else "no_code_block"


@dataclass
class _Fence:
    char: str
    length: int
    indent: int
    in_think: bool


def _opening(line: str) -> tuple[_Fence, str] | None:
    """``(fence, language)`` when ``line`` opens a fenced block (backticks or tildes, any indentation)."""
    match = _FENCE.match(line)
    if match is None or (match.group(2)[0] == "`" and "`" in match.group(3)):
        return None
    info = re.match(r"\{?\.?([A-Za-z0-9_+\-]*)", match.group(3).strip())
    language = info.group(1).lower() if info else ""
    return _Fence(match.group(2)[0], len(match.group(2)), len(match.group(1).expandtabs(4)), False), language


def _closes(line: str, fence: _Fence) -> bool:
    return re.fullmatch(rf"[ \t]*{re.escape(fence.char)}{{{fence.length},}}[ \t]*", line) is not None


def _think_switches(text: str, in_think: bool) -> tuple[list[tuple[int, int, bool]], bool]:
    """Tag spans that switch thinking on or off, scanning fences: ``([(start, end, now_thinking)], restart)``.

    Tags inside a fenced block opened in visible text are code, not tags. A fence opened inside thinking ends at
    ``</think>`` (a truncated draft must not swallow the answer). A ``<think>`` that is never closed opens a
    section only at the start of a line (so prose that mentions the tag does not hide the code after it).
    ``restart`` is true when a ``</think>`` comes before any ``<think>``: the template opened the section.
    """
    switches: list[tuple[int, int, bool]] = []
    fence: _Fence | None = None
    pos = 0
    last_close = max((m.start() for m in _THINK_TAG.finditer(text) if m.group().lower() == "</think>"), default=-1)
    for line in text.splitlines(keepends=True):
        body = line.rstrip("\r\n")
        tags = list(_THINK_TAG.finditer(body))
        if fence is not None and not (fence.in_think and any(t.group().lower() == "</think>" for t in tags)):
            if _closes(body, fence):
                fence = None
            pos += len(line)
            continue
        fence = None
        for tag in tags:
            closing = tag.group().lower() == "</think>"
            if closing and not in_think and not switches:
                return switches, True
            if closing and in_think:
                switches.append((pos + tag.start(), pos + tag.end(), False))
                in_think = False
            elif not closing and not in_think:
                closed = last_close > pos + tag.start()
                at_line_start = not body[: tag.start()].strip()
                if closed or at_line_start:
                    switches.append((pos + tag.start(), pos + tag.end(), True))
                    in_think = True
        if not tags:
            opened = _opening(body)
            if opened is not None:
                fence = opened[0]
                fence.in_think = in_think
        pos += len(line)
    return switches, False


def split_thinking(text: str) -> tuple[str, str]:
    """Split ``text`` into ``(visible, thinking)``.

    ``<think>...</think>`` sections are thinking; an unclosed ``<think>`` at the start of a line makes everything
    after it thinking (the response was cut off mid-thought). A ``</think>`` before any ``<think>`` means the chat
    template opened the section in the prompt, so everything before it is thinking. Tags inside a fenced code
    block of the visible text are part of the code (``re.sub(r"<think>.*?</think>", ...)``), and nested tags
    inside a section are ignored.
    """
    switches, restart = _think_switches(text, False)
    in_think = restart
    if restart:
        switches, _ = _think_switches(text, True)
    visible: list[str] = []
    thinking: list[str] = []
    pos = 0
    for start, end, now_thinking in switches:
        (thinking if in_think else visible).append(text[pos:start])
        in_think, pos = now_thinking, end
    (thinking if in_think else visible).append(text[pos:])
    return "".join(visible), "".join(thinking)


@dataclass(frozen=True)
class _Block:
    info: str
    body: str
    closed: bool


def _fenced_blocks(text: str) -> list[_Block]:
    """Fenced blocks in order; a closing fence is a line of at least as many of the same fence character.

    Two repairs of the fence structure (never of the code): a python block whose body does not parse is extended
    to a later closing fence that makes it parse (a ``'''`` string holding a fence line), and a block that would
    stay unclosed ends at a line that starts with its fence followed by prose (`` ``` that is all``).
    """
    blocks: list[_Block] = []
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        opened = _opening(lines[i])
        if opened is None:
            i += 1
            continue
        fence, info = opened
        first = i + 1
        closers = [j for j in range(first, len(lines)) if _closes(lines[j], fence)]
        end = closers[0] if closers else len(lines)
        if not closers:
            prose = re.compile(rf"[ \t]*{re.escape(fence.char)}{{{fence.length},}}[ \t]+\S.*")
            end = next((j for j in range(first, len(lines)) if prose.fullmatch(lines[j])), end)
        body = _dedent(lines[first:end], fence.indent)
        if info in _PYTHON_INFO and end < len(lines) and not _parses(body):
            for j in closers[1:]:
                if _parses(candidate := _dedent(lines[first:j], fence.indent)):
                    end, body = j, candidate
                    break
        blocks.append(_Block(info, body, closed=end < len(lines)))
        i = end + 1
    return blocks


def _dedent(lines: list[str], indent: int) -> str:
    if not indent:
        return "\n".join(lines) + "\n"
    out = []
    for line in lines:
        line = line.expandtabs(4)
        out.append(line[min(indent, len(line) - len(line.lstrip(" "))) :])
    return "\n".join(out) + "\n"


def _parses(code: str) -> bool:
    try:
        parse_source(code)
    except (SyntaxError, ValueError, MemoryError, RecursionError):
        return False
    return True


def _defines_env_class(code: str) -> bool:
    try:
        tree = parse_source(code)
    except (SyntaxError, ValueError, MemoryError, RecursionError):
        return False
    return any(isinstance(node, ast.ClassDef) and node.name.endswith("Env") for node in tree.body)


def extract_code(text: str) -> CodeExtraction:
    """Return the environment source in a designer response, or why there is none (see the module docstring)."""
    visible, thinking = split_thinking(text)
    blocks = _fenced_blocks(visible)
    python = [b for b in blocks if b.closed and b.info in _PYTHON_INFO and b.body.strip()]
    with_env = [b for b in python if _defines_env_class(b.body) or _ENV_CLASS_LINE.search(b.body)]
    if with_env:
        return CodeExtraction(with_env[-1].body, "python block")
    bare = [b for b in blocks if b.closed and not b.info and _defines_env_class(b.body)]
    if bare:
        return CodeExtraction(bare[-1].body, "bare block")
    if python:
        return CodeExtraction(python[-1].body, "python block")
    if any(not b.closed and b.info in (*_PYTHON_INFO, "") for b in blocks):
        return CodeExtraction(None, "only an unclosed code block")
    if any(b.closed and (b.info in _PYTHON_INFO or _defines_env_class(b.body)) for b in _fenced_blocks(thinking)):
        return CodeExtraction(None, "code only inside <think>")
    return CodeExtraction(None, "no code block")
