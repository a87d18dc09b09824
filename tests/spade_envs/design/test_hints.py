import json

import pytest

from spade_envs.builtin import load_builtin
from spade_envs.design.hints import HINT_WORD_LIMITS, HintResult, clean_hint, hint_leaks, tool_call_values, vet_hint
from spade_envs.envs.failures import HINT_FAILURE_CODES
from spade_envs.envs.tooluse import parse_agent_text, tool_call

SEEDS = range(12)


def instance(name, seed):
    env = load_builtin(name)()
    obs, _ = env.reset(seed)
    return env, obs, env.solution()


# -- clean_hint --------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "raw",
    [
        "HINT: Inspect every clue first.",
        "  **Hint:**   Inspect every clue first.\n",
        "<think>the code is 80946</think>\nHint - Inspect every clue first.",
        "hint: HINT: Inspect   every\nclue first.",
    ],
)
def test_clean_hint_strips_thinking_prefixes_and_whitespace(raw):
    assert clean_hint(raw, "games") == HintResult("Inspect every clue first.")


def test_clean_hint_fails_on_empty_or_thinking_only():
    for raw in ["", "   ", "HINT:", "<think>still thinking about the answer"]:
        result = clean_hint(raw, "games")
        assert result.hint is None and result.failure == "hint_failed" and not result.ok
    assert "hint_failed" in HINT_FAILURE_CODES


def test_clean_hint_enforces_the_word_limit_per_setting():
    assert HINT_WORD_LIMITS == {"games": 100, "tool_use": 120}
    assert clean_hint("word " * 100, "games").ok
    too_long = clean_hint("word " * 101, "games")
    assert too_long.failure == "hint_failed" and "101 words" in too_long.reason
    assert clean_hint("word " * 120, "tool_use").ok
    assert not clean_hint("word " * 121, "tool_use").ok


def test_unknown_setting_is_rejected():
    with pytest.raises(ValueError, match="unknown setting 'chess'; known: games, tool_use"):
        clean_hint("x", "chess")
    with pytest.raises(ValueError, match="known: games, tool_use"):
        hint_leaks("x", "chess")


def test_leak_check_needs_something_to_compare_with():
    with pytest.raises(ValueError, match="a games leak check needs solution_actions"):
        hint_leaks("x", "games", initial_values=["4821"])
    with pytest.raises(ValueError, match="needs solution_actions or initial_values"):
        hint_leaks("x", "tool_use", solution_actions=[])


# -- games -------------------------------------------------------------------------------------------------------

GOOD_GAME_HINTS = {
    "VaultCodeEnv": (
        "Inspect the clue of every digit first and compute each one exactly: its value is that digit. Check that "
        "your digits add up to the keypad checksum, then type the whole code at once as enter <code>."
    ),
    "DeductionGridEnv": (
        "Reveal every clue before solving and fill in a grid of houses against values, crossing out what each clue "
        "rules out. Submit once, with every value assigned: solve <value>=<house> for all of them."
    ),
    "SequenceOracleEnv": (
        "Compare differences, ratios and every other term of the known terms to identify which rule family "
        "generates the sequence, fit its parameters, and verify the rule on all known terms before each predict."
    ),
}


@pytest.mark.parametrize("name", sorted(GOOD_GAME_HINTS))
def test_good_game_hints_pass_on_every_seed(name):
    for seed in SEEDS:
        _, obs, solution = instance(name, seed)
        assert hint_leaks(GOOD_GAME_HINTS[name], "games", solution_actions=solution, visible_text=obs) is None


def test_vault_code_answer_leaks_in_every_form():
    _, obs, solution = instance("VaultCodeEnv", 0)
    code = solution[-1].split()[1]
    for hint in [f"The code is {code}.", f"\\boxed{{enter {code}}}", " ".join(code), "-".join(code), ", ".join(code)]:
        reason = hint_leaks(hint, "games", solution_actions=solution, visible_text=obs)
        assert reason is not None and code in reason, hint
    # the command word and the digit positions are approach, not answer
    assert (
        hint_leaks("enter the code after inspect 1 to 5", "games", solution_actions=solution, visible_text=obs) is None
    )


def test_single_digit_final_answer_leaks_but_other_single_digits_do_not():
    solution = ["open 1", "open 2", "report 7"]
    assert hint_leaks("The balance is 7.", "games", solution_actions=solution) is not None
    assert hint_leaks("Open page 1 and page 2 first.", "games", solution_actions=solution) is None
    assert hint_leaks("Report -7.", "games", solution_actions=["report -7"]) is not None
    assert hint_leaks("It is 1,234 in total.", "games", solution_actions=["report 1234"]) is not None


