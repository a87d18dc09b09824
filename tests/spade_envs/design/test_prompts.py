import random
from importlib import resources

import pytest

import spade_envs.design.prompts as prompts
from spade_envs.builtin import builtin_source
from spade_envs.design.ast_hash import without_comments
from spade_envs.design.extract import extract_code
from spade_envs.design.hints import HINT_WORD_LIMITS
from spade_envs.design.prompts import (
    TASK_VARIANTS,
    VARIANT_WEIGHTS,
    Exemplar,
    audit_messages,
    audit_verdict,
    builtin_example,
    concept_ideas,
    designer_messages,
    hint_messages,
    render,
)
from spade_envs.envs.skills import DOMAINS, SKILLS

TEMPLATES = resources.files("spade_envs.design.prompts").joinpath("templates")
DOC = "Tidal locks let boats climb between canals of different heights by filling and draining a chamber."
POSITIVE = Exemplar("class TideLockEnv:\n    max_turns = 9\n", "logical_deduction", 0.48, 0.21, "positive")
NEGATIVE = Exemplar("", "logical_deduction", 0.97, 0.0, "negative", reason="agents always won:\nno hidden state")


def roles(messages):
    return [m["role"] for m in messages]


def test_render_checks_placeholders_both_ways():
    with pytest.raises(ValueError, match=r"missing \['code_block'\], unexpected \[\]"):
        render("hint_games_user")
    with pytest.raises(FileNotFoundError, match="agent_games_system.md is missing"):
        render("agent_games_system")  # the agent's templates live with the agent (spade_envs/play/templates)


def test_every_template_is_package_data_and_used_by_the_renderers(monkeypatch):
    names = {p.name.removesuffix(".md") for p in TEMPLATES.iterdir() if p.name.endswith(".md")}
    used = set()
    original = prompts.render

    def recording_render(name, **values):
        used.add(name)
        return original(name, **values)

    monkeypatch.setattr(prompts, "render", recording_render)
    for setting in ("games", "tool_use"):
        skill = next(iter(SKILLS[setting]))
        kwargs = {"exemplars": [POSITIVE, NEGATIVE], "example_source": builtin_example(setting)}
        if setting == "games":
            designer_messages(setting, DOC, skill, **kwargs)
            designer_messages(setting, None, skill, concepts=["a lock", "tides"], **kwargs)
        else:
            audit_messages(builtin_source("TripBookingEnv"))
            for variant in TASK_VARIANTS:
                for multi_turn in (False, True):
                    designer_messages(
                        setting, DOC, skill, domain="cart", variant=variant, multi_turn=multi_turn, **kwargs
                    )
        hint_messages(setting, "class AEnv: pass")
    assert used == names


def test_games_designer_prompt():
    messages = designer_messages("games", DOC, "logical_deduction", example_source=builtin_example("games"))
    assert roles(messages) == ["system", "user"]
    system, user = (m["content"] for m in messages)
    assert "multi-turn interactive text games" in system and "reasoning agents" in system
    assert f"<reference>\n{DOC}\n</reference>" in user
    assert "never mention it" in user
    assert "**logical_deduction**: " + SKILLS["games"]["logical_deduction"] in user
    for contract in [
        "name ends in `Env`",
        "reset(self, seed=None) -> tuple[str, dict]",
        '{"difficulty": difficulty}',
        "(observation, reward, terminated, truncated, info)",
        "solution(self) -> list[str]",
        "max_turns",
        "random.Random(seed)",
        "\\boxed{...}",
        "Standard library only",
        "never raises",
        "at least 3 state-changing steps",
        "Hidden state is revealed by acting",
        "No guess-and-retry",
        "Random play and doing nothing must lose",
        "reward 1.0",
        "below 1.0",
        "must not change the episode",
    ]:
        assert contract in user, contract
    assert "class VaultCodeEnv" in user and "## A complete example" in user
    assert user.rstrip().endswith("write nothing after it.")
    assert "$" not in user.replace("$$", "")


def test_example_block_does_not_fool_extraction_of_the_prompt_itself():
    user = designer_messages("games", DOC, "optimization", example_source=builtin_example("games"))[1]["content"]
    assert "class VaultCodeEnv" in extract_code(user).code


