"""Run a suite's samples concurrently, append each scored sample to a JSONL file, resume from it.

The JSONL file is append-only and written one complete line at a time under a lock, so a run killed at any point
leaves every finished sample intact (at worst a truncated last line, which is dropped on resume). A rerun skips
every ``(item, sample)`` already there. Results are returned in item order, whatever order threads finished in.
"""

from __future__ import annotations

import json
import sys
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass, field
from pathlib import Path
from typing import TextIO

from spade_envs.evaluation.records import Item, SampleRecord, Sampling
from spade_envs.evaluation.suite import Suite
from spade_envs.llm import ChatClient, ChatError

__all__ = ["ResultStore", "SuiteRun", "run_suite"]


class ResultStore:
    """``<out>/<suite>.jsonl``: the scored samples of one suite, read back on start, appended to as they finish."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.records: dict[tuple[str, int], SampleRecord] = {}
        self.dropped_lines = 0
        if path.exists():
            self._read()
        self._lock = threading.Lock()

    def _read(self) -> None:
        with open(self.path, encoding="utf-8") as handle:
            for line in handle:
                try:
                    record = SampleRecord.from_json(json.loads(line))
                except (json.JSONDecodeError, KeyError, TypeError):
                    self.dropped_lines += 1  # the half-written last line of a killed run
                    continue
                self.records[record.key] = record
        if self.dropped_lines:  # rewrite without the broken line(s) so later appends start on a fresh line
            tmp = self.path.with_suffix(".jsonl.tmp")
            tmp.write_text("".join(json.dumps(r.to_json()) + "\n" for r in self.records.values()), encoding="utf-8")
            tmp.replace(self.path)

    def add(self, record: SampleRecord) -> None:
        """Append one record as one line, flushed, so that a kill cannot lose it once this returns."""
        line = json.dumps(record.to_json()) + "\n"
        with self._lock:
            if record.key in self.records:
                return
            self.records[record.key] = record
            with open(self.path, "a", encoding="utf-8") as handle:
                handle.write(line)
                handle.flush()


@dataclass
class SuiteRun:
    """What one suite produced: records in item order, its aggregate, and the samples that failed to run."""

    suite: Suite
    sampling: Sampling
    items: list[Item]
    records: list[SampleRecord]
    scores: dict[str, float]
    failures: list[str] = field(default_factory=list)
    resumed: int = 0

    @property
    def complete(self) -> bool:
        """Whether every planned sample was scored."""
        return len(self.records) == len(self.items) * self.sampling.n_samples


class _Progress:
    """One self-overwriting status line on stderr (a progress bar without a dependency)."""

    def __init__(self, name: str, total: int, done: int, stream: TextIO | None) -> None:
        self.name, self.total, self.done, self.failed = name, total, done, 0
        self.stream, self.start, self._last = stream, time.monotonic(), 0.0
        self._lock = threading.Lock()

    def tick(self, failed: bool = False, final: bool = False) -> None:
        with self._lock:
            if not final:
                self.done += not failed
                self.failed += failed
            now = time.monotonic()
            if self.stream is None or (not final and now - self._last < 0.2 and self.done < self.total):
                return
            self._last = now
            width = 30
            filled = width * self.done // max(1, self.total)
            rate = self.done / max(1e-9, now - self.start)
            line = f"\r[{self.name}] |{'#' * filled}{'.' * (width - filled)}| {self.done}/{self.total}"
            line += f" failed {self.failed}  {rate:.1f}/s"
            self.stream.write(line + ("\n" if final else ""))
            self.stream.flush()


def run_suite(
    suite: Suite,
    client: ChatClient,
    out_dir: Path,
    *,
    data_dir: Path | None = None,
    sampling: Sampling | None = None,
    concurrency: int = 8,
    limit: int | None = None,
    progress: TextIO | None = sys.stderr,
    on_record: Callable[[SampleRecord], None] | None = None,
) -> SuiteRun:
    """Score every ``(item, sample)`` of ``suite`` not yet in ``<out_dir>/<suite>.jsonl`` and aggregate them all.

    Args:
        suite: the benchmark.
        client: the chat endpoint (it retries transient failures itself).
        out_dir: where ``<suite.name>.jsonl`` lives.
        data_dir: root of user-provided benchmark files (file-based suites only).
        sampling: the protocol; the suite's default when ``None``.
        concurrency: samples in flight at once (threads).
        limit: only the first ``limit`` items (smoke runs).
        progress: stream for the progress line, or ``None`` for silence.
        on_record: called with each newly scored record (tests use it to interrupt a run).
    """
    if concurrency < 1:
        raise ValueError(f"concurrency must be >= 1, got {concurrency}")
    if limit is not None and limit < 1:
        raise ValueError(f"limit must be >= 1, got {limit}")
    sampling = sampling or suite.default_sampling
    items = suite.load(data_dir)[:limit]
    out_dir.mkdir(parents=True, exist_ok=True)
    store = ResultStore(out_dir / f"{suite.name}.jsonl")
    wanted = {(item.id, k) for item in items for k in range(sampling.n_samples)}
    resumed = len(wanted & store.records.keys())
    pending = [(item, k) for item in items for k in range(sampling.n_samples) if (item.id, k) not in store.records]
    bar = _Progress(suite.name, len(wanted), resumed, progress)
    failures: list[str] = []

    def one(item: Item, sample: int) -> SampleRecord:
        return suite.run_sample(client, item, sample, sampling)

    try:
        with ThreadPoolExecutor(max_workers=concurrency, thread_name_prefix=f"eval-{suite.name}") as pool:
            futures = {pool.submit(one, item, k): (item.id, k) for item, k in pending}
            for future in as_completed(futures):
                try:
                    record = future.result()
                except ChatError as exc:
                    failures.append(f"{futures[future]}: {exc}")
                    bar.tick(failed=True)
                    continue
                store.add(record)
                bar.tick()
                if on_record is not None:
                    on_record(record)
    finally:
        suite.close()
    bar.tick(final=True)
    order = {item.id: i for i, item in enumerate(items)}
    mine = [r for key, r in store.records.items() if key in wanted]
    records = sorted(mine, key=lambda r: (order[r.item_id], r.sample))
    return SuiteRun(suite, sampling, items, records, suite.aggregate(records), failures, resumed)
