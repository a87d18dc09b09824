import pytest

from spade_envs.design.extract import CodeExtraction, extract_code, split_thinking
from spade_envs.envs.failures import FAILURE_CODES

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


# ----- regressions: think tags that are code, and fence shapes models write ---------------------------------

TAG_CODE = [
    'import re\nclass TagEnv:\n    def clean(self, t):\n        return re.sub(r"<think>.*?</think>", "", t)\n',
    'class TagEnv:\n    def clean(self, t):\n        return t.split("<think>")[0]\n',
    'class TagEnv:\n    def clean(self, t):\n        return t.split("</think>")[-1]\n',
]


@pytest.mark.parametrize("code", TAG_CODE)
@pytest.mark.parametrize("prefix", ["", "<think>\nplan...\n</think>\n", "plan...\n</think>\n"])
def test_think_tags_inside_a_visible_code_block_are_code(code, prefix):
    assert extract_code(prefix + "Here is the env:\n" + block(code)) == CodeExtraction(code, "python block")


def test_prose_that_mentions_an_open_think_tag_hides_nothing():
    assert extract_code("The agent may use <think> tags.\n" + block(ENV)).code == ENV


def test_the_last_block_that_defines_an_env_wins_over_a_later_usage_example():
    usage = "env = TideEnv()\nenv.reset(0)\n"
    assert extract_code(block(ENV) + "Usage:\n" + block(usage)).code == ENV
    assert extract_code(block("env.step('x')\n") + "Final:\n" + block(ENV, "")).code == ENV
    assert extract_code(block(usage)).code == usage  # no env anywhere: the last python block (fails validation)


@pytest.mark.parametrize(
    "text",
    [
        block(ENV, "python:env.py"),
        block(ENV, "{.python}"),
        block(ENV, "python", fence="~~~"),
        "1. Code:\n    ```python\n" + "".join("    " + line + "\n" for line in ENV.splitlines()) + "    ```\n",
        "```python\n" + ENV + "``` that is all\n",
    ],
)
def test_fence_shapes(text):
    assert extract_code(text).code == ENV


def test_a_fence_line_inside_a_string_does_not_end_the_block():
    code = "class TideEnv:\n    RULES = '''\n```\nexample\n```\n'''\n    max_turns = 5\n"
    assert extract_code(block(code)).code == code