def test_intermediate_numbers_with_two_digits_leak():
    _, obs, solution = instance("SequenceOracleEnv", 0)
    two_digit = next(a.split()[1] for a in solution if len(a.split()[1].lstrip("-")) >= 2)
    assert hint_leaks(f"The next term is {two_digit}.", "games", solution_actions=solution, visible_text=obs)


def test_deduction_grid_assignment_leaks_unless_shown_in_the_rules():
    _, obs, solution = instance("DeductionGridEnv", 0)
    pairs = solution[-1].split()[1:]
    hidden = next(p for p in pairs if p.lower() not in obs.lower())
    value, house = hidden.split("=")
    assert hint_leaks(f"Note that {value} = {house}.", "games", solution_actions=solution, visible_text=obs)
    assert hint_leaks(" ".join(pairs), "games", solution_actions=solution, visible_text=obs)
    # category values are listed in the rules, so naming one alone is no leak
    assert hint_leaks(f"Place {value} last.", "games", solution_actions=solution, visible_text=obs) is None


def test_one_word_answers_behind_a_command_leak_even_if_visible():
    _, obs, solution = instance("SurveyRouteEnv", 0)
    last_stop = solution[-1].split()[1]
    assert last_stop in obs
    assert hint_leaks(f"Finish at {last_stop}.", "games", solution_actions=solution, visible_text=obs)


def test_one_token_commands_are_not_answers():
    _, obs, solution = instance("FogCourierEnv", 0)
    hint = "Explore toward the parcel's row and column, pickup on its cell, then walk to the drop point and drop."
    assert solution[-1] == "drop"
    assert hint_leaks(hint, "games", solution_actions=solution, visible_text=obs) is None
    assert hint_leaks("Say xyzzy.", "games", solution_actions=["xyzzy"]) is not None


def test_hidden_words_of_the_final_answer_leak():
    assert hint_leaks("Use 9K359W.", "games", solution_actions=["say 9K359W"]) is not None
    assert hint_leaks("the password is swordfish", "games", solution_actions=["unlock swordfish"]) is not None
    assert hint_leaks("Unlock it when ready.", "games", solution_actions=["unlock swordfish"]) is None


# -- tool use ----------------------------------------------------------------------------------------------------

GOOD_TOOL_HINTS = {
    "SmartHomeSceneEnv": (
        "List the devices of each room the request mentions to learn every <device_id> and whether it is offline. "
        "Reconnect each offline device you must change, then set each requested property to its <value> with "
        "set_device, leave every other device alone, and reply <answer>done</answer>."
    ),
    "CrmReportEnv": (
        "Page through the customers of the requested region, open each customer's record to keep the ones that "
        "match the request, then list each match's deals and combine the ones in the stage asked about. Answer "
        "with exactly what the request asks for."
    ),
    "TripBookingEnv": (
        "Look up the passenger to get <passenger_id>, search the requested route and date, and pick the cheapest "
        "flight that leaves late enough. Hold a seat of the preferred type, falling back when none is left, book "
        "the <hold_id> for the passenger and answer with the confirmation code."
    ),
}


def first_call_arguments(solution, turn=0):
    return parse_agent_text(solution[turn])[0][0][1]


def final_answer(solution):
    answer = parse_agent_text(solution[-1])[1]
    return f"${int(answer):,}" if answer.isdigit() else answer  # "$129,000": separators must not hide a number


LEAKY_TOOL_HINTS = {
    "SmartHomeSceneEnv": lambda sol: f"Change {first_call_arguments(sol, -2)['device_id']} first.",
    "CrmReportEnv": lambda sol: f"The answer is {final_answer(sol)}.",
    "TripBookingEnv": lambda sol: f"Search for the passenger {first_call_arguments(sol)['query']}.",
}


@pytest.mark.parametrize("name", sorted(GOOD_TOOL_HINTS))
def test_good_tool_hints_pass_on_every_seed(name):
    for seed in SEEDS:
        env, _, solution = instance(name, seed)
        interface = json.dumps(env.tools())
        assert hint_leaks(GOOD_TOOL_HINTS[name], "tool_use", solution_actions=solution, visible_text=interface) is None


@pytest.mark.parametrize("name", sorted(LEAKY_TOOL_HINTS))
def test_concrete_tool_values_leak(name):
    for seed in SEEDS:
        env, _, solution = instance(name, seed)
        hint = LEAKY_TOOL_HINTS[name](solution)
        reason = hint_leaks(hint, "tool_use", solution_actions=solution, visible_text=json.dumps(env.tools()))
        assert reason is not None and "concrete value" in reason, (seed, hint)


