"""``spade-eval``: score an OpenAI-compatible endpoint on SPADE's held-out benchmarks.

Examples (a running server; or a checkpoint that spade-eval serves with vLLM for the length of the run)::

    spade-eval --base-url http://localhost:8000/v1 --model ckpt --suite games --data-dir data/ --out runs/eval
    spade-eval --serve-checkpoint /ckpt/hf --serve-args "--tensor-parallel-size 8" --suite all --out runs/eval
    spade-eval compare runs/eval/base runs/eval/step400 --out runs/eval/compare.md   # paper-style table + chart

Every suite appends scored samples to ``<out>/<suite>.jsonl``; rerunning the same command resumes. The table is
printed and written to ``<out>/results.md`` and ``<out>/results.json`` at the end of every run: a suite that
cannot run, a sample that fails and Ctrl-C are marked in it, never a traceback without a report. A wrong key, URL or
model name (HTTP 401/403/404/405) stops the run at its first refusal, with a message. Exit status: 0 when every
selected suite ran completely, 1 when a suite could not run, some samples failed (rerun to retry them), the run
stopped on such a refusal or the server did not start, 2 on bad arguments, 130 on Ctrl-C and 143 on SIGTERM (the
report covers the samples stored before it; the ones in flight are abandoned, not counted, and a rerun plays them).
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from spade_envs.envs.errors import SpadeEnvError
from spade_envs.envs.llm import ChatClient
from spade_envs.evaluation.registry import SUITES, SuiteOptions, make_suite, resolve_suites
from spade_envs.evaluation.report import write_reports
from spade_envs.evaluation.runner import SuiteRun, run_suite
from spade_envs.evaluation.serve import ModelServer, ServeConfig, ServeError, sigterm_as_exit

__all__ = ["entrypoint", "main", "parser"]


def parser() -> argparse.ArgumentParser:
    """The argument parser (exposed so the docs test can check every documented flag exists)."""
    p = argparse.ArgumentParser(prog="spade-eval", description=__doc__.split("\n")[0])
    p.add_argument("--base-url", default=None, help="OpenAI-compatible endpoint, usually ending in /v1")
    p.add_argument("--model", default=None, help="model name the server serves (default with --serve-checkpoint: "
                   "the name the server reports)")  # fmt: skip
    p.add_argument("--suite", default="all", help=f"games, tool_use, all, or comma-separated: {', '.join(SUITES)}")
    p.add_argument("--out", required=True, type=Path, help="results directory (resumed if it exists)")
    p.add_argument("--data-dir", type=Path, default=None, help="user-provided benchmark files (AIME, GPQA, LCB)")
    p.add_argument("--acebench-root", type=Path, default=os.environ.get("ACEBENCH_ROOT") or None,
                   help="ACEBench checkout at commit e6db74b (default: $ACEBENCH_ROOT)")  # fmt: skip
    p.add_argument("--user-base-url", default=None, help="endpoint of ACEBench's simulated user (default: the "
                   "model under test; ACEBench uses gpt-4o; recommended: one fixed simulator for every run, or "
                   "compare refuses the runs); its key is read from SPADE_EVAL_USER_API_KEY")  # fmt: skip
    p.add_argument("--user-model", default=None, help="model name of the simulated user")
    p.add_argument("--concurrency", type=int, default=16, help="samples in flight at once")
    p.add_argument("--limit", type=int, default=None, help="only the first N items of each suite (smoke runs)")
    p.add_argument("--samples", type=int, default=None, help="override every suite's samples per item")
    p.add_argument("--temperature", type=float, default=None, help="override every suite's temperature")
    p.add_argument("--top-p", type=float, default=None, help="override every suite's top-p")
    p.add_argument("--max-tokens", type=int, default=None, help="override every suite's completion cap")
    p.add_argument("--timeout", type=float, default=1800.0, help="seconds per model call")
    p.add_argument("--retries", type=int, default=3, help="retries per model call on connection errors/408/429/5xx")
    p.add_argument("--retry-wait-max", type=float, default=60.0, help="most seconds to wait before a retry when "
                   "the server's Retry-After header asks for longer (default 60)")  # fmt: skip
    p.add_argument("--quiet", action="store_true", help="no progress line")
    serve = p.add_argument_group("serving a checkpoint (instead of --base-url)")
    serve.add_argument("--serve-checkpoint", type=Path, default=None, help="start `vllm serve PATH` for the run")
    serve.add_argument("--serve-command", default="vllm serve", help="the launcher (default: vllm serve)")
    serve.add_argument("--serve-args", default="", help='more launcher arguments as one string: '
                       '"--tensor-parallel-size 8", or --serve-args=--enforce-eager')  # fmt: skip
    serve.add_argument("--serve-port", type=int, default=0, help="port to serve on (default: a free one)")
    serve.add_argument("--serve-timeout-s", type=float, default=1800.0, help="seconds to wait for the server")
    return p


def _check(args: argparse.Namespace) -> ServeConfig | None:
    """Raise ``ValueError`` on inconsistent arguments; the server's config when one is to be started."""
    if (args.base_url is None) == (args.serve_checkpoint is None):
        raise ValueError("give exactly one of --base-url and --serve-checkpoint")
    if args.base_url is not None and args.model is None:
        raise ValueError("--model is required with --base-url")
    if args.user_base_url is not None and args.user_model is None:
        raise ValueError("--user-model is required with --user-base-url")
    if args.concurrency < 1 or (args.limit is not None and args.limit < 1):
        raise ValueError("--concurrency and --limit must be >= 1")
    if args.retries < 0 or args.retry_wait_max < 0:
        raise ValueError("--retries and --retry-wait-max must be >= 0")
    for url in (args.base_url, args.user_base_url):
        if url is not None:
            ChatClient(url, "check")  # raises ValueError on a malformed URL
    if args.serve_checkpoint is None:
        return None
    return ServeConfig(args.serve_checkpoint, args.out / "serve.log", args.serve_command, args.serve_args,
                       args.serve_port, args.serve_timeout_s)  # fmt: skip


