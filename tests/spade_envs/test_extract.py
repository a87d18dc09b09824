import pytest

from spade_envs.extract import CodeExtraction, extract_code, split_thinking
from spade_envs.failures import FAILURE_CODES

ENV = "class TideEnv:\n    max_turns = 5\n"
DRAFT = "class DraftEnv:\n    pass\n"


def block(code, info="python", fence="```"):
    return f"{fence}{info}\n{code}{fence}\n"


def test_takes_the_last_complete_python_block():
    text = "Plan first.\n" + block(DRAFT) + "Better version:\n" + block(ENV) + "\n"
    assert extract_code(text) == CodeExtraction(ENV, "python block")


def test_py_and_python3_info_strings_count():
    assert extract_code(block(ENV, "py")).code == ENV
    assert extract_code(block(ENV, "Python3 title=env.py")).code == ENV


def test_ignores_a_draft_inside_think():
    text = "<think>\n" + block(DRAFT) + "</think>\nHere it is:\n" + block(ENV)
    assert extract_code(text).code == ENV


def test_later_block_inside_think_does_not_win_over_an_earlier_visible_one():
    text = block(ENV) + "<think>second thoughts\n" + block(DRAFT) + "</think>done"
    assert extract_code(text).code == ENV


def test_unclosed_think_makes_the_rest_thinking():
    text = block(ENV) + "<think>let me rewrite\n" + block(DRAFT)
    assert extract_code(text).code == ENV


def test_code_only_inside_think_is_reported():
    result = extract_code("<think>\n" + block(ENV) + "</think>\nI could not finish.")
    assert result == CodeExtraction(None, "code only inside <think>")
    assert result.failure == "no_code_block" and result.failure in FAILURE_CODES


def test_closing_think_without_opening_means_the_template_opened_it():
    text = "drafting...\n" + block(DRAFT) + "</think>\nFinal answer:\n" + block(ENV)
    assert extract_code(text).code == ENV
    assert split_thinking("a</think>b") == ("b", "a")


def test_only_an_unclosed_block_is_reported():
    result = extract_code("Here is the code:\n```python\nclass TideEnv:\n    max_turns = 5\n")
    assert result == CodeExtraction(None, "only an unclosed code block")


def test_no_code_at_all():
    assert extract_code("I refuse.") == CodeExtraction(None, "no code block")
    assert extract_code(block('{"a": 1}\n', "json")).reason == "no code block"
    assert extract_code(block("", "python")).reason == "no code block"


def test_bare_block_only_when_it_parses_and_defines_an_env_class():
    assert extract_code(block(ENV, "")) == CodeExtraction(ENV, "bare block")
    assert extract_code(block("class Helper:\n    pass\n", "")).code is None
    assert extract_code(block("class BrokenEnv(:\n", "")).code is None
    # a python block always wins over a bare one, even an earlier python block
    assert extract_code(block(DRAFT) + block(ENV, "")).code == DRAFT


def test_longer_fences_hold_inner_backticks():
    code = 'DOC = """\n```\nnot a fence end\n```\n"""\n' + ENV
    assert extract_code(block(code, "python", fence="````")).code == code


def test_no_automatic_repair():
    broken = "class TideEnv:\n    def f(self):\n        return f'{x'\n"
    assert extract_code(block(broken)).code == broken


@pytest.mark.parametrize("tag", ["<think>", "<THINK>"])
def test_split_thinking_is_case_insensitive(tag):
    visible, thinking = split_thinking(f"a{tag}b</think>c")
    assert (visible, thinking) == ("ac", "b")
