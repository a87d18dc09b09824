"""``spade-envs``: inspect and play the built-in environments from the shell.

``main(argv)`` takes its arguments as a list and returns the exit status, so tests call it directly.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from spade_envs.builtin import BUILTINS, builtin, builtin_source, load_builtin
from spade_envs.cli.table import format_table
from spade_envs.cli.terminal import SafeStream
from spade_envs.design.seed_secret import parse_secret
from spade_envs.envs.episode import do_nothing_policy, play, solution_policy
from spade_envs.envs.errors import SpadeEnvError

__all__ = ["entrypoint", "main"]


def _cmd_list(_args: argparse.Namespace) -> int:
    rows = [(e.name, e.setting, e.skill, e.domain or "-", str(load_builtin(e.name).max_turns)) for e in BUILTINS]
    print(format_table(("env", "setting", "skill", "domain", "max_turns"), rows))
    return 0


def _cmd_demo(args: argparse.Namespace) -> int:
    """Play every built-in with its reference solution and with a do-nothing agent; print one row per env."""
    rows, failures = [], 0
    start = time.perf_counter()
    for entry in BUILTINS:
        try:
            env = load_builtin(entry.name)()
            turns, solved, idle = [], [], []
            for seed in args.seeds:
                env.reset(seed)
                won = play(env, solution_policy(env.solution(), entry.setting), seed)
                turns.append(won.turns)
                solved.append(won.outcome)
                idle.append(play(env, do_nothing_policy(entry.setting), seed).outcome)
            span = f"{min(turns)}-{max(turns)}" if min(turns) != max(turns) else str(turns[0])
            ok = min(solved) == 1.0 and max(idle) < 1.0
            failures += not ok
            rows.append(
                (entry.name, entry.setting, entry.skill, span, f"{statistics.mean(solved):.2f}",
                 f"{statistics.mean(idle):.2f}", "ok" if ok else "FAIL")
            )  # fmt: skip
        except Exception as exc:  # one broken env must not hide the others
            failures += 1
            rows.append((entry.name, entry.setting, entry.skill, "-", "-", "-", f"ERROR {type(exc).__name__}: {exc}"))
        print(f"[{len(rows)}/{len(BUILTINS)}] {entry.name}", file=sys.stderr, flush=True)
    header = ("env", "setting", "skill", "turns", "solution reward", "do-nothing reward", "check")
    print(format_table(header, rows))
    seeds = ", ".join(map(str, args.seeds))
    print(f"\n{len(BUILTINS)} envs x seeds [{seeds}] in {time.perf_counter() - start:.2f} s; {failures} failing")
    return 1 if failures else 0


def _cmd_show(args: argparse.Namespace) -> int:
    """Print the transcript of the reference solution of one episode."""
    entry = builtin(args.name)
    env = load_builtin(entry.name)()
    env.reset(args.seed)
    result = play(env, solution_policy(env.solution(), entry.setting), args.seed)
    print(f"=== {entry.name} ({entry.setting}/{entry.skill}) seed {args.seed} ===\n{result.observations[0]}")
    for turn, (action, obs, reward) in enumerate(zip(result.actions, result.observations[1:], result.rewards), 1):
        print(f"\n--- turn {turn}: action ---\n{action}\n--- observation (reward {reward:g}) ---\n{obs}")
    print(f"\noutcome {result.outcome:g} ({'won' if result.won else 'not won'}) in {result.turns} turns")
    return 0


def _read_env_source(ref: str) -> str:
    """``ref`` is a path to an env source file or the name of a built-in; return its source."""
    path = Path(ref)
    if path.is_file():
        return path.read_text(encoding="utf-8")
    if any(e.name == ref for e in BUILTINS):
        return builtin_source(ref)
    raise FileNotFoundError(
        f"{ref!r} is neither a file nor a built-in environment ({', '.join(e.name for e in BUILTINS)})"
    )


def _pool(args: argparse.Namespace):  # noqa: ANN202  (imported lazily: the sandbox starts processes)
    from spade_envs.sandbox import SandboxConfig, WorkerPool

    return WorkerPool(SandboxConfig(isolation=args.isolation, pool_size=1))


def _cmd_validate(args: argparse.Namespace) -> int:
    """Validate an env source file in the sandbox: exit 0 if admissible, 1 if rejected."""
    from spade_envs.design.validate import ValidationConfig, validate_source

    source = _read_env_source(args.path)
    config = ValidationConfig(max_turns=args.max_turns, seed=args.seed, budget_s=args.budget_s,
                              secret=args.seed_secret)  # fmt: skip
    with _pool(args) as pool:
        report = validate_source(source, pool, config, setting=args.setting, key=args.key)
    if args.json:
        print(json.dumps(report.to_dict(), indent=2))
    elif report.ok:
        turns = ", ".join(map(str, report.solution_turns))
        clamped = f" (declared {report.declared_max_turns})" if report.declared_max_turns != report.max_turns else ""
        print(f"admissible: {report.class_name} ({report.setting}, max_turns {report.max_turns}{clamped}; "
              f"solution turns {turns}; seeds {report.seeds} + probes {report.probe_seeds}; "
              f"{report.duration_s:.2f} s, isolation {pool.level})")  # fmt: skip
    else:
        print(f"rejected: {report.code}: {report.reason}")
    return 0 if report.ok else 1


def _cmd_play(args: argparse.Namespace) -> int:
    """Play an environment as a person: type one turn per line (games: the command; tool use: raw text)."""
    from spade_envs.envs.contract import extract_command, is_win, outcome_reward
    from spade_envs.sandbox import RemoteEnv

    source = _read_env_source(args.path)
    with _pool(args) as pool:
        env = RemoteEnv(source, pool)
        try:
            obs, _ = env.reset(args.seed)
            print(f"{env.class_name} ({env.setting}), seed {args.seed}, up to {env.max_turns} turns. Ctrl-D quits.\n")
            print(obs)
            reward, terminated, truncated = 0.0, False, False
            for turn in range(1, env.max_turns + 1):
                try:
                    text = input(f"\n[turn {turn}] > ")
                except EOFError:
                    print()
                    return 0
                action = extract_command(text) if env.setting == "games" else text
                obs, reward, terminated, truncated, _ = env.step(action)
                print(f"{obs}\n(reward {reward:g})")
                if terminated or truncated:
                    break
            outcome = outcome_reward(reward, terminated, truncated or not terminated)
            print(f"\noutcome {outcome:g}: {'won' if is_win(outcome) else 'not won'}")
        finally:
            env.close()
    return 0


def _client(args: argparse.Namespace):  # noqa: ANN202
    import os

    from spade_envs.envs.llm import ChatClient

    return ChatClient(args.base_url, args.model, api_key=os.environ.get("OPENAI_API_KEY"))


def _cmd_run(args: argparse.Namespace) -> int:
    """Let a model behind an OpenAI-compatible endpoint play an environment; print each episode's outcome."""
    from spade_envs.envs.episode import play
    from spade_envs.play.agent_play import Sampling, model_policy
    from spade_envs.sandbox import RemoteEnv

    source = _read_env_source(args.path)
    hint = Path(args.hint_file).read_text(encoding="utf-8").strip() if args.hint_file else args.hint
    client = _client(args)
    sampling = Sampling(temperature=args.temperature, max_tokens=args.max_tokens)
    outcomes = []
    with _pool(args) as pool:
        env = RemoteEnv(source, pool)
        try:
            env.reset(args.seed)
            tools = env.tools() if env.setting == "tool_use" else None
            for episode in range(args.episodes):
                seed = args.seed + episode
                policy = model_policy(client, env.setting, tools=tools, hint=hint, sampling=sampling)
                result = play(env, policy, seed, setting=env.setting)
                outcomes.append(result.outcome)
                status = "won" if result.won else "truncated" if result.truncated else "lost"
                print(f"episode {episode} seed {seed}: outcome {result.outcome:g} ({status}) in {result.turns} turns")
        finally:
            env.close()
    wins = sum(o >= 1.0 for o in outcomes)
    print(f"{env.class_name}: {wins}/{len(outcomes)} won, mean outcome {statistics.mean(outcomes):.3f}"
          f"{' (with hint)' if hint else ''}")  # fmt: skip
    return 0


