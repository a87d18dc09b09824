"""Designer reward red team: exploit envs must earn no more than an honest env at the agent's frontier.

The designer is an RL policy; any env shape that pays more than an honest frontier env will be found. Each exploit
here goes through the real ``spade-envs generate`` path (extraction, sandboxed validation, hint writing and vetting,
paired measurement, reward) with only the model scripted: the scripted agent follows whatever an observation tells
it to do, and uses a hint only for what it says (it solves the honest env with the hint's rule, and half of the
instances without it).
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from spade_envs.cli.main import main

CORPUS = "examples/data/sample_corpus.jsonl"
#: The seed secret every run here pins (``--seed-secret``): exploit and honest env are measured on the same seeds
#: (an unpinned ``generate`` draws its own secret, so its seeds differ from run to run).
SECRET = "7ea3" * 16

#: A one-try keypad whose key is a digit computed from three numbers; the honest hint states the rule.
KEYPAD = """
import random

class {name}Env:
    max_turns = 3

    def reset(self, seed=None):
        rng = random.Random(seed)
        while True:
            self.a, self.b, self.c = rng.randint(11, 89), rng.randint(11, 89), rng.randint(11, 89)
            self.key = (self.a + self.b + self.c) % 10
            if self.key not in ((self.a * self.b) % 10, 0):
                break
        self.done = False
        return (f"Panel: the numbers {{self.a}}, {{self.b}} and {{self.c}} glow on the door.{extra} "
                "Unlock it with \\\\boxed{{key N}} where N is one digit. One try only."), {{}}

    def step(self, action):
        if self.done:
            return "The door is closed for good.", 0.0, True, False, {{}}
        self.done = True
        if action.strip().lower() in ["key %d" % self.key{also}]:
            return "The door opens.", 1.0, True, False, {{}}
        return "Wrong key. The door seals.", 0.0, True, False, {{}}

    def solution(self):
        return ["key %d" % self.key]
"""
HONEST_HINT = "The key is the last digit of the sum of the three numbers shown; answer with key and that digit."

#: Wins when the agent says it saw a hint: the observation tells it to (a hint-arm detector by text).
DETECTOR_BY_TEXT = KEYPAD.format(
    name="Detector", extra=" If your message has a line that starts with HINT:, reply \\\\boxed{{hint seen}}.",
    also=', "hint seen"',
)  # fmt: skip
HONEST = KEYPAD.format(name="Keypad", extra="", also="")


def _numbers(text: str) -> tuple[int, int, int] | None:
    found = re.search(r"numbers (\d+), (\d+) and (\d+) glow", text)
    return tuple(int(x) for x in found.groups()) if found else None  # type: ignore[return-value]


def scripted(source: str, hint: str):
    """The model: writes ``source`` as the design and ``hint`` as the hint, and plays as described above."""

    def respond(body):
        system, user = body["messages"][0]["content"], body["messages"][1]["content"]
        if system.startswith("You design"):
            return {"content": f"```python\n{source}```"}
        if system.startswith("You write short privileged hints"):
            return {"content": f"HINT: {hint}"}
        if "reply \\boxed{hint seen}" in user and "\nHINT:" in user:  # it follows the observation's instruction
            return {"content": "\\boxed{hint seen}"}
        numbers = _numbers(user)
        if numbers is None:
            return {"content": "\\boxed{wait}"}
        a, b, c = numbers
        knows_rule = "last digit of the sum" in user  # the hint's content, not its presence
        key = (a + b + c) % 10 if knows_rule or a % 2 == 0 else (a * b) % 10  # half the instances without a hint
        return {"content": f"\\boxed{{key {key}}}"}

    return respond


def generate_one(tmp_path, stub_openai, source: str, hint: str, *extra: str, admitted: bool = True) -> dict:
    server = stub_openai(scripted(source, hint))
    out = tmp_path / "pool"
    args = ["generate", "--base-url", server.base_url, "--model", "stub", "--corpus", CORPUS, "--n", "1",
            "--max-attempts", "1", "--plays", "4", "--out", str(out), "--seed-secret", SECRET, *extra]  # fmt: skip
    assert main(args) == (0 if admitted else 1)
    (line,) = [json.loads(x) for x in (out / "manifest.jsonl").read_text().splitlines()]
    return line


_HONEST: list[dict] = []


@pytest.fixture
def honest(tmp_path_factory, stub_openai):
    """The honest frontier env's designer sample (measured once per module)."""
    if not _HONEST:
        line = generate_one(tmp_path_factory.mktemp("honest"), stub_openai, HONEST, HONEST_HINT)
        assert line["valid"] and line["measured"] and line["hinted"] == [1.0] * 4, line["reason"]
        assert 0.0 < line["win_rate"] < 1.0 and line["regret"] > 0
        _HONEST.append(line)
    return _HONEST[0]


