"""The first ten minutes: ``make demo``'s console (through the real tiny CPU launcher), its report, and
``main_spade`` stopping on a bad ``spade:`` block before Ray starts."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from recipe.spade.cpu.scripted import MARKUP
from recipe.spade.report import step_line, write_report
from spade_envs.browse.load import design_id, load_run
from spade_envs.browse.run_record import read_record

ROOT = Path(__file__).resolve().parents[3]
STEP_LINE = re.compile(r"^\d+\s{2,}")


def test_the_demo_tells_the_run_in_under_60_lines_with_one_line_per_step(tmp_path):
    env = {**os.environ, "STEPS": "2"}  # a design step and a play step: the demo's three steps, one fewer
    run = subprocess.run([sys.executable, "-m", "recipe.spade.laptop.demo", "--run-dir", str(tmp_path)],
    capture_output=True,
                         text=True, timeout=1200, cwd=ROOT, env=env)  # fmt: skip
    lines = run.stdout.splitlines()
    assert run.returncode == 0, run.stdout + run.stderr + (tmp_path / "demo.log").read_text()[-3000:]
    assert len(lines) <= 60 and run.stderr == "", run.stdout + run.stderr
    assert "scripted stand-in" in next(line for line in lines if line.startswith("  designer"))
    assert re.match(r"  sandbox   auto picks \w+", next(line for line in lines if line.startswith("  sandbox")))
    assert re.match(r"  preflight \d+ ok, \d+ warn, 0 fail", next(line for line in lines if "preflight" in line))
    steps = [line for line in lines if STEP_LINE.match(line)]
    assert [line.split()[0] for line in steps] == ["0", "1"]
    designed = steps[0].split()
    made = designed[1].split("/")
    assert int(made[0]) >= 1 and int(made[1]) == 4  # the scripted designer's valid half is admitted
    assert "syntax_error" in steps[0]  # its broken half is rejected with a code
    assert lines[-3] == f"full log: {tmp_path / 'demo.log'}" and lines[-2].startswith("report: ")
    assert lines[-1].startswith(f"browse: {tmp_path / 'spade' / 'browse' / 'index.html'} ")
    log = (tmp_path / "demo.log").read_text()
    assert "target_num_threads" not in log  # TransferQueue's thread count fits a small machine (backend/cpu.yaml)
    report = (tmp_path / "spade" / "report.md").read_text()
    assert "scripted stand-in" in report and "| syntax_error | " in report and "the code does not parse" in report
    assert "## Live environments at the end" in report and "| builtin/" in report
    assert (tmp_path / "spade" / "curriculum.png").stat().st_size > 0 and "fixed pool" in report
    check_the_browser_site(tmp_path / "spade")


def dump_doms(pages: list[Path], scratch: Path) -> list[str]:
    """Each page's DOM after its scripts ran, from Debian's headless chromium (installed by .ci/run)."""
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if chromium is None:
        pytest.fail("the run browser's check needs a headless browser: apt-get install chromium (as .ci/run does)")
    flags = ["--headless", "--no-sandbox", "--disable-gpu", "--dump-dom"]
    procs = [subprocess.Popen([chromium, *flags, f"--user-data-dir={scratch / str(i)}", page.as_uri()],
                              stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
             for i, page in enumerate(pages)]  # fmt: skip
    return [proc.communicate(timeout=180)[0] for proc in procs]


def check_the_browser_site(run_dir: Path) -> None:
    """The demo's run record as ``spade-envs browse`` shows it, in a real browser (issue 30)."""
    record = read_record(run_dir)
    designs = [e for e in record if e["kind"] == "design"]
    admitted = next(d for d in designs if d["verdict"] == "admitted" and d["transcripts"].get("no_hint"))
    rejected = next(d for d in designs if d["code"] == "syntax_error")
    assert MARKUP in rejected["source"] and rejected["source_kind"] == "extracted"  # env text that is markup
    assert all(isinstance(d.get("reward"), float) for d in load_run(run_dir).designs)  # scores joined
    site = run_dir / "browse"
    pages = [site / "index.html", site / "designs.html", site / f"designs/{design_id(admitted)}.html",
             site / f"designs/{design_id(rejected)}.html"]  # fmt: skip
    overview, table, good, bad = dump_doms(pages, run_dir / "chromium")
    assert "<svg" in overview and "<polyline" in overview and f"<td>{len(designs)} (" in overview
    assert 'data-filter="on"' in table  # the filter script ran under the page's Content-Security-Policy
    assert table.count('<tr class="admitted"') + table.count('<tr class="rejected"') == len(designs) == 4
    assert 'id="source"' in good and '<span class="kw">def</span> step(' in good  # the highlighted source
    assert good.count('class="transcript"') >= 1 and 'class="turn agent"' in good and 'class="turn env"' in good
    assert "&lt;script&gt;document.documentElement.dataset.pwned" in bad  # shown as text
    assert "data-pwned" not in bad  # and never run


