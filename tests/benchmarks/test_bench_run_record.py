"""The run record's size benchmark runs and its bound holds: no worst-case entry outgrows what the caps allow."""

import subprocess
import sys
from pathlib import Path

_PATH = Path(__file__).resolve().parents[2] / "benchmarks" / "bench_run_record.py"


def test_the_size_bound_of_a_paper_run_is_printed_per_kind_and_in_total():
    run = subprocess.run([sys.executable, str(_PATH), "--steps", "8", "--regen-every", "4"], capture_output=True,
                         text=True, timeout=60, check=True)  # fmt: skip
    sizes = {line.split()[0]: int(line.split()[1].replace(",", "")) for line in run.stdout.splitlines()[1:4]}
    assert set(sizes) == {"design", "episode", "scores"}
    # a design holds at most its texts' caps (source, doc head, two hints, 3 arms x 2 transcripts) plus JSON
    assert 24_000 + 600 + 2 * 2_000 + 6 * 6_000 < sizes["design"] < 1.3 * (24_000 + 600 + 2 * 2_000 + 6 * 6_000)
    assert run.stdout.splitlines()[-1].startswith("total    at most ") and "(48 designs)" in run.stdout