def test_initial_values_from_tool_outputs_leak_too():
    _, _, solution = instance("BankTransferRecoveryEnv", 3)
    hint = "Move 4321.50 into the account first."  # a balance seen in a tool output, not in any call
    assert hint_leaks(hint, "tool_use", solution_actions=solution) is None
    assert hint_leaks(hint, "tool_use", solution_actions=solution, initial_values=["4321.5"]) is not None
    assert hint_leaks("Ask Dana Reyes.", "tool_use", initial_values=["Dana Reyes"]) is not None
    assert hint_leaks("Ask Dana about it.", "tool_use", initial_values=["Dana Reyes"]) is None


def test_generic_values_are_not_leaks():
    values = ["done", "on", "1", "7", "yes", "ab"]
    hint = "Turn it on, check 1 or 7 items, say yes, and answer done."
    assert hint_leaks(hint, "tool_use", initial_values=values) is None


def test_tool_call_values_collects_nested_arguments_and_answers():
    turns = [
        tool_call("transfer", from_account="CHK-1", amount=2000.0, urgent=True, note=None)
        + "\n"
        + tool_call("tag", labels=["vip", "west"], meta={"region": "West", "count": 12}),
        "<answer>129000</answer>",
        "<tool_call>{not json}</tool_call>",
    ]
    assert tool_call_values(turns) == {"CHK-1", "2000", "vip", "west", "West", "12", "129000"}


def test_vet_hint_cleans_then_checks():
    env, _, solution = instance("TaskTriageEnv", 0)
    interface = json.dumps(env.tools())
    task_id = first_call_arguments(solution)["task_id"]
    leaked = vet_hint(f"HINT: start with {task_id}", "tool_use", solution_actions=solution, visible_text=interface)
    assert leaked.failure == "hint_leak" and leaked.hint is None and task_id in leaked.reason
    good = vet_hint("<think>hmm</think>Search, then act on each <task_id>.", "tool_use", solution_actions=solution)
    assert good == HintResult("Search, then act on each <task_id>.")
    assert vet_hint("", "tool_use").failure == "hint_failed"


def test_the_honest_hint_of_our_worked_example_is_not_a_leak():
    """VaultCodeEnv's first four moves ("inspect 1" .. "inspect 4") are the same on every seed: a hint that names
    them is the env's procedure, not an instance's answer (it used to be flagged because the whole solution differs)."""

    env = load_builtin("VaultCodeEnv")()
    instances = []
    for seed in (11, 12, 13, 14):
        obs, _ = env.reset(seed)
        instances.append((obs, env.solution()))
    assert len({tuple(a) for _, a in instances}) > 1  # the codes differ between seeds
    hint = "Inspect clues 1, 2, 3 and 4 first, work out each digit, then enter the four digits as one code."
    for i, (obs, actions) in enumerate(instances):
        others = [a for j, (_, a) in enumerate(instances) if j != i]
        result = vet_hint(hint, "games", solution_actions=actions, other_solutions=others, visible_text=obs)
        assert result.ok, result.reason
    # a window that differs between seeds is still flagged: the last inspect moves plus this seed's code
    obs, actions = instances[0]
    code = actions[-1].split()[-1]
    leaky = f"Inspect clues 2, 3 and 4, then enter {code}."
    others = [a for _, a in instances[1:]]
    assert vet_hint(leaky, "games", solution_actions=actions, other_solutions=others, visible_text=obs).failure \
        == "hint_leak"  # fmt: skip


@pytest.mark.parametrize(
    "words", ["four thousand seven hundred twenty one", "four seven two one", "Four-seven-two-one"]
)
def test_an_answer_spelled_out_in_words_is_a_leak(words):
    """Issue 26: spelled-out numbers paid as regret instead of the leak penalty."""
    others = [["inspect", "enter 1938"], ["inspect", "enter 5560"]]
    result = vet_hint(f"Type {words}.", "games", solution_actions=["inspect", "enter 4721"], other_solutions=others,
                      visible_text="A keypad. Reply enter NNNN.")  # fmt: skip
    assert result.failure == "hint_leak", result
    assert vet_hint("Enter one code after you inspect.", "games", solution_actions=["inspect", "enter 4721"],
                    other_solutions=others, visible_text="A keypad. Reply enter NNNN.").ok  # fmt: skip