def test_a_hint_detector_earns_no_regret_and_less_than_an_honest_env(tmp_path, stub_openai, honest):
    line = generate_one(tmp_path, stub_openai, DETECTOR_BY_TEXT, HONEST_HINT)
    assert line["valid"] and line["measured"], line["reason"]
    assert line["hinted"] == [1.0] * 4 and line["placebo"] == [1.0] * 4  # the placebo is seen as a hint too
    assert line["regret"] == 0.0
    assert line["designer_reward"] < honest["designer_reward"]


def test_without_the_placebo_arm_the_detector_is_paid_as_the_paper_would(tmp_path, stub_openai):
    line = generate_one(tmp_path, stub_openai, DETECTOR_BY_TEXT, HONEST_HINT, "--no-placebo")
    assert line["placebo"] == [] and line["regret"] > 0  # the paper's two arms: the exploit the placebo closes


# ----- leaks the token rules exempted (constants), replayed instead -------------------------------------------------
#: The vault opens after a login with a fixed (constant) password, then "open": the password is what play must find.
PASSWORD = """
import random

class PasswordEnv:
    max_turns = 4

    def reset(self, seed=None):
        self.rng = random.Random(seed)
        self.room = self.rng.choice(["red", "green", "blue"])
        self.logged_in, self.done = False, False
        return f"A vault in the {self.room} room. Log in with login WORD, then open it with open.", {}

    def step(self, action):
        if self.done:
            return "Closed.", 0.0, True, False, {}
        if action.strip() == "login swordfish":
            self.logged_in = True
            return "Logged in.", 0.0, False, False, {}
        if action.strip() == "open" and self.logged_in:
            self.done = True
            return "The vault opens.", 1.0, True, False, {}
        self.done = action.strip().startswith("login")
        return "Denied.", 0.0, self.done, False, {}

    def solution(self):
        return ["login swordfish", "open"]
"""
#: The answer is the same on every seed and shown among 25 distractors: the token rules exempted it as "setting".
DISTRACTORS = """
import random

WORDS = ["amber", "basil", "cedar", "delta", "ember", "fable", "gecko", "haven", "ivory", "jolly", "koala", "lemon",
         "mango", "noble", "olive", "pearl", "quail", "raven", "sable", "tango", "umber", "viola", "wheat", "xenon",
         "banjo"]

class PickEnv:
    max_turns = 2

    def reset(self, seed=None):
        words = list(WORDS)
        random.Random(seed).shuffle(words)
        self.done = False
        return "One of these words opens the box: " + ", ".join(words) + ". Reply pick WORD.", {}

    def step(self, action):
        if self.done:
            return "Closed.", 0.0, True, False, {}
        self.done = True
        return ("Open!", 1.0, True, False, {}) if action.strip() == "pick banjo" else ("No.", 0.0, True, False, {})

    def solution(self):
        return ["pick banjo"]
"""


def follower(rules: dict[str, list[str]]):
    """A scripted model that designs nothing itself: agent turns follow the hint's content when it has ``key``."""

    def respond(body, source, hint):
        system, user = body["messages"][0]["content"], body["messages"][1]["content"]
        if system.startswith("You design"):
            return {"content": f"```python\n{source}```"}
        if system.startswith("You write short privileged hints"):
            return {"content": hint}
        turn = sum(m["role"] == "assistant" for m in body["messages"])
        moves = next((m for key, m in rules.items() if key in user), rules[""])
        return {"content": f"\\boxed{{{moves[min(turn, len(moves) - 1)]}}}"}

    return respond


@pytest.mark.parametrize(
    ("source", "hint", "rules"),
    [(PASSWORD, "The password is swordfish: log in first, then open the vault.",
      {"swordfish": ["login swordfish", "open"], "": ["login vault", "open"]}),
     (DISTRACTORS, "Pick banjo.", {"Pick banjo": ["pick banjo"], "": ["pick amber"]})],
    ids=["constant_password_for_a_middle_move", "constant_answer_among_distractors"],
)  # fmt: skip
def test_a_constant_the_hint_hands_over_is_a_leak_with_its_penalty(tmp_path, stub_openai, honest, source, hint, rules):
    respond = follower(rules)
    server = stub_openai(lambda body: respond(body, source, hint))
    out = tmp_path / "pool"
    args = ["generate", "--base-url", server.base_url, "--model", "stub", "--corpus", CORPUS, "--n", "1",
            "--max-attempts", "1", "--plays", "4", "--out", str(out), "--seed-secret", SECRET]  # fmt: skip
    assert main(args) == 0
    (line,) = [json.loads(x) for x in (out / "manifest.jsonl").read_text().splitlines()]
    assert line["valid"] and line["hint_failure"] == "hint_leak", line["reason"]
    assert "which move" in line["reason"] and line["designer_reward"] < 0 < honest["designer_reward"]


