"""The sandbox benchmark runs end to end in its smallest configuration (structure only, never timing)."""

import importlib.util
import json
import math
import sys
from pathlib import Path

import pytest

_PATH = Path(__file__).resolve().parents[2] / "benchmarks" / "bench_sandbox.py"


@pytest.fixture(scope="module")
def bench():
    spec = importlib.util.spec_from_file_location("bench_sandbox", _PATH)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up by name
    try:
        spec.loader.exec_module(module)
        yield module
    finally:
        sys.modules.pop(spec.name, None)


def _positive(value):
    return isinstance(value, (int, float)) and math.isfinite(value) and value > 0


def test_smallest_run_is_well_formed(bench):
    settings = bench.Settings(
        levels=("none",), steps=20, warmup=2, step_blocks=2, subprocess_calls=2, cold_starts=2, pooled_starts=2,
        envs=3, throughput_s=0.2, memory_level="none", probe_levels=False, pooled_wait_s=10.0, calibration_rounds=1,
        part_steps=5, episodes=1, episode_steps=2,
    )  # fmt: skip
    report = bench.run(settings)
    rows = report["rows"]
    by_key = {(row["benchmark"], row["level"]): row for row in rows}
    for key in [
        ("step trivial env", "in-process"),
        ("step trivial env", "none"),
        ("step 50us env", "in-process"),
        ("step 50us env", "none"),
        ("step 50us env", "new process/call"),
        ("start", "in-process"),
        ("start cold (start+init)", "none"),
        ("start pooled", "none"),
        ("memory, 3 live envs", "none"),
        ("throughput, 3 envs round-robin", "none"),
        ("step part (trivial env): wake-up + worker + read", "none"),
        ("step part (50us env): accounting + wait policy (call minus the parts)", "none"),
        ("episode part: acquire, cold (start a worker)", "none"),
        ("episode part: close (kill + reap + scratch)", "none"),
    ]:
        assert key in by_key, f"missing row {key}; got {sorted(by_key)}"
    for row in rows:
        if "p50_us" in row:
            assert _positive(row["p50_us"]) and row["p99_us"] >= row["p50_us"] and row["n"] > 0
    assert by_key[("step trivial env", "none")]["n"] == 20
    assert by_key[("step 50us env", "new process/call")]["n"] == 2
    assert _positive(by_key[("step 50us env", "none")]["ratio"])
    assert isinstance(by_key[("step trivial env", "none")]["met"], bool)
    memory = by_key[("memory, 3 live envs", "none")]
    assert memory["n"] == 3 and _positive(memory["pss_total_bytes"]) and _positive(memory["rss_per_env_bytes"])
    assert memory["pss_total_bytes"] <= memory["rss_total_bytes"]
    assert _positive(by_key[("throughput, 3 envs round-robin", "none")]["steps_per_s"])
    assert report["machine"]["nproc"] >= 1 and report["settings"]["maze_hash_work"] >= 0

    table = bench.format_table(report)
    lines = table.splitlines()
    header = next(i for i, line in enumerate(lines) if line.startswith("benchmark"))
    assert set(lines[header + 1]) <= {"-", " "} and len(lines) - header - 2 == len(rows)
    json.dumps(report)  # the --json output is plain data


def test_cli_quick_flags_parse(bench, monkeypatch, tmp_path):
    seen = {}
    monkeypatch.setattr(
        bench, "run", lambda settings, log: seen.setdefault("s", settings) and {"machine": {}, "rows": []}
    )
    out = tmp_path / "r.json"
    assert bench.main(["--quick", "--levels", "landlock", "--envs", "5", "--json", str(out)]) == 0
    settings = seen["s"]
    assert settings.levels == ("landlock",) and settings.steps == 500 and settings.envs == 5
    assert json.loads(out.read_text())["rows"] == []
