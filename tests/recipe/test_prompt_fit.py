"""Designer and hint prompts fit ``rollout.prompt_length`` by construction: the document's tail is cut by tokens and
the head of the prompt (system prompt, task) stays whole, where verl would left-truncate it (issue 28)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
from transformers import AutoTokenizer

from recipe.spade.cpu.tiny_model import build_tiny_qwen3
from recipe.spade.prompt_fit import fit_prompt
from spade_envs.builtin import builtin_source
from spade_envs.design.ast_hash import without_comments
from spade_envs.design.prompts import Exemplar, designer_messages, exemplar_cuts, hint_messages

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def tokenizer(tmp_path_factory):
    return AutoTokenizer.from_pretrained(build_tiny_qwen3(tmp_path_factory.mktemp("tiny") / "model"))


def render_with(tokenizer):
    async def render(messages):  # the chat template's rendering, uncapped (what render_history returns)
        text = tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True,
                                             enable_thinking=False)  # fmt: skip
        return tokenizer.encode(text, add_special_tokens=False)

    return render


def fit(tokenizer, messages, document, limit):
    return asyncio.run(fit_prompt(render_with(tokenizer), tokenizer, messages, document, limit))


def test_a_long_document_is_shortened_and_the_head_and_the_instructions_after_it_stay(tokenizer):
    corpus = ROOT / "examples" / "data" / "sample_corpus.jsonl"
    document = " ".join(json.loads(line)["text"] for line in corpus.read_text().splitlines()) * 3
    messages = designer_messages("games", document, "mathematical_reasoning")
    full = asyncio.run(render_with(tokenizer)(messages))
    skeleton = asyncio.run(render_with(tokenizer)(designer_messages("games", "x", "mathematical_reasoning")))
    limit = len(skeleton) + 300
    assert len(full) > limit + 1000
    got = fit(tokenizer, messages, document, limit)
    assert got.status == "shortened" and limit - 50 <= len(got.ids) <= limit
    head = full.index(tokenizer.encode(document[:40], add_special_tokens=False)[0])
    assert got.ids[:head] == full[:head]  # the system prompt and everything before the document, intact
    tail = len(skeleton) - head - 5  # what follows the document in the prompt
    assert got.ids[-tail:] == full[-tail:]
    assert fit(tokenizer, messages, document, len(full)).status == "fits"
    assert fit(tokenizer, messages, document, len(skeleton) - 10).status == "refused"  # no document fits


def test_a_hint_prompt_shortens_the_source(tokenizer):
    source = "import numpy as np\n\nclass GameEnv:\n" + "    x = 1  # padding line\n" * 400
    messages = hint_messages("games", source)
    full = asyncio.run(render_with(tokenizer)(messages))
    got = fit(tokenizer, messages, without_comments(source), len(full) - 500)  # the code as the hint writer reads it
    assert got.status == "shortened" and len(got.ids) <= len(full) - 500
    assert fit(tokenizer, messages, None, len(full) - 500).status == "refused"  # nothing it may shorten


def test_exemplars_are_dropped_last_first_only_when_the_document_cannot_make_room(tokenizer):
    """Document tail first, then the memory exemplars (last first, then their section); never the instructions."""
    snippet = builtin_source("VaultCodeEnv")
    exemplars = [Exemplar(skill="mathematical_reasoning", win_rate=0.5, regret=0.1 * i, kind="positive",
                          source_snippet=f"# exemplar {i}\n{snippet}") for i in range(3)]  # fmt: skip
    document = "The lighthouse keeper counted ships. " * 60
    messages = designer_messages("games", document, "mathematical_reasoning", exemplars=exemplars)
    cuts = exemplar_cuts(exemplars)
    render = render_with(tokenizer)
    full = asyncio.run(render(messages))
    one = asyncio.run(render(designer_messages("games", document, "mathematical_reasoning", exemplars=exemplars[:1])))
    none = asyncio.run(render(designer_messages("games", document, "mathematical_reasoning")))
    # room for the whole head: only the document is cut, every exemplar stays
    got = asyncio.run(fit_prompt(render, tokenizer, messages, document, len(full) - 100, cuts))
    assert got.status == "shortened" and got.dropped_parts == 0 and got.dropped_tokens > 0
    # the head alone passes the limit: the last two exemplars go, the first stays, the document is kept
    got = asyncio.run(fit_prompt(render, tokenizer, messages, document, len(one), cuts))
    assert (got.status, got.dropped_parts, got.dropped_tokens, got.ids) == ("shortened", 2, 0, one)
    text = tokenizer.decode(got.ids)
    assert "# exemplar 0" in text and "# exemplar 1" not in text and "# exemplar 2" not in text
    # less room still: the section goes, then the document is cut; the system prompt and the instructions stay
    got = asyncio.run(fit_prompt(render, tokenizer, messages, document, len(none) - 100, cuts))
    assert got.status == "shortened" and got.dropped_parts == 3 and got.dropped_tokens > 0
    text = tokenizer.decode(got.ids)
    assert "# exemplar" not in text and "Environments designed earlier" not in text
    head = none.index(tokenizer.encode("The lighthouse", add_special_tokens=False)[0])
    assert got.ids[:head] == none[:head] and got.ids[-50:] == none[-50:]
    # with no document to cut, dropping every exemplar is not enough: refused, not sent
    assert asyncio.run(fit_prompt(render, tokenizer, messages, None, len(none) - 100, cuts)).status == "refused"
