"""The agent's prompt (spade_envs/play/prompts.py): its templates, the hint on the first observation only."""

from importlib import resources

import pytest

import spade_envs.play.prompts as prompts
from spade_envs.play.prompts import agent_messages, agent_system_prompt, first_turn, render, with_hint

TEMPLATES = resources.files("spade_envs.play").joinpath("templates")


def roles(messages):
    return [m["role"] for m in messages]


def test_every_agent_template_is_package_data_and_used(monkeypatch):
    names = {p.name.removesuffix(".md") for p in TEMPLATES.iterdir() if p.name.endswith(".md")}
    used = set()
    original = prompts.render

    def recording_render(name, **values):
        used.add(name)
        return original(name, **values)

    monkeypatch.setattr(prompts, "render", recording_render)
    for setting in ("games", "tool_use"):
        agent_messages(setting, "obs", hint="hint")
    assert used == names


def test_render_checks_placeholders_both_ways():
    with pytest.raises(ValueError, match=r"missing \['observation'\], unexpected \[\]"):
        render("agent_games_first_turn")
    with pytest.raises(ValueError, match=r"unexpected \['extra'\]"):
        render("hint_suffix", observation="o", hint="h", extra="x")
    with pytest.raises(FileNotFoundError, match="nope.md is missing"):
        render("nope")


def test_agent_prompts():
    games = agent_system_prompt("games")
    assert "step by step" in games and "\\boxed{" in games
    tools = agent_system_prompt("tool_use")
    for phrase in ["calling tools", "one step at a time", "<answer>...</answer>", "ask the user", "decline"]:
        assert phrase in tools, phrase
    assert first_turn("tool_use", "Book a room.") == "Book a room."
    assert "Book a room." in first_turn("games", "Book a room.")


def test_hint_goes_on_the_first_observation_only():
    assert with_hint("You see a vault.", " Inspect first. ") == "You see a vault.\n\nHINT: Inspect first."
    with pytest.raises(ValueError, match="hint is empty"):
        with_hint("obs", " ")
    plain = agent_messages("games", "You see a vault.")
    hinted = agent_messages("games", "You see a vault.", hint="Inspect first.")
    assert roles(hinted) == ["system", "user"] and hinted[0] == plain[0]
    assert "You see a vault.\n\nHINT: Inspect first.\n\nReason step by step" in hinted[1]["content"]
    assert "HINT" not in plain[1]["content"]
    tools = agent_messages("tool_use", "Book a room.", hint="Look rooms up first.")
    assert tools[1]["content"] == "Book a room.\n\nHINT: Look rooms up first."
