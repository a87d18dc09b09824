"""Run a suite's samples concurrently, append each scored sample to a JSONL file, resume from it.

The JSONL file is append-only and written one complete line at a time under a lock, so a run killed at any point
leaves every finished sample intact (at worst a truncated last line, which is dropped on resume). A rerun skips
every ``(item, sample)`` already there. Results are returned in item order, whatever order threads finished in.

What the endpoint's answer means for a sample: a completion is scored; a context-length refusal (a 400 that says the
prompt and ``max_tokens`` exceed the window) is scored wrong, as BFCL scores it, since every rerun gets it again;
any other failure (connection errors and 408/429/5xx after the client's retries, other 4xx such as a content filter,
413 or 422) is a failure of that sample, not recorded, so a rerun plays it. A 401/403/404/405 (a wrong key, URL or
model name) would refuse every sample the same way: the run stops at once (``SuiteRun.stopped``), as on Ctrl-C.

:func:`run_suite` always returns a :class:`SuiteRun`: a suite that cannot load, a sample whose play or scoring
raises, a failing ``close`` or ``aggregate``, and Ctrl-C or SIGTERM all become recorded failures (the suite is then
incomplete), never an exception out of the runner. Each thread stores its own sample as soon as it is scored. An
interruption returns at once (:mod:`~spade_envs.evaluation.workers`): the samples in flight are abandoned, counted in
``SuiteRun.abandoned`` and never stored, so the report covers exactly the stored samples and a rerun plays the rest.
"""

from __future__ import annotations

import json
import logging
import re
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, TextIO

from spade_envs.envs.errors import SpadeEnvError
from spade_envs.envs.llm import ChatClient, ChatError, ChatMisconfigured, ChatRefused, is_context_refusal
from spade_envs.evaluation.protocol import fingerprint, suite_protocol
from spade_envs.evaluation.records import Item, SampleRecord, Sampling
from spade_envs.evaluation.suite import Suite
from spade_envs.evaluation.workers import Jobs

__all__ = ["ResultStore", "SuiteRun", "run_suite"]

log = logging.getLogger(__name__)
#: Most failure lines kept per suite (a broken task fails every one of its samples the same way).
MAX_FAILURES = 200
_STATUS = re.compile(r"HTTP (\d{3})")


def _stale_refusal(record: SampleRecord) -> bool:
    """A line an earlier version stored as a wrong answer for a refusal that is no context-length one (a 404)."""
    why = record.detail.get("inference_error")
    if not why:
        return False
    status = _STATUS.search(str(why))
    return status is None or not is_context_refusal(int(status.group(1)), str(why))


