import json

from spade_envs.builtin import BUILTINS
from spade_envs.cli.main import main


def test_list_shows_every_builtin(capsys):
    assert main(["list"]) == 0
    out = capsys.readouterr().out
    assert all(e.name in out for e in BUILTINS)


def test_demo_prints_a_passing_row_per_builtin(capsys):
    assert main(["demo", "--seeds", "0", "1"]) == 0
    out = capsys.readouterr().out
    rows = [line for line in out.splitlines() if line.split() and line.split()[0] in {e.name for e in BUILTINS}]
    assert len(rows) == len(BUILTINS)
    assert all(line.split()[-1] == "ok" and " 1.00 " in line for line in rows)
    assert "0 failing" in out


def test_show_prints_a_won_transcript(capsys):
    assert main(["show", "RetailAfterSalesEnv", "--seed", "2"]) == 0
    assert "outcome 1 (won)" in capsys.readouterr().out


def test_unknown_env_is_a_clear_error(capsys):
    assert main(["show", "NopeEnv"]) == 2
    assert "no built-in environment 'NopeEnv'" in capsys.readouterr().err


def test_validate_accepts_a_builtin_and_rejects_a_broken_file(capsys, tmp_path):
    assert main(["validate", "SequenceOracleEnv", "--setting", "games"]) == 0
    assert "admissible: SequenceOracleEnv" in capsys.readouterr().out
    broken = tmp_path / "broken_env.py"
    broken.write_text("class BrokenEnv(:\n    pass\n")
    assert main(["validate", str(broken), "--json"]) == 1
    report = json.loads(capsys.readouterr().out)
    assert report["ok"] is False and report["code"] == "syntax_error"
    assert main(["validate", str(tmp_path / "missing.py")]) == 2
    assert "neither a file nor a built-in" in capsys.readouterr().err


def test_play_lets_a_person_win_with_typed_commands(capsys, monkeypatch):
    from spade_envs.builtin import load_builtin

    env = load_builtin("VaultCodeEnv")()
    env.reset(7)
    lines = iter(env.solution())
    monkeypatch.setattr("builtins.input", lambda _prompt: next(lines))
    assert main(["play", "VaultCodeEnv", "--seed", "7"]) == 0
    assert "outcome 1: won" in capsys.readouterr().out


def test_run_lets_a_scripted_model_play_a_game_and_a_tool_env(capsys, stub_openai):
    """A stub endpoint replays each env's reference solution: the real sandbox, prompts and play loop run."""
    from spade_envs.builtin import load_builtin

    for name, hint in (("SequenceOracleEnv", None), ("RetailAfterSalesEnv", "look things up first")):
        env = load_builtin(name)()
        scripts = {}
        for seed in (3, 4):
            env.reset(seed)
            scripts[seed] = list(env.solution())

        episodes: list[int] = []

        def respond(body, scripts=scripts, name=name, episodes=episodes):
            turn = sum(m["role"] == "assistant" for m in body["messages"])
            if turn == 0:  # a new conversation: the next episode, seeds 3 then 4
                episodes.append(3 + len(episodes))
            text = scripts[episodes[-1]][turn]
            return {"content": f"My move: \\boxed{{{text}}}" if name == "SequenceOracleEnv" else text}

        server = stub_openai(respond)
        args = ["run", name, "--base-url", server.base_url, "--model", "stub", "--episodes", "2", "--seed", "3"]
        assert main(args + (["--hint", hint] if hint else [])) == 0
        out = capsys.readouterr().out
        assert f"{name}: 2/2 won, mean outcome 1.000" in out
        assert server.requests[0]["messages"][0]["role"] == "system"
        if hint:
            assert "HINT: look things up first" in server.requests[0]["messages"][1]["content"]
            assert server.requests[0]["tools"]


CORRIDOR = """
class CorridorEnv:
    max_turns = 40

    def reset(self, seed=None):
        self.pos = 0
        return "Walk to cell 30: reply walk.", {}

    def step(self, action):
        self.pos += action.strip() == "walk"
        done = self.pos >= 30
        return ("Out!" if done else f"Cell {self.pos}."), float(done), done, False, {}

    def solution(self):
        return ["walk"] * 30
"""


def test_validate_plays_with_the_training_turn_cap(capsys, tmp_path):
    path = tmp_path / "corridor.py"
    path.write_text(CORRIDOR)
    assert main(["validate", str(path)]) == 1
    assert "solution_too_long" in capsys.readouterr().out
    assert main(["validate", str(path), "--max-turns", "40", "--seed", "3", "--key", "k", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["max_turns"] == 40 and report["run_seed"] == 3 and report["key"] == "k"
    assert len(report["seeds"]) == 3 and len(report["probe_seeds"]) == 2


ESCAPING_ENV = '''
class EscapeEnv:
    """Observations and errors that would drive a terminal: clipboard (OSC 52), title, cursor moves, C1 CSI."""

    max_turns = 3

    def reset(self, seed=None):
        return "\\x1b]52;c;ZWNobyBwd25lZA==\\x07\\x1b]0;title\\x07\\x9b2J\\x1b[1A\\rstart\\tok", {}

    def step(self, action):
        raise ValueError("\\x1b[2K\\radmissible: FakeEnv")

    def solution(self):
        return ["go"]
'''


def test_env_text_is_escaped_in_cli_output(capsys, monkeypatch, tmp_path):
    """Issue 24, finding 7: play printed observations raw and validate printed the rejection reason raw."""
    path = tmp_path / "escape_env.py"
    path.write_text(ESCAPING_ENV)
    monkeypatch.setattr("builtins.input", lambda _prompt: (_ for _ in ()).throw(EOFError))
    assert main(["play", str(path), "--isolation", "landlock"]) == 0
    played = capsys.readouterr().out
    assert main(["validate", str(path), "--isolation", "landlock"]) == 1
    validated = capsys.readouterr().out
    for out in (played, validated):
        assert not any(ord(c) < 32 and c not in "\n\t" or 0x7F <= ord(c) <= 0x9F for c in out), repr(out)
    assert "\\x1b]52;c;ZWNobyBwd25lZA==\\x07" in played and "\\x9b2J" in played and "start\tok" in played
    assert validated.startswith("rejected: ") and "admissible: FakeEnv" in validated