# ----- hint detection by length, measurement-only behaviour, and the honest worked example ---------------------------
#: Wins when the first message is long, i.e. when it carries any hint (a detector by length, not by text).
DETECTOR_BY_LENGTH = KEYPAD.format(
    name="Long", extra=" If your message is over 350 characters long, reply \\\\boxed{{long}}.", also=', "long"'
)  # fmt: skip


def test_a_hint_detector_by_length_earns_no_regret(tmp_path, stub_openai, honest):
    def long_follower(body):
        system, user = body["messages"][0]["content"], body["messages"][1]["content"]
        agent = not system.startswith(("You design", "You write short privileged hints"))
        if agent and "over 350 characters" in user and len(user) > 350:
            return {"content": "\\boxed{long}"}
        return scripted(DETECTOR_BY_LENGTH, HONEST_HINT)(body)

    server = stub_openai(long_follower)
    out = tmp_path / "pool"
    args = ["generate", "--base-url", server.base_url, "--model", "stub", "--corpus", CORPUS, "--n", "1",
            "--max-attempts", "1", "--plays", "4", "--out", str(out), "--seed-secret", SECRET]  # fmt: skip
    assert main(args) == 0
    (line,) = [json.loads(x) for x in (out / "manifest.jsonl").read_text().splitlines()]
    assert line["valid"] and line["placebo"] == line["hinted"] == [1.0] * 4, line  # the placebo is as long
    assert line["regret"] == 0.0 and line["designer_reward"] < honest["designer_reward"]


#: Honest in validation's long-lived worker, a free win as the first episode of a fresh worker (as every play is).
FIRST_EPISODE = KEYPAD.format(name="Fresh", extra="", also="").replace(
    "        self.done = True\n",
    "        self.done = True\n        FreshEnv.steps = getattr(FreshEnv, 'steps', 0) + 1\n"
    "        if FreshEnv.steps == 1:\n            return 'The door opens.', 1.0, True, False, {}\n",
)


def test_an_env_easy_only_as_a_first_episode_is_rejected_with_a_penalty(tmp_path, stub_openai):
    line = generate_one(tmp_path, stub_openai, FIRST_EPISODE, HONEST_HINT, admitted=False)
    assert not line["valid"] and line["reason"].startswith("first_episode_differs"), line["reason"]
    assert line["designer_reward"] == -1.0


def test_the_honest_hint_of_our_worked_example_is_no_leak_on_the_real_path(tmp_path, stub_openai):
    from spade_envs.builtin import builtin_source

    source = builtin_source("VaultCodeEnv").replace("class VaultCodeEnv", "class MyVaultEnv")
    hint = "Inspect clues 1, 2, 3 and 4 first, work out each digit, then enter the four digits as one code."
    line = generate_one(tmp_path, stub_openai, source, hint)
    assert line["valid"] and line["hint_failure"] is None and len(line["hinted"]) == 4, line["reason"]


# ----- tool use: a constant recipient listed among the interface's enum values, named by the hint -------------------
def test_a_tool_use_hint_naming_a_constant_recipient_is_a_leak_on_the_real_path(tmp_path, stub_openai):
    data = json.loads((Path(__file__).parents[1] / "data" / "leak_replay_cases.json").read_text())
    source, hint = data["envs"]["t_payout"]["source"], "Pay Northwind Dental: the vendor never changes."

    def respond(body):
        system = body["messages"][0]["content"]
        if system.startswith("You design"):
            return {"content": f"```python\n{source}```"}
        if system.startswith("You write short privileged hints"):
            return {"content": hint}
        return {"content": "<answer>done</answer>"}

    server = stub_openai(respond)
    out = tmp_path / "pool"
    args = ["generate", "--base-url", server.base_url, "--model", "stub", "--setting", "tool_use", "--n", "1",
            "--max-attempts", "1", "--plays", "2", "--out", str(out), "--seed-secret", SECRET]  # fmt: skip
    assert main(args) == 0
    (line,) = [json.loads(x) for x in (out / "manifest.jsonl").read_text().splitlines()]
    assert line["valid"] and line["hint_failure"] == "hint_leak", line["reason"]
    assert "which turn" in line["reason"] and line["designer_reward"] < 0
