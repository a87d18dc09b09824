"""The designer-boundary measurement's pieces (recipe/spade/laptop/design_validity.py) without a model run: the prompts
are the recipe's own (document, worked example), they are fitted as the designer loop fits them, and the table
tallies the failure codes. The measurement itself needs SmolLM2 (minutes per batch; docs/cpu.md)."""

from __future__ import annotations

from recipe.spade.cpu.tiny_model import build_tokenizer
from recipe.spade.laptop.design_validity import CORPUS, DesignResult, designer_prompts, fit, spade_block, summarise
from spade_envs.design.prompts import builtin_example


def test_the_prompts_are_the_recipes_and_fit_the_context_as_the_designer_loop_fits_them(tmp_path):
    spade = spade_block(tmp_path, CORPUS)
    assert spade["designer"]["show_example"] is True and spade["temperature"] == 1.0
    tasks = designer_prompts(spade, 3)
    users = [t["messages"][1]["content"] for t in tasks]
    assert len(set(users)) == 3 and all(t["document"] and t["document"] in u for t, u in zip(tasks, users))
    example = builtin_example("games").splitlines()[0]
    assert all(example in u for u in users)  # the worked example, as the recipe shows it
    later = designer_prompts({**spade, "run_dir": str(tmp_path / "again")}, 1, first=2)
    assert later[0]["messages"] == tasks[2]["messages"]  # a split measurement (--first) asks the same prompts
    tokenizer = build_tokenizer()
    whole = fit(tokenizer, tasks[0], 100_000)
    cut = fit(tokenizer, tasks[0], len(whole.ids) - 50)
    assert whole.status == "fits" and cut.status == "shortened" and len(cut.ids) <= len(whole.ids) - 50


def test_the_table_tallies_failure_codes_and_the_valid_rate():
    results = [DesignResult(i, "s", None, 100 + i, "fits", 10 * i, code, "") for i, code in
               enumerate(["no_code_block", "no_code_block", "syntax_error", None])]  # fmt: skip
    table = summarise(results).splitlines()
    assert table[2:5] == ["| `no_code_block` | 2 | 0.50 |", "| `syntax_error` | 1 | 0.25 |", "| `valid` | 1 | 0.25 |"]
    assert table[-1] == "valid 1/4 = 0.25; prompt tokens 100-103 (mean 102); answer tokens 0-30 (mean 15)"
