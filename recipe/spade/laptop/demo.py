"""``python -m recipe.spade.laptop.demo`` (``make demo``): the tiny CPU self-play run, told in under 60 console lines.

It runs ``examples/run_spade_tiny_cpu.sh`` (the real launcher: doctor, then verl's V1 trainer), sends the launcher's
whole output to ``RUN_DIR/demo.log`` (``--verbose`` / ``VERBOSE=1`` also streams it live), and prints a short header
(model, backend, designer, sandbox level, preflight), one line per step from ``spade_metrics.jsonl`` as the trainer
writes it, and where the log, the report and the run browser's index page (``spade-envs browse``) are. On a
failure it prints the log's last error lines.

The designer is by default the scripted stand-in (rollout ``hf_scripted``, recipe/spade/cpu/scripted.py): a tiny
random model never writes valid code, so with it envs are admitted, hinted, measured and played. ``--rollout hf``
(``DEMO_ROLLOUT=hf``) makes the tiny model write its own designs (they are all rejected).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import IO

from recipe.spade.report import step_line, write_report
from spade_envs.browse import build_site

__all__ = ["main"]

_ROOT = Path(__file__).resolve().parents[3]
LAUNCHER = _ROOT / "examples" / "run_spade_tiny_cpu.sh"
_DESIGNERS = {
    "hf_scripted": "scripted stand-in (hf_scripted), not the model: a built-in env and broken code in turn "
    "(DEMO_ROLLOUT=hf: the model's own designs)",
    "hf": "the tiny model itself (hf): a random model, so every design is rejected with a failure code",
}
_ERROR = re.compile(r"(Error|Exception|error:|^fail |Traceback)")


class _Log:
    """Copies the launcher's output into the log file (and the console when verbose); remembers doctor's verdict."""

    def __init__(self, stream: IO[str], path: Path, verbose: bool) -> None:
        self.path, self.verbose = path, verbose
        self.doctor: str | None = None
        self.sandbox: str | None = None
        self.fails: list[str] = []
        self.thread = threading.Thread(target=self._copy, args=(stream,), daemon=True)
        self.thread.start()

    def _copy(self, stream: IO[str]) -> None:
        with self.path.open("w", encoding="utf-8") as log:
            for line in stream:
                log.write(line)
                log.flush()
                if self.verbose:
                    sys.stdout.write(line)
                text = line.rstrip("\n")
                if text.startswith("doctor for "):
                    self.doctor = text.split(": ", 1)[1]
                elif text.startswith(("ok   sandbox:", "warn sandbox:", "fail sandbox:")):
                    self.sandbox = text.split(": ", 1)[1].split(";", 1)[0]
                elif text.startswith("fail "):
                    self.fails.append(text)


def _header(args: argparse.Namespace, log: Path, steps: str) -> list[str]:
    return [
        f"SPADE demo: {steps} self-play steps of verl 0.9.1's V1 trainer on CPU (a few minutes)",
        "  model     a tiny random Qwen3 (the agent; it cannot win yet, so win rates and regret stay at 0)",
        "  backend   cpu: FSDP2 over gloo, Hugging Face generation in a Ray actor",
        f"  designer  {_DESIGNERS.get(args.rollout, args.rollout)}",
        f"  log       {log} (VERBOSE=1 shows it live)",
    ]


def _rows_since(path: Path, start: float, seen: int) -> list[dict]:
    if not path.exists():
        return []
    rows = [json.loads(ln) for ln in path.read_text(encoding="utf-8").splitlines() if ln.strip()]
    return [r for r in rows if r.get("time", 0) >= start][seen:]


def _tail_errors(path: Path, limit: int = 12) -> list[str]:
    lines = [ln.rstrip() for ln in path.read_text(encoding="utf-8", errors="replace").splitlines()]
    lines = [ln for ln in lines if ln and not ln.startswith("+")]
    errors = [ln for ln in lines if _ERROR.search(ln)]
    return [ln[:200] for ln in (errors or lines)[-limit:]]


def run(args: argparse.Namespace) -> int:
    """Run the demo; returns the launcher's exit status."""
    run_dir = Path(args.run_dir).resolve()
    run_dir.mkdir(parents=True, exist_ok=True)
    log_path, metrics = run_dir / "demo.log", run_dir / "spade" / "spade_metrics.jsonl"
    steps = os.environ.get("STEPS", "3")
    env = {**os.environ, "RUN_DIR": str(run_dir), "PYTHON": sys.executable}
    command = ["bash", str(LAUNCHER), f"actor_rollout_ref.rollout.name={args.rollout}",
               f"spade_cpu.tiny_model_dir={run_dir / 'tiny-model'}", *args.overrides]  # fmt: skip
    for line in _header(args, log_path, steps):
        print(line, flush=True)
    start = time.time()
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env,
                            cwd=_ROOT, errors="replace")  # fmt: skip
    log = _Log(proc.stdout, log_path, args.verbose)
    said_preflight, seen, last = False, 0, start
    while True:
        done = proc.poll() is not None
        if done:
            log.thread.join()
        if not said_preflight and log.doctor is not None:
            said_preflight = True
            print(f"  sandbox   {log.sandbox or 'unknown'}", flush=True)
            print(f"  preflight {log.doctor.split(' (')[0]} (spade-envs doctor; its lines are in the log)", flush=True)
            if "0 fail" in log.doctor:
                print(step_line({}, header=True), flush=True)
        for row in _rows_since(metrics, start, seen):
            seen += 1
            print(step_line(row, row["time"] - last), flush=True)
            last = row["time"]
        if done:
            break
        time.sleep(0.5)
    elapsed = time.time() - start
    if proc.returncode != 0:
        print(f"failed (exit {proc.returncode}) after {elapsed:.0f} s; the log's last error lines:")
        for line in log.fails or _tail_errors(log_path):
            print(f"  {line}")
        print(f"full log: {log_path}")
        return proc.returncode
    about = [line.strip() for line in _header(args, log_path, steps)[1:4]]
    report = write_report(run_dir / "spade", curriculum=True, about=about)
    index = build_site(run_dir / "spade")  # the run record as a web site (spade-envs browse)
    print(f"done in {elapsed:.0f} s ({seen} steps; the first one includes start-up)")
    print(f"full log: {log_path}")
    print(f"report: {report} (figures report.png, curriculum.png)")
    print(f"browse: {index} (every design, its verdict, hint and transcripts; spade-envs browse {run_dir})")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """Parse ``argv`` (default ``sys.argv[1:]``) and run the demo."""
    parser = argparse.ArgumentParser(prog="python -m recipe.spade.laptop.demo", description=__doc__.splitlines()[0])
    parser.add_argument("--run-dir", default=str(_ROOT / "runs" / "demo"), help="run directory (default runs/demo)")
    parser.add_argument("--rollout", default=os.environ.get("DEMO_ROLLOUT", "hf_scripted"), choices=sorted(_DESIGNERS),
                        help="hf_scripted: scripted designer (default); hf: the model's own designs")  # fmt: skip
    parser.add_argument("--verbose", action="store_true", default=os.environ.get("VERBOSE", "0") == "1",
                        help="also stream the full log (default: $VERBOSE=1)")  # fmt: skip
    parser.add_argument("overrides", nargs="*", help="Hydra overrides passed on to the launcher")
    return run(parser.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
