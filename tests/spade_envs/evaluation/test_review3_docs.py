"""Review 3: the ready-to-copy commands in docs/evaluation.md match what the same page says they need."""

from __future__ import annotations

import re
from pathlib import Path

DOC = Path(__file__).resolve().parents[3] / "docs" / "evaluation.md"


def _commands() -> list[str]:
    """Each shell command of the page's bash blocks, continuation lines joined."""
    blocks = re.findall(r"```bash\n(.*?)```", DOC.read_text(encoding="utf-8"), re.S)
    return [line for block in blocks for line in block.replace("\\\n", " ").splitlines() if line.strip()]


def test_every_serve_command_with_the_hermes_tool_parser_also_sets_the_reasoning_parser():
    """The differences table: without a reasoning parser, ``<tool_call>`` blocks drafted inside ``<think>`` become
    native calls, which BFCL's decoder (it reads only the text after ``</think>``) never sees."""
    text = DOC.read_text(encoding="utf-8")
    assert "--reasoning-parser qwen3" in text and "drafted while thinking are not parsed into native calls" in text
    hermes = [c for c in _commands() if "--tool-call-parser hermes" in c]
    assert len(hermes) >= 2 and [c for c in hermes if "--reasoning-parser" not in c] == []