class ResultStore:
    """``<out>/<suite>.jsonl``: the scored samples of one suite, read back on start, appended to as they finish.

    With ``protocol`` (a fingerprint), lines made under any other protocol are set aside on start: moved to
    ``<out>/set_aside/<suite>.jsonl`` and counted in ``set_aside``, so a rerun never mixes two protocols. Lines that
    earlier versions wrote for a refusal other than a context-length one (every 4xx was once scored wrong) are
    dropped, counted in ``replayed_refusals``, and so played again.
    """

    def __init__(self, path: Path, protocol: str | None = None) -> None:
        self.path = path
        self.protocol = protocol
        self.records: dict[tuple[str, int], SampleRecord] = {}
        self.dropped_lines = 0
        self.set_aside = 0
        self.replayed_refusals = 0
        if path.exists():
            self._read()
        self._lock = threading.Lock()
        self._closed = False

    @property
    def set_aside_path(self) -> Path:
        """Where lines of other protocols go."""
        return self.path.parent / "set_aside" / self.path.name

    def _read(self) -> None:
        other: list[str] = []
        with open(self.path, encoding="utf-8") as handle:
            for line in handle:
                try:
                    record = SampleRecord.from_json(json.loads(line))
                except (json.JSONDecodeError, KeyError, TypeError):
                    self.dropped_lines += 1  # the half-written last line of a killed run
                    continue
                if self.protocol is not None and record.protocol != self.protocol:
                    other.append(line if line.endswith("\n") else line + "\n")
                    continue
                if _stale_refusal(record):
                    self.replayed_refusals += 1
                    continue
                self.records[record.key] = record
        self.set_aside = len(other)
        if other:
            self.set_aside_path.parent.mkdir(parents=True, exist_ok=True)
            with open(self.set_aside_path, "a", encoding="utf-8") as handle:
                handle.writelines(other)
        if self.dropped_lines or other or self.replayed_refusals:  # rewrite without them; appends start afresh
            tmp = self.path.with_suffix(".jsonl.tmp")
            tmp.write_text("".join(json.dumps(r.to_json()) + "\n" for r in self.records.values()), encoding="utf-8")
            tmp.replace(self.path)

    @property
    def closed(self) -> bool:
        """Whether :meth:`close` was called (the run was interrupted or is over)."""
        return self._closed

    def close(self) -> None:
        """Take no more records: a sample that finishes after this is not stored (a rerun plays it again)."""
        with self._lock:
            self._closed = True

    def add(self, record: SampleRecord) -> bool:
        """Append one record as one line, flushed, so that a kill cannot lose it once this returns.

        Returns whether it was stored (not after :meth:`close`, nor a second time).
        """
        line = json.dumps(record.to_json()) + "\n"
        with self._lock:
            if self._closed or record.key in self.records:
                return False
            self.records[record.key] = record
            with open(self.path, "a", encoding="utf-8") as handle:
                handle.write(line)
                handle.flush()
        return True


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
    #: Why the suite could not run at all (it loaded no items), or ``None``.
    error: str | None = None
    #: ``KeyboardInterrupt`` / ``SystemExit(...)`` when the run was stopped part-way, else ``None``.
    interrupted: str | None = None
    #: The protocol the records were made under (:func:`~spade_envs.evaluation.protocol.suite_protocol`).
    protocol: dict[str, Any] = field(default_factory=dict)
    #: Lines of an earlier run under another protocol, moved out of the suite's file instead of reused.
    set_aside: int = 0
    #: Samples in flight when the run was interrupted: abandoned, not counted; a rerun plays them.
    abandoned: int = 0
    #: Why the run stopped part-way: the endpoint refused a request as every request would be (a wrong key, URL or
    #: model name: HTTP 401/403/404/405), or ``None``.
    stopped: str | None = None
    #: Lines an earlier version stored for such a refusal as a wrong answer, dropped on start and played again.
    replayed_refusals: int = 0

    @property
    def complete(self) -> bool:
        """Whether every planned sample was scored (and nothing failed outside the samples)."""
        planned = len(self.items) * self.sampling.n_samples
        return (self.error is None and self.interrupted is None and self.stopped is None and planned > 0
                and len(self.records) == planned)  # fmt: skip

    @property
    def inference_errors(self) -> int:
        """Samples counted wrong because the endpoint refused them as over its context (``detail.inference_error``)."""
        return sum(bool(r.detail.get("inference_error")) for r in self.records)

    @property
    def scorer_timeouts(self) -> int:
        """Samples counted wrong because a scorer overran its deadline."""
        return sum(bool(r.detail.get("scorer_timeout")) for r in self.records)


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


