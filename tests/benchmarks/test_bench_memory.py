"""The memory benchmark runs end to end on a tiny memory and reports an exact restore (structure, never timing)."""

import importlib.util
from pathlib import Path

_PATH = Path(__file__).resolve().parents[2] / "benchmarks" / "bench_memory.py"


def test_tiny_run_prints_the_table_and_restores_exactly(capsys):
    spec = importlib.util.spec_from_file_location("bench_memory", _PATH)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert module.main(["--records", "300", "--source-chars", "400", "--repeats", "3"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("300 records, 400-char sources")
    for row in ("replay batch of 32, after a re-score", "exemplars", "persist again after 32 re-scores"):
        assert row in out
    assert out.rstrip().splitlines()[-1].split()[-3:] == ["-", "exact", "yes"]
