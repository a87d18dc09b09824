"""Process inspection for the sandbox tests: which worker processes exist, and waiting for them to go away."""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterable
from pathlib import Path

import pytest

from spade_envs.sandbox import process

#: Every worker process (and bubblewrap wrapping one) has this path in its command line.
WORKER_SCRIPT = str(Path(process.__file__).resolve().with_name("worker.py"))


class Processes:
    """Read-only views of ``/proc`` that the sandbox tests assert on."""

    worker_script = WORKER_SCRIPT

    @staticmethod
    def cmdline(pid: int) -> str:
        try:
            return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            return ""

    def workers(self) -> dict[int, str]:
        """Live processes of this test run (its descendants: orphans are re-parented to it, a subreaper) whose
        command line names the worker script. Zombies have none; other test runs' workers are not descendants."""
        found = {}
        for pid in self.tree(os.getpid()) - {os.getpid()}:
            cmd = self.cmdline(pid)
            if WORKER_SCRIPT in cmd:
                found[pid] = cmd
        return found

    @staticmethod
    def children(pid: int) -> list[int]:
        kids: list[int] = []
        try:
            tasks = list(Path(f"/proc/{pid}/task").glob("*/children"))
        except OSError:  # the process exited while we looked
            return kids
        for task in tasks:
            try:
                kids += [int(p) for p in task.read_text().split()]
            except OSError:
                continue
        return kids

    def tree(self, pid: int) -> set[int]:
        """``pid`` and all its descendants (a bubblewrap worker is bwrap -> bwrap -> python)."""
        found, todo = set(), [pid]
        while todo:
            current = todo.pop()
            if current not in found:
                found.add(current)
                todo += self.children(current)
        return found

    def alive(self, pids: Iterable[int]) -> set[int]:
        """Those of ``pids`` that still run the worker script (a reused pid or a reaped zombie does not)."""
        return {pid for pid in pids if WORKER_SCRIPT in self.cmdline(pid)}

    @staticmethod
    def wait_until(condition: Callable[[], object], timeout: float = 5.0) -> object:
        """Poll ``condition`` until it is truthy or ``timeout`` passes; return its last value."""
        deadline = time.monotonic() + timeout
        while True:
            value = condition()
            if value or time.monotonic() > deadline:
                return value
            time.sleep(0.05)

    def assert_gone(self, pids: Iterable[int], grace: float = 3.0) -> None:
        pids = set(pids)
        self.wait_until(lambda: not self.alive(pids), grace)
        left = self.alive(pids)
        assert not left, f"worker processes survived their kill: {[(p, self.cmdline(p)) for p in left]}"

    def assert_no_workers_left(self, grace: float = 5.0) -> None:
        """After a pool shut down: no process running the worker script remains."""
        self.wait_until(lambda: not self.workers(), grace)
        left = self.workers()
        assert not left, f"worker processes outlived their pool: {left}"


@pytest.fixture(scope="session")
def procs() -> Processes:
    return Processes()