def _describe(exc: BaseException) -> str:
    """Our own typed errors carry a full sentence; anything else is named by its type."""
    return (str(exc) if isinstance(exc, SpadeEnvError) else f"{type(exc).__name__}: {exc}")[:1000]


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

    Never raises for what the suite or the model does (see the module docstring); only bad arguments raise
    ``ValueError``. A sample that failed (the endpoint unreachable or failing after its retries, a 4xx other than a
    context-length one, or an exception in the suite's code) is listed in ``failures`` and not recorded, so a rerun
    retries it. A prompt the endpoint refuses as over its context length would fail the same way on every rerun: it
    is recorded as a wrong answer with ``detail.inference_error``. A wrong key, URL or model name stops the run
    (``SuiteRun.stopped``; the samples in flight are abandoned).

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
    out_dir.mkdir(parents=True, exist_ok=True)
    try:
        items = suite.load(data_dir)[:limit]
    except Exception as exc:  # noqa: BLE001 (a suite that cannot load is reported, not raised)
        log.debug("suite %s failed to load", suite.name, exc_info=True)
        _close(suite, [])
        return SuiteRun(suite, sampling, [], [], {}, error=_describe(exc))
    try:
        protocol = suite_protocol(suite, sampling, client.model)
    except Exception as exc:  # noqa: BLE001 (an unreadable data file: reported like a suite that cannot load)
        _close(suite, [])
        return SuiteRun(suite, sampling, [], [], {}, error=_describe(exc))
    stamp = fingerprint(protocol)
    store = ResultStore(out_dir / f"{suite.name}.jsonl", stamp)
    if store.set_aside:
        log.info("%s: set aside %d sample(s) made under another protocol (moved to %s)", suite.name,
                    store.set_aside, store.set_aside_path)  # fmt: skip
    wanted = {(item.id, k) for item in items for k in range(sampling.n_samples)}
    resumed = len(wanted & store.records.keys())
    pending = [(item, k) for item in items for k in range(sampling.n_samples) if (item.id, k) not in store.records]
    bar = _Progress(suite.name, len(wanted), resumed, progress)
    failures: list[str] = []
    failures_lock = threading.Lock()

    def fail(key: tuple[str, int], why: str) -> None:
        with failures_lock:
            if store.closed:
                return
            failed.add(key)
            if len(failures) < MAX_FAILURES:
                failures.append(f"{key}: {why}")
        bar.tick(failed=True)

    started: set[tuple[str, int]] = set()
    failed: set[tuple[str, int]] = set()
    stopped: list[str] = []

    def stop(key: tuple[str, int], why: str) -> None:
        with failures_lock:
            if store.closed:
                return
            failed.add(key)
            if not stopped:
                stopped.append(why)
        jobs.stop()

    def one(item: Item, sample: int) -> None:
        """Play, score and store one sample; every exception becomes a failure of this sample."""
        key = (item.id, sample)
        with failures_lock:
            started.add(key)
        try:
            record = replace(suite.run_sample(client, item, sample, sampling), protocol=stamp)
        except ChatMisconfigured as exc:  # every other sample would be refused the same way
            stop(key, str(exc))
            return
        except ChatRefused as exc:
            if not exc.over_context:  # a filter, a proxy, a malformed body: not the model's answer
                fail(key, str(exc))
                return
            # the prompt is over the context length on every rerun: scored wrong, as BFCL's runner scores it
            record = replace(suite.refused_record(item, sample, str(exc)), protocol=stamp)
        except ChatError as exc:
            fail(key, str(exc))
            return
        except Exception as exc:  # noqa: BLE001 (a bug or a broken item must not end the run)
            log.debug("sample %s of %s raised", key, suite.name, exc_info=True)
            fail(key, _describe(exc))
            return
        if not store.add(record):
            return  # the run was interrupted while this sample was in flight
        bar.tick()
        if on_record is not None:
            on_record(record)

    jobs = Jobs(pending, one, concurrency, f"eval-{suite.name}")
    interrupted = jobs.run()
    with failures_lock:
        store.close()  # from here on, a sample still in flight is abandoned: never stored, never counted
        abandoned = len(started - store.records.keys() - failed)
    _close(suite, failures)  # a sample still in flight may fail on the closed suite: it is abandoned anyway
    bar.tick(final=True)
    bar.tick(final=True)
    order = {item.id: i for i, item in enumerate(items)}
    mine = [r for key, r in store.records.items() if key in wanted]
    records = sorted(mine, key=lambda r: (order[r.item_id], r.sample))
    try:
        scores = suite.aggregate(records)
    except Exception as exc:  # noqa: BLE001
        failures.append(f"aggregate: {_describe(exc)}")
        scores = {}
    return SuiteRun(suite, sampling, items, records, scores, failures, resumed, interrupted=interrupted,
                    protocol=protocol, set_aside=store.set_aside, abandoned=abandoned,
                    stopped=stopped[0] if stopped else None, replayed_refusals=store.replayed_refusals)  # fmt: skip


def _close(suite: Suite, failures: list[str]) -> None:
    try:
        suite.close()
    except Exception as exc:  # noqa: BLE001
        failures.append(f"close: {_describe(exc)}")
