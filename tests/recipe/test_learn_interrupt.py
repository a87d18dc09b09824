"""A `make learn` ended by SIGTERM (a scheduler's time limit, `kill`) ends the launcher it started, not only itself.

Python's default SIGTERM leaves the child process group (launcher, Ray, trainer) running; the arm's `finally` must
run. The launcher here is a stand-in shell script that records its process group and sleeps: no trainer needed."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    return True


def test_sigterm_ends_the_arm_process_group(tmp_path):
    pid_file = tmp_path / "launcher.pid"
    launcher = tmp_path / "launcher.sh"
    launcher.write_text(f"#!/usr/bin/env bash\necho $$ > {pid_file}\nsleep 300 & wait\n", encoding="utf-8")
    code = (
        "import sys; from pathlib import Path; import recipe.spade.learn as learn; "
        f"learn.LAUNCHER = Path({str(launcher)!r}); "
        f"sys.exit(learn.main(['--run-dir', {str(tmp_path / 'run')!r}, 'model_dir=tiny', 'rungs=[CompareEnv]', "
        "'arms=[control]']))"
    )
    out = tmp_path / "learn.out"
    with out.open("wb") as sink:
        proc = subprocess.Popen([sys.executable, "-c", code], cwd=ROOT, stdout=sink, stderr=subprocess.STDOUT)
    try:
        deadline = time.time() + 60
        while not pid_file.exists() or not pid_file.read_text().strip():
            assert proc.poll() is None, out.read_text(errors="replace")
            assert time.time() < deadline, "the stand-in launcher never started"
            time.sleep(0.1)
        group = int(pid_file.read_text())
        assert _alive(group)
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=90) == 128 + signal.SIGTERM
        deadline = time.time() + 30
        while _alive(group) and time.time() < deadline:
            time.sleep(0.1)
        assert not _alive(group), "the launcher's process group outlived make learn"
    finally:
        if proc.poll() is None:
            proc.kill()
        if pid_file.exists() and pid_file.read_text().strip() and _alive(int(pid_file.read_text())):
            os.killpg(int(pid_file.read_text()), signal.SIGKILL)