def test_optional_sections_leave_no_gaps():
    user = designer_messages("games", DOC, "optimization")[1]["content"]
    assert "complete example" not in user and "earlier training" not in user
    assert "\n\n\n" not in user
    assert "same solution; different seeds give different instances.\n\n## Output format" in user


def test_exemplars_render_positives_with_code_and_negatives_as_one_line():
    user = designer_messages("games", DOC, "logical_deduction", exemplars=[POSITIVE, NEGATIVE])[1]["content"]
    assert "## Environments from earlier training" in user
    assert "win rate 0.48, hint regret 0.21" in user and "class TideLockEnv" in user
    assert "- Did not work (skill logical_deduction, agent win rate 0.97): agents always won: no hidden state" in user
    assert "\n\n\n" not in user


def test_code_with_backtick_runs_gets_a_longer_fence():
    source = 'DOC = """\n```python\nx = 1\n```\n"""\nclass AEnv:\n    pass\n'
    user = designer_messages("games", DOC, "optimization", example_source=source)[1]["content"]
    assert "````python\n" + source.strip() + "\n````" in user


def test_exemplar_validation():
    with pytest.raises(ValueError, match="kind must be 'positive' or 'negative'"):
        Exemplar("x", "optimization", 0.5, 0.1, "neutral")
    with pytest.raises(ValueError, match="win_rate must be in"):
        Exemplar("x", "optimization", 1.5, 0.1, "positive")
    with pytest.raises(ValueError, match="regret must be finite"):
        Exemplar("x", "optimization", 0.5, float("nan"), "positive")
    with pytest.raises(ValueError, match="needs a source_snippet"):
        Exemplar(" ", "optimization", 0.5, 0.1, "positive")
    with pytest.raises(ValueError, match="needs a reason"):
        Exemplar("", "optimization", 0.95, 0.0, "negative")
    with pytest.raises(TypeError, match="Exemplar instances"):
        designer_messages("games", DOC, "optimization", exemplars=[{"kind": "positive"}])


@pytest.mark.parametrize("variant", TASK_VARIANTS)
def test_tool_use_designer_prompt(variant):
    messages = designer_messages(
        "tool_use",
        DOC,
        "error_recovery",
        domain="banking",
        variant=variant,
        example_source=builtin_example("tool_use"),
        exemplars=[POSITIVE],
    )
    assert roles(messages) == ["system", "user"]
    user = messages[1]["content"]
    assert "**banking** domain" in user and 'domain = "banking"' in user
    assert "**error_recovery**: " + SKILLS["tool_use"]["error_recovery"] in user
    assert f"## Task variant: {variant}\n\n" + render(f"variant_{variant}") in user
    assert f"<reference>\n{DOC}\n</reference>" in user and "flavour" in user
    for rule in [
        "subclasses `ToolUseEnv`",
        "tool_<name>(self, ...) -> str",
        "Google-style docstring",
        "3 to 8 tools, all deterministic",
        "enum (`Literal`)",
        "1 or 2 distractor tools",
        "ToolError(",
        "Instruction(text, state=..., answer=...)",
        "No files, network, subprocesses",
        "Every criterion is false right after `reset`",
        "type-correct",
        "derivable",
        "some tool can succeed",
        "exactly what its instruction asks",
    ]:
        assert rule in user, rule
    assert render("instructions_single") in user
    assert "class SmartHomeSceneEnv(ToolUseEnv)" in user
    assert user.rstrip().endswith("write nothing after it.")


def test_tool_use_variants_and_modes():
    assert set(VARIANT_WEIGHTS) == set(TASK_VARIANTS) and sum(VARIANT_WEIGHTS.values()) == pytest.approx(1.0)
    assert "decline(reason: str)" in render("variant_irrelevant_request")
    assert "ask" in render("variant_missing_parameter")
    user = designer_messages("tool_use", None, "tool_selection", domain="crm", variant="execute", multi_turn=True)[1]
    assert "3 to 5 `Instruction`s" in user["content"]
    assert "<reference>" not in user["content"] and "\n\n\n" not in user["content"]