def test_the_launchers_preflight_stops_the_demo_with_the_failed_check_and_its_fix(tmp_path):
    command = [
        sys.executable,
        "-m",
        "recipe.spade.laptop.demo",
        "--run-dir",
        str(tmp_path),
        "spade.corpus=/nonexistent.jsonl",
    ]
    run = subprocess.run(command, capture_output=True, text=True, timeout=300, cwd=ROOT)
    lines = run.stdout.splitlines()
    assert run.returncode == 1, run.stdout + run.stderr
    assert re.match(r"  preflight \d+ ok, \d+ warn, 1 fail \(spade-envs doctor", lines[6])
    assert lines[7].startswith("failed (exit 1)")
    assert lines[8].startswith("  fail corpus: /nonexistent.jsonl does not exist") and "-> set spade.corpus" in lines[8]
    assert lines[-1] == f"full log: {tmp_path / 'demo.log'}" and len(lines) == 10
    assert "SpadeTaskRunner" not in (tmp_path / "demo.log").read_text()  # nothing of verl's trainer started


def test_main_spade_stops_on_a_missing_corpus_with_one_line_before_ray_starts(tmp_path):
    env = {**os.environ, "VERL_PLATFORM": "cpu", "HYDRA_FULL_ERROR": "1"}
    run = subprocess.run([sys.executable, "-m", "recipe.spade.main_spade", "backend=cpu",
                          "spade.corpus=/nonexistent.jsonl", "trainer.total_training_steps=1"],
                         capture_output=True, text=True, timeout=300, cwd=tmp_path, env=env)  # fmt: skip
    assert run.returncode == 1
    spade = [line for line in run.stderr.splitlines() if line.startswith("spade:")]
    assert spade == [spade[0]] and spade[0].startswith("spade: bad config: /nonexistent.jsonl does not exist")
    assert "Traceback" not in run.stderr and "Ray" not in run.stdout + run.stderr  # stopped before Ray started
    assert not (tmp_path / "schedule-1.parquet").exists()


def write_run(run_dir: Path) -> None:
    rows = [
        {"time": 1.0, "spade/step": 0, "spade/live_envs": 2, "spade/designer/samples": 4,
         "spade/propose/validity_rate": 0.25, "spade/propose/failure/syntax_error": 2,
         "spade/propose/failure/do_nothing_wins": 1, "spade/propose/regret_mean": 0.5,
         "spade/propose/win_rate_mean": 0.25, "spade/solve/win_rate": 0.125, "spade/designer/reward_mean": -0.4},
        {"time": 7.5, "spade/step": 1, "spade/live_envs": 3, "spade/designer/samples": 0, "spade/solve/win_rate": 0.5},
    ]  # fmt: skip
    (run_dir / "spade_metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    records = [{"spec": {"env_id": "builtin/VaultCodeEnv", "skill": "mathematical_reasoning"}, "win_rate": 0.5,
                "regret": 0.0, "plays": 6},
               {"spec": {"env_id": "g0-3", "skill": "optimization"}, "win_rate": 0.25, "regret": 0.5, "plays": 4,
                "created_step": 0}]  # fmt: skip
    (run_dir / "memory.jsonl").write_text("".join(json.dumps(r) + "\n" for r in [{"format": "x"}, *records]))
    (run_dir / "pool_state.json").write_text(json.dumps({"live": ["builtin/VaultCodeEnv", "g0-3"]}))


def test_the_report_tells_each_steps_designs_failures_and_the_live_envs(tmp_path):
    write_run(tmp_path)
    text = write_report(tmp_path, about=["designer: a scripted stand-in"]).read_text()
    assert "- designer: a scripted stand-in" in text
    assert "| 0 | 1/4 | do_nothing_wins x1, syntax_error x2 | 0.50 | 0.25 | 0.12 | -0.40 | 2 |" in text
    assert "| 1 | - | - | - | - | 0.50 | - | 3 |" in text
    assert "| do_nothing_wins | 1 | an agent that does nothing wins |" in text
    assert "| g0-3 | optimization | 0 | 0.25 | 0.50 | 4 |" in text and "| builtin/VaultCodeEnv | " in text
    assert "curriculum" not in text  # the simulator figure is the demo's (curriculum=True)
    header, line = step_line({}, header=True), step_line(json.loads((tmp_path / "spade_metrics.jsonl")
                                                                    .read_text().splitlines()[0]), 12.34)  # fmt: skip
    assert header.split()[:3] == ["step", "designs", "ok/made"] and header.endswith("seconds")
    assert line.split()[:4] == ["0", "1/4", "do_nothing_wins", "x1,"] and line.endswith("12.3")
