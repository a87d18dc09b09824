"""Reaping orphaned workers must survive the host's threads coming and going under it."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from spade_envs.sandbox.pool import _has_worker_children
from spade_envs.sandbox.process import reap_orphans


@pytest.mark.parametrize("scan", [reap_orphans, _has_worker_children], ids=["reap_orphans", "shutdown_wait"])
def test_a_thread_that_ends_while_orphans_are_reaped_is_skipped(monkeypatch, scan):
    """Both scans of the host's threads (``shutdown`` runs them in turn) skip a thread that has ended."""
    listed = Path(f"/proc/{os.getpid()}/task")
    gone = listed / "999999999" / "children"  # a thread /proc listed a moment ago and that has ended since
    real_glob = Path.glob

    def glob(self, pattern):
        found = list(real_glob(self, pattern))
        return [gone, *found] if self == listed else found

    monkeypatch.setattr(Path, "glob", glob)
    assert scan() in (0, False)