def main(argv: Sequence[str] | None = None) -> int:
    """Run the selected suites and print the table; see the module docstring for the exit status.

    ``spade-eval compare BASE_DIR RUN_DIR`` compares two results directories instead
    (:mod:`~spade_envs.evaluation.compare_cli`).
    """
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["compare"]:
        from spade_envs.evaluation.compare_cli import main as compare_main

        return compare_main(argv[1:])
    args = parser().parse_args(argv)
    try:
        names = resolve_suites(args.suite)
        serve = _check(args)
    except ValueError as exc:
        print(f"spade-eval: {exc}", file=sys.stderr)
        return 2
    args.out.mkdir(parents=True, exist_ok=True)
    if serve is None:
        with sigterm_as_exit():  # SIGTERM (SLURM, timeout, docker stop) reports like Ctrl-C
            return _evaluate(args, names, args.base_url, args.model)
    try:
        with sigterm_as_exit(), ModelServer(serve, progress=None if args.quiet else sys.stderr) as server:
            return _evaluate(args, names, server.base_url, args.model or server.model,
                             served={"checkpoint": str(serve.checkpoint), "argv": server.argv})  # fmt: skip
    except ServeError as exc:
        print(f"spade-eval: serve: {exc}", file=sys.stderr)
        return 1


def _evaluate(
    args: argparse.Namespace, names: list[str], base_url: str, model: str, served: dict[str, Any] | None = None
) -> int:
    """Score every suite in ``names`` against ``base_url`` and write the reports."""
    client = ChatClient(base_url, model, api_key=os.environ.get("OPENAI_API_KEY"), timeout_s=args.timeout,
                        max_retries=args.retries, max_retry_wait_s=args.retry_wait_max)  # fmt: skip
    user_client = None
    if args.user_base_url or args.user_model:
        user_key = os.environ.get("SPADE_EVAL_USER_API_KEY") or os.environ.get("OPENAI_API_KEY")
        user_client = ChatClient(args.user_base_url or base_url, args.user_model, api_key=user_key,
                                 timeout_s=args.timeout, max_retries=args.retries,
                                 max_retry_wait_s=args.retry_wait_max)  # fmt: skip
    own_user = user_client is None
    if own_user and "acebench_agent" in names:
        print("spade-eval: acebench_agent: the model under test also plays the multi-turn user, so two checkpoints "
              "play against different users and compare refuses them; use one fixed simulator for every run "
              "(--user-base-url/--user-model)", file=sys.stderr)  # fmt: skip
    user_client = user_client or client
    options = SuiteOptions(acebench_root=args.acebench_root, user_client=user_client, user_is_model_under_test=own_user)
    overrides = {"n_samples": args.samples, "temperature": args.temperature, "top_p": args.top_p,
                 "max_tokens": args.max_tokens}  # fmt: skip
    overrides = {k: v for k, v in overrides.items() if v is not None}
    runs: list[SuiteRun] = []
    errors: dict[str, str] = {}
    stopped: BaseException | None = None
    try:
        for i, name in enumerate(names):
            run = _run_one(args, name, options, overrides, client, errors)
            if run is None:
                continue
            runs.append(run)
            if run.stopped:
                errors.update({later: f"the run stopped at {name} (HTTP refusal)" for later in names[i + 1 :]})
                break
            if run.interrupted:
                stopped = KeyboardInterrupt() if run.interrupted == "KeyboardInterrupt" else SystemExit(143)
                break
    except (KeyboardInterrupt, SystemExit) as exc:  # between suites (building or loading one): still report
        stopped = exc
    if stopped is not None:
        print(f"spade-eval: interrupted ({type(stopped).__name__}); the report covers the samples stored before it, "
              "and a rerun plays the rest", file=sys.stderr)  # fmt: skip
    user = {"base_url": user_client.url.removesuffix("/chat/completions"), "model": user_client.model,
            "model_under_test": own_user}  # fmt: skip
    settings = {"base_url": base_url, "model": model, "suite": args.suite, "limit": args.limit,
                "data_dir": str(args.data_dir) if args.data_dir else None, "overrides": overrides,
                "acebench_root": str(args.acebench_root) if args.acebench_root else None, "user_simulator": user,
                "served": served}  # fmt: skip
    print(write_reports(args.out, runs, settings, errors))
    if stopped is not None:
        return stopped.code if isinstance(stopped, SystemExit) and isinstance(stopped.code, int) else 130
    return 0 if not errors and all(run.complete and not run.failures for run in runs) else 1


