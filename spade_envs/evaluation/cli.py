"""``spade-eval``: score an OpenAI-compatible endpoint on SPADE's held-out benchmarks.

Example (a vLLM server on a checkpoint)::

    spade-eval --base-url http://localhost:8000/v1 --model ckpt --suite games --data-dir data/ --out runs/eval

Every suite appends scored samples to ``<out>/<suite>.jsonl``; rerunning the same command resumes. The table is
printed and written to ``<out>/results.md`` and ``<out>/results.json``. Exit status: 0 when every selected suite
ran completely, 1 when a suite could not run or some samples failed (rerun to retry them), 2 on bad arguments.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

from spade_envs.errors import SpadeEnvError
from spade_envs.evaluation.registry import SUITES, make_suite, resolve_suites
from spade_envs.evaluation.report import write_reports
from spade_envs.evaluation.runner import SuiteRun, run_suite
from spade_envs.llm import ChatClient

__all__ = ["entrypoint", "main", "parser"]


def parser() -> argparse.ArgumentParser:
    """The argument parser (exposed so the docs test can check every documented flag exists)."""
    p = argparse.ArgumentParser(prog="spade-eval", description=__doc__.split("\n")[0])
    p.add_argument("--base-url", required=True, help="OpenAI-compatible endpoint, usually ending in /v1")
    p.add_argument("--model", required=True, help="model name the server serves")
    p.add_argument("--suite", default="all", help=f"games, tool_use, all, or comma-separated: {', '.join(SUITES)}")
    p.add_argument("--out", required=True, type=Path, help="results directory (resumed if it exists)")
    p.add_argument("--data-dir", type=Path, default=None, help="user-provided benchmark files (AIME, GPQA, LCB)")
    p.add_argument("--concurrency", type=int, default=16, help="samples in flight at once")
    p.add_argument("--limit", type=int, default=None, help="only the first N items of each suite (smoke runs)")
    p.add_argument("--samples", type=int, default=None, help="override every suite's samples per item")
    p.add_argument("--temperature", type=float, default=None, help="override every suite's temperature")
    p.add_argument("--top-p", type=float, default=None, help="override every suite's top-p")
    p.add_argument("--max-tokens", type=int, default=None, help="override every suite's completion cap")
    p.add_argument("--timeout", type=float, default=1800.0, help="seconds per model call")
    p.add_argument("--retries", type=int, default=3, help="retries per model call on connection errors/429/5xx")
    p.add_argument("--quiet", action="store_true", help="no progress line")
    return p


def main(argv: Sequence[str] | None = None) -> int:
    """Run the selected suites and print the table; see the module docstring for the exit status."""
    args = parser().parse_args(argv)
    try:
        names = resolve_suites(args.suite)
        client = ChatClient(args.base_url, args.model, api_key=os.environ.get("OPENAI_API_KEY"),
                            timeout_s=args.timeout, max_retries=args.retries)  # fmt: skip
        if args.concurrency < 1 or (args.limit is not None and args.limit < 1):
            raise ValueError("--concurrency and --limit must be >= 1")
    except ValueError as exc:
        print(f"spade-eval: {exc}", file=sys.stderr)
        return 2
    overrides = {"n_samples": args.samples, "temperature": args.temperature, "top_p": args.top_p,
                 "max_tokens": args.max_tokens}  # fmt: skip
    overrides = {k: v for k, v in overrides.items() if v is not None}
    args.out.mkdir(parents=True, exist_ok=True)
    runs: list[SuiteRun] = []
    errors: dict[str, str] = {}
    for name in names:
        suite = make_suite(name)
        try:
            sampling = replace(suite.default_sampling, **overrides)
            runs.append(run_suite(suite, client, args.out, data_dir=args.data_dir, sampling=sampling,
                                  concurrency=args.concurrency, limit=args.limit,
                                  progress=None if args.quiet else sys.stderr))  # fmt: skip
        except (SpadeEnvError, ValueError) as exc:
            errors[name] = str(exc)
            print(f"spade-eval: {name}: {exc}", file=sys.stderr)
    settings = {"base_url": args.base_url, "model": args.model, "suite": args.suite, "limit": args.limit,
                "data_dir": str(args.data_dir) if args.data_dir else None, "overrides": overrides}  # fmt: skip
    print(write_reports(args.out, runs, settings, errors))
    return 0 if not errors and all(run.complete and not run.failures for run in runs) else 1


def entrypoint() -> None:
    """Console-script entry point."""
    sys.exit(main())