def _cmd_generate(args: argparse.Namespace) -> int:
    """The designer pipeline end to end with an external model; writes an env pool directory and a memory file."""
    from spade_envs.design.corpus import Corpus
    from spade_envs.design.designer import GenerateConfig, generate
    from spade_envs.design.memory import EnvMemory

    corpus = Corpus.load(args.corpus) if args.corpus else None
    config = GenerateConfig(setting=args.setting, n_envs=args.n, max_attempts=args.max_attempts,
                            plays_per_arm=args.plays, seed=args.seed, max_turns=args.max_turns,
                            multi_turn=args.multi_turn, placebo=not args.no_placebo,
                            secret=args.seed_secret)  # fmt: skip
    memory = EnvMemory.load(args.memory) if args.memory else None
    with _pool(args) as pool:
        outcomes = generate(_client(args), corpus, pool, config, args.out, memory=memory)
    valid = [o for o in outcomes if o.valid]
    rows = [(o.env_id or "-", o.skill, f"{o.win_rate:.2f}" if o.measured else "-",
             f"{o.regret:.2f}" if o.measured else "-", o.hint_failure or "ok", f"{o.designer_reward:+.2f}")
            for o in valid]  # fmt: skip
    if rows:
        print(format_table(("env", "skill", "win rate", "regret", "hint", "designer reward"), rows))
    print(f"\n{len(valid)}/{config.n_envs} envs admitted from {len(outcomes)} designer samples; "
          f"pool written to {args.out} (envs/, manifest.jsonl, memory.jsonl)")  # fmt: skip
    return 0 if len(valid) == config.n_envs else 1


