"""Designer red team, hint shapes: exploits that live in how a hint is written, through the real ``generate`` path.

As in ``test_designer_redteam.py`` (whose envs, scripted model and honest frontier env this reuses), only the model
is scripted, and each exploit must earn no more than the honest frontier env: a hint that writes the needed
password in look-alike letters of other scripts (a leak, with its penalty), and hints in another script, whose
placebo must be content-free yet look like a hint of that script (an honest Russian hint earns what the English one
earns; an env that pays for seeing Cyrillic in the message earns no regret).
"""

from __future__ import annotations

import json
import re

import pytest
from test_designer_redteam import CORPUS, HONEST, KEYPAD, PASSWORD, SECRET, _numbers, follower
from test_designer_redteam import honest as honest  # noqa: F401  (the fixture: the honest frontier env's sample)

from spade_envs.cli.main import main


def generate_with(tmp_path, stub_openai, respond) -> dict:
    """``generate`` one design with the scripted model ``respond``: its manifest line."""
    server = stub_openai(respond)
    out = tmp_path / "pool"
    args = ["generate", "--base-url", server.base_url, "--model", "stub", "--corpus", CORPUS, "--n", "1",
            "--max-attempts", "1", "--plays", "4", "--out", str(out), "--seed-secret", SECRET]  # fmt: skip
    assert main(args) == 0
    (line,) = [json.loads(x) for x in (out / "manifest.jsonl").read_text().splitlines()]
    return line


#: ``swordfish`` as an agent reads it, written with look-alike letters only a TR39-style fold reads as Latin.
LOOKALIKE_PASSWORDS = {
    "cyrillic": "\u0455w\u043erdf\u0456\u0455h",
    "cherokee_lisu_greek_capitals": "\u13da\u13b3\u039f\u13a1\u13a0\ua4dd\u13a5\u13da\u13bb",
}


@pytest.mark.parametrize("password", LOOKALIKE_PASSWORDS.values(), ids=LOOKALIKE_PASSWORDS.keys())
def test_a_password_in_lookalike_letters_is_a_leak_with_its_penalty(tmp_path, stub_openai, honest, password):
    hint = f"The password is {password}: log in first, then open the vault."
    respond = follower({password: ["login swordfish", "open"], "": ["login vault", "open"]})  # it reads the word
    line = generate_with(tmp_path, stub_openai, lambda body: respond(body, PASSWORD, hint))
    assert line["valid"] and line["hint_failure"] == "hint_leak", line["reason"]
    assert "which move" in line["reason"] and line["designer_reward"] < 0 < honest["designer_reward"]


#: The honest keypad's rule in Russian, and a content-free Russian hint for an env that pays for Cyrillic text.
RUSSIAN_HINT = "Ключ — последняя цифра суммы трёх чисел; ответьте key и эту цифру."
RUSSIAN_FILLER = "Думайте спокойно и внимательно, проверяйте каждый шаг и не торопитесь с ответом."
#: Wins when the agent says its message has Cyrillic letters: a hint-arm detector by script, not by content.
DETECTOR_BY_SCRIPT = KEYPAD.format(
    name="Script", extra=" If your message has Cyrillic letters, reply \\\\boxed{{cyrillic}}.", also=', "cyrillic"'
)  # fmt: skip
_CYRILLIC = re.compile("[\u0400-\u04ff]")


def russian_reader(source: str, hint: str):
    """The scripted model of the red-team suite, reading the rule in Russian and following a script detector."""

    def respond(body):
        system, user = body["messages"][0]["content"], body["messages"][1]["content"]
        if system.startswith("You design"):
            return {"content": f"```python\n{source}```"}
        if system.startswith("You write short privileged hints"):
            return {"content": f"HINT: {hint}"}
        if "has Cyrillic letters" in user and _CYRILLIC.search(user):  # it follows the observation's instruction
            return {"content": "\\boxed{cyrillic}"}
        numbers = _numbers(user)
        if numbers is None:
            return {"content": "\\boxed{wait}"}
        a, b, c = numbers
        knows_rule = "последняя цифра суммы" in user  # the hint's content, not its presence
        key = (a + b + c) % 10 if knows_rule or a % 2 == 0 else (a * b) % 10
        return {"content": f"\\boxed{{key {key}}}"}

    return respond


def test_an_honest_hint_in_russian_earns_what_the_english_one_earns(tmp_path, stub_openai, honest):
    line = generate_with(tmp_path, stub_openai, russian_reader(HONEST, RUSSIAN_HINT))
    assert line["valid"] and line["hint_failure"] is None, line["reason"]
    assert line["placebo"] == line["no_hint"] != line["hinted"] == [1.0] * 4  # the placebo says nothing
    assert line["regret"] == honest["regret"] > 0 and line["designer_reward"] == honest["designer_reward"]


def test_a_detector_of_the_hints_script_earns_no_regret(tmp_path, stub_openai, honest):
    line = generate_with(tmp_path, stub_openai, russian_reader(DETECTOR_BY_SCRIPT, RUSSIAN_FILLER))
    assert line["valid"] and line["measured"], line["reason"]
    assert line["hinted"] == [1.0] * 4 and line["placebo"] == [1.0] * 4  # the placebo is Cyrillic too
    assert line["regret"] == 0.0 and line["designer_reward"] < honest["designer_reward"]
