"""Held-out evaluation: SPADE's benchmarks against any OpenAI-compatible endpoint (see ``docs/evaluation.md``)."""

from spade_envs.evaluation.records import Item, SampleRecord, Sampling
from spade_envs.evaluation.registry import GROUPS, SUITES, make_suite, resolve_suites
from spade_envs.evaluation.runner import ResultStore, SuiteRun, run_suite
from spade_envs.evaluation.suite import MissingDependency, MissingEvalData, Suite

__all__ = [
    "GROUPS",
    "SUITES",
    "Item",
    "MissingDependency",
    "MissingEvalData",
    "ResultStore",
    "SampleRecord",
    "Sampling",
    "Suite",
    "SuiteRun",
    "make_suite",
    "resolve_suites",
    "run_suite",
]