def _cmd_memory(args: argparse.Namespace) -> int:
    """Summarise or list an environment memory file."""
    from spade_envs.design.memory import EnvMemory

    memory = EnvMemory.load(args.path)
    if args.action == "stats":
        print(json.dumps(memory.stats(), indent=2))
        return 0
    rows = [(r.env_id, r.setting, r.skill, r.status, f"{r.win_rate:.2f}", f"{r.regret:+.2f}", str(r.plays),
             str(r.last_played_step)) for r in memory]  # fmt: skip
    print(format_table(("env", "setting", "skill", "status", "win rate", "regret", "plays", "last step"), rows))
    return 0


def _cmd_import_pool(args: argparse.Namespace) -> int:
    """Validate a folder of reference-format games under the compatibility mode; write a pool; print a table."""
    from spade_envs.design.import_pool import IMPORT_CODES, import_pool
    from spade_envs.design.validate import ValidationConfig
    from spade_envs.envs.failures import FAILURE_CODES
    from spade_envs.sandbox import SandboxConfig, WorkerPool

    if args.jobs < 1 or args.timeout_s <= 0:
        raise SpadeEnvError(f"--jobs must be >= 1 and --timeout-s > 0, got {args.jobs} and {args.timeout_s}")
    config = ValidationConfig(n_seeds=args.seeds, max_turns=args.max_turns, seed=args.seed, budget_s=args.budget_s,
                              secret=args.seed_secret)  # fmt: skip
    sandbox = SandboxConfig(isolation=args.isolation, pool_size=args.jobs, soft_timeout_s=args.timeout_s,
                            call_timeout_s=2 * args.timeout_s + 1)  # fmt: skip
    with WorkerPool(sandbox) as pool:
        result = import_pool(args.dir, args.out, pool, scoring=args.scoring, config=config, jobs=args.jobs)
    describe = {**FAILURE_CODES, **IMPORT_CODES}
    rows = [("imported", str(result.imported), "admitted, written to envs/")]
    rows += [(code, str(n), describe.get(code, "")) for code, n in result.rejected_by_code().items()]
    print(format_table(("result", "games", "meaning"), rows))
    print(f"\n{result.imported}/{len(result.games)} games imported into {args.out} (scoring {args.scoring}, "
          f"isolation {pool.level})")  # fmt: skip
    return 0 if result.imported else 1