def _run_one(args: argparse.Namespace, name: str, options: SuiteOptions, overrides: dict[str, Any],
             client: ChatClient, errors: dict[str, str]) -> SuiteRun | None:  # fmt: skip
    """Build and run one suite; ``None`` (and the reason in ``errors``) when it cannot be built or loaded."""
    try:
        suite = make_suite(name, options)
        sampling = replace(suite.default_sampling, **overrides)
    except Exception as exc:  # noqa: BLE001 (a suite that cannot even be built is reported, not raised)
        errors[name] = f"{type(exc).__name__}: {exc}" if not isinstance(exc, SpadeEnvError | ValueError) else str(exc)
        print(f"spade-eval: {name}: {errors[name]}", file=sys.stderr)
        return None
    run = run_suite(suite, client, args.out, data_dir=args.data_dir, sampling=sampling, concurrency=args.concurrency,
                    limit=args.limit, progress=None if args.quiet else sys.stderr)  # fmt: skip
    if run.error is not None:
        errors[name] = run.error
        print(f"spade-eval: {name}: {run.error}", file=sys.stderr)
        return None
    if run.set_aside:
        moved = args.out / "set_aside" / f"{name}.jsonl"
        print(f"spade-eval: {name}: set aside {run.set_aside} sample(s) of an earlier run under another protocol "
              f"(moved to {moved}); they are scored again", file=sys.stderr)  # fmt: skip
    if run.replayed_refusals:
        print(f"spade-eval: {name}: {run.replayed_refusals} sample(s) an earlier version stored as wrong answers for "
              "a refusal (not over the context length) were played again", file=sys.stderr)  # fmt: skip
    if run.stopped:
        print(f"spade-eval: {name}: stopped: {run.stopped}\nspade-eval: every request would be refused the same way: "
              "check --base-url (it usually ends in /v1), --model and OPENAI_API_KEY (for ACEBench's simulated "
              "user: --user-base-url, --user-model and SPADE_EVAL_USER_API_KEY); no later suite is run, and a "
              "rerun plays every sample not scored", file=sys.stderr)  # fmt: skip
    if run.abandoned:
        print(f"spade-eval: {name}: {run.abandoned} sample(s) in flight abandoned, not counted", file=sys.stderr)
    return run


def entrypoint() -> None:
    """Console-script entry point."""
    sys.exit(main())
