"""The run record's size bound for a paper launcher's run (``spade.record``; docs/run_record.md).

Writes one entry of each kind with every text at its cap (the worst case the caps allow: long sources, hints and
transcripts whose turns are all full) through the real writer, then multiplies by what the launcher's schedule
makes: designs per regeneration x regenerations, training episodes and score rows per step. Prints bytes per
entry and the run's total; ``--record RUN_DIR`` also prints the mean sizes of a real run's record for comparison.

    .venv/bin/python benchmarks/bench_run_record.py [--steps 400 --regen-every 4 --designs 24 --n 8 --batch 192]
"""

from __future__ import annotations

import argparse
import json
import tempfile
from collections import defaultdict
from pathlib import Path

from spade_envs.browse.run_record import RECORD_FILE, RecordCaps, RunRecord


def worst_entries(caps: RecordCaps, plays: int, agent_rows: int, n: int) -> dict[str, dict]:
    """One entry of each kind with every text longer than its cap (unicode-free: one byte a character)."""
    long = "x" * 100_000
    turns = [{"role": r, "text": long} for r in ("prompt", "agent", "env") * 20]
    play = {"seed": 123456789, "outcome": 0.0, "fault": None, "agent_turns": 25, "terminated": False, "turns": turns}
    design = {"kind": "design", "step": 396, "design": 23, "skill": "mathematical_reasoning", "doc_id": "d" * 16,
              "doc_head": long, "verdict": "admitted", "code": None, "reason": "", "excluded": False, "source": long,
              "source_kind": "admitted", "hint_text": long, "hint": long, "hint_failure": None, "hint_reason": "",
              "seeds": [1_000_000_000 + i for i in range(plays)],
              "arms": {arm: [0.0] * plays for arm in ("no_hint", "hint", "placebo")}, "win_rate": 0.5,
              "regret": 0.25, "raw_regret": 0.25,
              "transcripts": {arm: [play] * plays for arm in ("no_hint", "hint", "placebo")}}  # fmt: skip
    episode = {"kind": "episode", "step": 399, "slot": 1, "env_id": "games-logic-" + "a" * 12, "skill": "logic",
               "seed": 123456789, "outcome": 0.0, "fault": None, "transcript": play}  # fmt: skip
    row = {"env_id": "games-mathematical_reasoning-" + "a" * 12, "seed": 123456789, "session": "7",
           "reward": -0.123456789, "advantage": 1.23456789, "excluded": False}  # fmt: skip
    scores = {
        "kind": "scores",
        "step": 396,
        "agent": [row] * (agent_rows * n),
        "designer": [{"design": 23, "reward": -0.123456789, "advantage": 1.23456789, "excluded": False}] * 24,
    }
    return {"design": design, "episode": episode, "scores": scores}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=400)
    parser.add_argument("--regen-every", type=int, default=4)
    parser.add_argument("--designs", type=int, default=24, help="designs per regeneration")
    parser.add_argument("--n", type=int, default=8, help="rollout.n")
    parser.add_argument("--batch", type=int, default=192, help="samples per step")
    parser.add_argument("--plays-per-arm", type=int, default=8)
    parser.add_argument("--record", help="a run directory whose record to measure too")
    args = parser.parse_args()
    caps = RecordCaps()
    entries = worst_entries(caps, args.plays_per_arm, (args.batch - args.designs) // args.n, args.n)
    with tempfile.TemporaryDirectory() as tmp:
        record = RunRecord(tmp, caps)
        sizes = {}
        for kind, entry in entries.items():
            before = record.size
            record.write(entry)
            sizes[kind] = record.size - before
    regens = -(-args.steps // args.regen_every)
    counts = {"design": regens * args.designs, "episode": args.steps * caps.episodes_per_step, "scores": args.steps}
    total = sum(sizes[k] * counts[k] for k in sizes)
    print(f"caps: {caps}")
    for kind in sizes:
        mb = sizes[kind] * counts[kind] / 1e6
        print(f"{kind:8s} {sizes[kind]:>9,d} bytes at most x {counts[kind]:>5d} = {mb:7.1f} MB")
    print(f"total    at most {total / 1e6:.1f} MB for {args.steps} steps ({counts['design']} designs); "
          f"max_mb={caps.max_mb:g} stops texts beyond that")  # fmt: skip
    if args.record:
        seen: dict[str, list[int]] = defaultdict(list)
        for line in (Path(args.record) / RECORD_FILE).read_bytes().splitlines(keepends=True):
            seen[json.loads(line)["kind"]].append(len(line))
        for kind, lengths in sorted(seen.items()):
            print(f"{args.record}: {kind:8s} {len(lengths):4d} entries, mean {sum(lengths) / len(lengths):,.0f} bytes")


if __name__ == "__main__":
    main()
