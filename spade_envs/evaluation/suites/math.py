r"""AIME-25, AIME-26 (math-verify on ``\boxed{}`` answers) and GPQA-Diamond (multiple choice, seeded shuffles)."""

from __future__ import annotations

import random
from pathlib import Path

from spade_envs.envs.llm import ChatClient
from spade_envs.evaluation.answers import choice_letter, math_check
from spade_envs.evaluation.records import Item, SampleRecord, Sampling
from spade_envs.evaluation.suite import Suite
from spade_envs.evaluation.suites.files import find_data_file, pick, read_rows

__all__ = ["AimeSuite", "GpqaDiamondSuite", "gpqa_prompt", "math_prompt"]

MATH_INSTRUCTION = "Please reason step by step, and put your final answer within \\boxed{}."
LETTERS = "ABCD"


def math_prompt(problem: str) -> str:
    """The user turn for a math problem (the common Qwen/DeepSeek math prompt)."""
    return f"{problem.strip()}\n\n{MATH_INSTRUCTION}"


def gpqa_prompt(question: str, options: list[str]) -> str:
    """The user turn for a four-option question: options lettered A-D, answer on a last ``Answer: X`` line."""
    lines = "\n".join(f"{letter}) {option.strip()}" for letter, option in zip(LETTERS, options))
    return (
        "Answer the following multiple-choice question. Think step by step, then give your answer on the last "
        f"line in the form 'Answer: X', where X is one of {', '.join(LETTERS)}.\n\n{question.strip()}\n\n{lines}"
    )


class AimeSuite(Suite):
    """AIME 2025 or 2026: 30 problems with integer answers, mean accuracy over 64 samples per problem."""

    metric = "mean@64"
    default_sampling = Sampling(n_samples=64, temperature=1.0, top_p=0.95, max_tokens=32768)

    def __init__(self, year: int) -> None:
        super().__init__()
        self.year = year
        self.name = f"aime{year % 100}"
        self.where = (
            f"the Hugging Face dataset MathArena/aime_{year} (columns problem, answer), or any copy with "
            "problem/question and answer columns; AIME problems are (c) MAA, so keep them out of the repository"
        )

    def load(self, data_dir: Path | None) -> list[Item]:
        path = find_data_file(data_dir, self.name, self.name, self.where)
        self.data_files = [path]
        items = []
        for i, row in enumerate(read_rows(path)):
            problem = str(pick(row, ("problem", "question", "Problem", "Question"), path, i))
            answer = str(pick(row, ("answer", "Answer", "expected_answer"), path, i)).strip()
            ident = str(row.get("id") or row.get("problem_idx") or row.get("ID") or i)
            items.append(Item(f"{self.name}-{ident}", math_prompt(problem), answer))
        return items

    def run_sample(self, client: ChatClient, item: Item, sample: int, sampling: Sampling) -> SampleRecord:
        text = client.complete(
            [{"role": "user", "content": item.prompt}],
            temperature=sampling.temperature, top_p=sampling.top_p, max_tokens=sampling.max_tokens,
        ).text  # fmt: skip
        verdict = math_check(text, item.answer)
        detail = {"scorer_timeout": 1} if verdict.timed_out else {}
        return self.record(item, sample, float(verdict.correct), verdict.pred, text, **detail)


class GpqaDiamondSuite(Suite):
    """GPQA-Diamond: 198 four-option questions, avg@8; option order shuffled per sample with a fixed seed."""

    name = "gpqa_diamond"
    metric = "avg@8"
    default_sampling = Sampling(n_samples=8, temperature=0.7, top_p=0.95, max_tokens=32768)
    where = (
        "gpqa_diamond.csv inside dataset.zip of the gated Hugging Face dataset Idavidrein/gpqa (or the GPQA GitHub "
        "release); columns Question, Correct Answer, Incorrect Answer 1-3. Its authors ask that it not be reposted"
    )

    def __init__(self, seed: int = 0) -> None:
        super().__init__()
        self.seed = seed

    def load(self, data_dir: Path | None) -> list[Item]:
        path = find_data_file(data_dir, self.name, self.name, self.where)
        self.data_files = [path]
        items = []
        for i, row in enumerate(read_rows(path)):
            question = str(pick(row, ("Question", "question"), path, i))
            correct = str(pick(row, ("Correct Answer", "correct_answer"), path, i))
            wrong = [str(pick(row, (f"Incorrect Answer {k}", f"incorrect_answer_{k}"), path, i)) for k in (1, 2, 3)]
            ident = str(row.get("Record ID") or row.get("id") or i)
            items.append(Item(f"gpqa-{ident}", question, correct, {"options": [correct, *wrong]}))
        return items

    def shuffled(self, item: Item, sample: int) -> tuple[list[str], str]:
        """The options of ``item`` in sample ``sample``'s order, and the correct letter (same on every rerun)."""
        options = list(item.meta["options"])
        random.Random(f"{self.seed}:{item.id}:{sample}").shuffle(options)
        return options, LETTERS[options.index(item.answer)]

    def run_sample(self, client: ChatClient, item: Item, sample: int, sampling: Sampling) -> SampleRecord:
        options, gold = self.shuffled(item, sample)
        text = client.complete(
            [{"role": "user", "content": gpqa_prompt(item.prompt, options)}],
            temperature=sampling.temperature, top_p=sampling.top_p, max_tokens=sampling.max_tokens,
        ).text  # fmt: skip
        pred = choice_letter(text, LETTERS)
        return self.record(item, sample, float(pred == gold), pred, text, gold=gold)
