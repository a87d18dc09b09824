"""A `make learn` ended by SIGTERM (a scheduler's time limit, `kill`) ends the launcher it started, not only itself.

Python's default SIGTERM leaves the child process group (launcher, Ray, trainer) running; the arm's `finally` must
run. The launcher here is a stand-in shell script that records its process group and sleeps: no trainer needed."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]


def _alive(pgid: int) -> bool:
    """Whether a running (not zombie) process is left in process group ``pgid``.

    ``killpg(pgid, 0)`` also counts zombies: the stand-in's orphaned ``sleep`` is reparented to the nearest child
    subreaper, which may be this test's own process, and stays a zombie until reaped."""
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if int(fields[2]) == pgid and fields[0] not in ("Z", "X"):
            return True
    return False


def test_sigterm_ends_the_arm_process_group(tmp_path):
    pid_file = tmp_path / "launcher.pid"
    launcher = tmp_path / "launcher.sh"
    launcher.write_text(f"#!/usr/bin/env bash\necho $$ > {pid_file}\nsleep 300 & wait\n", encoding="utf-8")
    code = (
        "import sys; from pathlib import Path; import recipe.spade.laptop.learn as learn; "
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


def test_a_sigterm_during_the_start_still_ends_the_group(tmp_path, monkeypatch):
    """The race CI hit: SIGTERM between the child's start and the `finally` that would end its group."""
    import subprocess as real_subprocess

    from recipe.spade.laptop import process_group as module

    started: list[int] = []

    class PopenThenSigterm(real_subprocess.Popen):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            started.append(self.pid)
            os.kill(os.getpid(), signal.SIGTERM)  # arrives before process_group's `try`

    monkeypatch.setattr(module.subprocess, "Popen", PopenThenSigterm)
    # another thread, as pytest-xdist's workers have: a process-directed signal may be taken by it
    stop = threading.Event()
    bystander = threading.Thread(target=stop.wait, daemon=True)
    bystander.start()
    previous = signal.getsignal(signal.SIGTERM)
    module.exit_on_sigterm()
    try:
        try:
            with module.process_group(["bash", "-c", "sleep 300 & wait"]):
                time.sleep(5)  # the held signal is delivered on entry, never reaching here
            raised = None
        except SystemExit as exc:
            raised = exc.code
    finally:
        signal.signal(signal.SIGTERM, previous)
        stop.set()
    assert raised == 128 + signal.SIGTERM and started
    deadline = time.time() + 30
    while _alive(started[0]) and time.time() < deadline:
        time.sleep(0.1)
    assert not _alive(started[0]), "a SIGTERM during the start left the child's group running"