def main(argv: Sequence[str] | None = None) -> int:
    """Run the CLI on ``argv`` (default ``sys.argv[1:]``) and return the exit status."""
    parser = argparse.ArgumentParser(prog="spade-envs", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("list", help="list the built-in environments").set_defaults(fn=_cmd_list)
    demo = sub.add_parser("demo", help="solution vs do-nothing table for every built-in")
    demo.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2, 3, 4], help="episode seeds (default 0-4)")
    demo.set_defaults(fn=_cmd_demo)
    show = sub.add_parser("show", help="print the reference solution's transcript for one episode")
    show.add_argument("name", help="built-in class name, e.g. VaultCodeEnv")
    show.add_argument("--seed", type=int, default=0)
    show.set_defaults(fn=_cmd_show)
    validate = sub.add_parser("validate", help="validate an env source file in the sandbox (exit 0 ok, 1 rejected)")
    validate.add_argument("path", help="env source file (or a built-in name)")
    validate.add_argument("--setting", choices=["games", "tool_use"], help="the setting the env must be")
    validate.add_argument("--json", action="store_true", help="print the full report as JSON")
    validate.add_argument("--seed", type=int, default=0, help="run seed the validation seeds are drawn from")
    validate.add_argument("--key", default="", help="per-validation key the seeds are drawn with (default empty)")
    validate.add_argument("--budget-s", type=float, default=120.0, help="wall-clock budget of the validation")
    validate.add_argument("--max-turns", type=int, default=25, help="training turn cap: the solution must fit it")
    validate.set_defaults(fn=_cmd_validate)
    play_cmd = sub.add_parser("play", help="play an env in the terminal")
    play_cmd.add_argument("path", help="env source file (or a built-in name)")
    play_cmd.add_argument("--seed", type=int, default=0)
    play_cmd.set_defaults(fn=_cmd_play)
    run = sub.add_parser("run", help="let a model behind an OpenAI-compatible endpoint play an env")
    run.add_argument("path", help="env source file (or a built-in name)")
    run.add_argument("--base-url", required=True, help="endpoint base URL, e.g. http://127.0.0.1:8000/v1")
    run.add_argument("--model", required=True, help="model name the endpoint serves")
    group = run.add_mutually_exclusive_group()
    group.add_argument("--hint", help="privileged hint appended to the first observation")
    group.add_argument("--hint-file", help="file holding the hint")
    run.add_argument("--episodes", type=int, default=4)
    run.add_argument("--seed", type=int, default=0, help="seed of the first episode (then seed+1, ...)")
    run.add_argument("--temperature", type=float, default=0.6)
    run.add_argument("--max-tokens", type=int, default=4096)
    run.set_defaults(fn=_cmd_run)
    gen = sub.add_parser("generate", help="design, validate, hint and measure envs with an external model")
    gen.add_argument("--base-url", required=True, help="endpoint base URL, e.g. http://127.0.0.1:8000/v1")
    gen.add_argument("--model", required=True, help="model name the endpoint serves")
    gen.add_argument("--corpus", help="JSONL/Parquet/saved-dataset corpus (required for games)")
    gen.add_argument("--setting", choices=["games", "tool_use"], default="games")
    gen.add_argument("--n", type=int, default=4, help="admitted environments wanted")
    gen.add_argument("--out", required=True, help="output directory of the env pool")
    gen.add_argument("--plays", type=int, default=4, help="plays per arm (no hint / hint / placebo), on paired seeds")
    gen.add_argument("--no-placebo", action="store_true",
                     help="the paper's two arms: no placebo-hint arm, regret against no-hint only")  # fmt: skip
    gen.add_argument("--max-attempts", type=int, default=5, help="designer attempts per environment")
    gen.add_argument("--seed", type=int, default=0)
    gen.add_argument("--multi-turn", action="store_true", help="tool use: 3-5 instructions revealed one at a time")
    gen.add_argument("--memory", help="an existing memory file to draw exemplars from and extend")
    gen.add_argument("--max-turns", type=int, default=25, help="training turn cap: solutions must fit it (default 25)")
    gen.set_defaults(fn=_cmd_generate)
    mem = sub.add_parser("memory", help="inspect an environment memory file")
    mem.add_argument("action", choices=["show", "stats"])
    mem.add_argument("path")
    mem.set_defaults(fn=_cmd_memory)
    imp = sub.add_parser("import-pool", help="validate reference-format game_*.py files; write a fixed-env pool")
    imp.add_argument("dir", help="folder of game_*.py (and an optional manifest.jsonl with skills)")
    imp.add_argument("--out", required=True, help="output pool folder (envs/ + manifest.jsonl) for fixed_env.pool_dir")
    imp.add_argument(
        "--scoring",
        choices=["total", "final"],
        default="total",
        help="total: a win when the step rewards sum to 1 (default); final: the reference scorer's rule",
    )
    imp.add_argument("--max-turns", type=int, default=25, help="training turn cap (default 25)")
    imp.add_argument("--seed", type=int, default=0, help="run seed the validation seeds are drawn from")
    imp.add_argument("--seeds", type=int, default=3, help="solution seeds per game (default 3)")
    imp.add_argument("--timeout-s", type=float, default=5.0, help="per-call time limit in the sandbox (default 5)")
    imp.add_argument("--budget-s", type=float, default=120.0, help="wall-clock budget of one game's validation")
    imp.add_argument("--jobs", type=int, default=1, help="games validated at once (default 1)")
    imp.add_argument("--isolation", default="auto", help="sandbox level: auto, bwrap, landlock, rlimits, none")
    imp.set_defaults(fn=_cmd_import_pool)
    for command in (validate, play_cmd, run, gen):
        command.add_argument("--isolation", default="auto", help="sandbox level: auto, bwrap, landlock, rlimits, none")
    for command in (validate, gen, imp):
        command.add_argument("--seed-secret", type=_secret_arg, metavar="HEX",
                             help="pin the secret that keys the seeds with --seed (32+ hex digits; default: a fresh "
                                  "one, so env code cannot recompute its seeds and reruns draw others)")  # fmt: skip
    from spade_envs.simulate.cli import add_arguments as _simulate_arguments
    from spade_envs.simulate.cli import run_args as _run_simulate

    sim = sub.add_parser("simulate", help="simulate the self-play curriculum with stand-ins for the model (CPU)")
    _simulate_arguments(sim)
    sim.set_defaults(fn=_run_simulate)
    from spade_envs.browse.site import add_arguments as _browse_arguments
    from spade_envs.browse.site import run_args as _run_browse

    browse = sub.add_parser("browse", help="a static web site of a run's record: designs, verdicts, transcripts")
    _browse_arguments(browse)
    browse.set_defaults(fn=_run_browse)
    from spade_envs.cli.doctor import add_arguments as _doctor_arguments
    from spade_envs.cli.doctor import run_args as _run_doctor

    doc = sub.add_parser("doctor", help="preflight of this machine or a launcher: one ok/warn/fail line per check")
    _doctor_arguments(doc)
    doc.set_defaults(fn=_run_doctor)
    args = parser.parse_args(argv)
    streams = sys.stdout, sys.stderr
    sys.stdout, sys.stderr = SafeStream(sys.stdout), SafeStream(sys.stderr)  # env text never drives the terminal
    try:
        return args.fn(args)
    except (KeyError, FileNotFoundError, SpadeEnvError) as exc:
        print(f"spade-envs: {exc.args[0] if isinstance(exc, KeyError) else exc}", file=sys.stderr)
        return 2
    finally:
        sys.stdout, sys.stderr = streams


def _secret_arg(value: str) -> bytes | None:
    """``--seed-secret``: a hex string, as ``spade.seed_secret`` takes it."""
    try:
        return parse_secret(value, "--seed-secret")
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def entrypoint() -> None:
    """Console-script entry point."""
    sys.exit(main())
