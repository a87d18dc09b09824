"""Reward of the CPU smoke run: a dense, learnable signal for a tiny random model.

The score is the fraction of response characters that are ASCII letters or digits: two random responses almost
never tie, so even a random policy gets varied rewards within a GRPO group and the update has something to follow.
"""

from __future__ import annotations

from typing import Any


def compute_score(data_source: str, solution_str: str, ground_truth: Any, extra_info: Any = None) -> float:
    """Fraction of ASCII letters and digits in ``solution_str`` (0 for an empty response)."""
    text = solution_str.strip()
    return sum(c.isascii() and c.isalnum() for c in text) / len(text) if text else 0.0