def test_designer_argument_errors_name_the_known_values():
    with pytest.raises(ValueError, match="unknown setting 'chess'; known: games, tool_use"):
        designer_messages("chess", DOC, "optimization")
    with pytest.raises(ValueError, match="unknown games skill 'juggling'; known: mathematical_reasoning, "):
        designer_messages("games", DOC, "juggling")
    with pytest.raises(ValueError, match="unknown tool_use skill 'optimization'; known: api_orchestration"):
        designer_messages("tool_use", DOC, "optimization", domain="retail", variant="execute")
    with pytest.raises(ValueError, match="unknown domain 'space'; known: " + ", ".join(DOMAINS)):
        designer_messages("tool_use", DOC, "data_retrieval", domain="space", variant="execute")
    with pytest.raises(ValueError, match="unknown variant None; known: " + ", ".join(TASK_VARIANTS)):
        designer_messages("tool_use", DOC, "data_retrieval", domain="retail")
    with pytest.raises(ValueError, match="apply to tool_use only"):
        designer_messages("games", DOC, "optimization", domain="retail")
    with pytest.raises(ValueError, match="non-empty document"):
        designer_messages("games", "  ", "optimization")
    with pytest.raises(ValueError, match="example_source is empty"):
        designer_messages("games", DOC, "optimization", example_source="")


def test_builtin_examples():
    assert builtin_example("games") == builtin_source("VaultCodeEnv")
    assert builtin_example("tool_use") == builtin_source("SmartHomeSceneEnv")
    with pytest.raises(ValueError, match="known: games, tool_use"):
        builtin_example("chess")


@pytest.mark.parametrize("setting", ["games", "tool_use"])
def test_hint_writer_sees_only_the_source(setting):
    source = builtin_example(setting)
    messages = hint_messages(setting, source)
    assert roles(messages) == ["system", "user"]
    user = messages[1]["content"]
    assert "```python\n" + without_comments(source).strip() + "\n```" in user
    assert user.rstrip().endswith("Reply with the hint text only.")
    assert f"at most {min(100, HINT_WORD_LIMITS[setting])} words" in user
    with pytest.raises(ValueError, match="env_source is empty"):
        hint_messages(setting, "\n")


def test_the_hint_writer_reads_code_without_the_designers_comments_and_docstrings():
    """Issue 26: a designer could plant an instance's answer in a comment or docstring for the hint to repeat."""
    source = ('class VaultEnv:\n    """The code is 4721 on seed 3."""\n    max_turns = 3  # hint: say swordfish\n\n'
              '    def reset(self, seed=None):\n        "remember: 4721"\n'
              '        return "Enter the code.", {}\n')  # fmt: skip
    user = hint_messages("games", source)[1]["content"]
    assert "4721" not in user and "swordfish" not in user
    assert "class VaultEnv:" in user and "max_turns = 3" in user and "return ('Enter the code.', {})" in user


def test_hint_rules_per_setting():
    games = hint_messages("games", "class AEnv: pass")[1]["content"]
    assert "At most 3 sentences" in games and "Never give the answer itself" in games and "format" in games
    tools = hint_messages("tool_use", "class AEnv: pass")[1]["content"]
    assert "<order_id>" in tools and "no ids, names, numbers, amounts, dates or statuses" in tools
    assert "copy-pasteable call sequence" in tools


def test_the_no_corpus_games_prompt_gives_concept_ideas_and_an_example_to_differ_from():
    ideas = concept_ideas(random.Random(3))
    assert len(ideas) == len(set(ideas)) == 3 and ideas == concept_ideas(random.Random(3))
    user = designer_messages("games", None, "logical_deduction", concepts=ideas,
                             example_source=builtin_example("games"))[1]["content"]  # fmt: skip
    assert "<reference>" not in user and all(f"- {idea}" in user for idea in ideas)
    assert "must differ from it" in user and "class VaultCodeEnv" in user
    assert "\n\n## Skill" in user  # the grounding section ends like the document one
    with pytest.raises(ValueError, match="no-corpus"):
        designer_messages("games", None, "logical_deduction")


def test_the_audit_asks_about_solvability_and_rejects_only_on_a_final_no():
    prompt = audit_messages(builtin_source("TripBookingEnv"))[0]["content"]
    assert "class TripBookingEnv" in prompt and "\\boxed{no}" in prompt
    assert audit_verdict("it cannot be done: \\boxed{no}") is False
    assert audit_verdict("first \\boxed{no} then, on reflection, \\boxed{yes}") is True
    assert audit_verdict("no box at all, so no verdict") is True  # an unreadable judge accepts: only no rejects
