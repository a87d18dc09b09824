"""Environment memory: a scored, deduplicated, persistent level buffer in the spirit of Prioritized Level Replay.

It serves two readers. The designer prompt gets exemplars (learnable envs of the same skill as positives, too
easy / too hard ones as labelled negatives). An optional agent replay stream gets envs sampled by
``P = (1 - rho) * P_score + rho * P_stale``: ``P_score`` is rank-based, ``h(rank) = rank ** (-1 / temperature)``
over each env's score (a mix of regret and learnability ``p (1 - p)``), and ``P_stale`` is proportional to the
steps since the env was last played, so scores measured on an older agent get refreshed. Replays re-score the env.

Compared with the reference (a 200-record FIFO written non-atomically, unseeded sampling), records are deduplicated
by :func:`~spade_envs.design.ast_hash.normalized_ast_hash`, the least useful record is evicted instead of the oldest,
the
file is replaced atomically and a load restores the buffer exactly, so seeded samples continue identically after a
resume. "Win rate" is the share of no-hint plays won (outcome 1) everywhere, as the designer reward counts it:
partial credit is no win (the reference counted outcomes > 0 here).

Sampling works on numpy arrays kept in step with the records (records are frozen; every change goes through this
class) and on a rank order that is updated incrementally, so a sample from 100k records takes a few milliseconds
(``benchmarks/bench_memory.py``).
"""

from __future__ import annotations

import json
import math
import os
import tempfile
from collections import Counter
from collections.abc import Collection, Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

from spade_envs.design.ast_hash import normalized_ast_hash
from spade_envs.design.memory_record import Exemplar, Exemplars, MemoryConfig, MemoryRecord, check_stats
from spade_envs.envs.errors import SpadeEnvError
from spade_envs.envs.spec import SETTINGS

__all__ = [
    "EnvMemory",
    "Exemplar",
    "Exemplars",
    "MemoryConfig",
    "MemoryFileError",
    "MemoryRecord",
    "normalized_ast_hash",
]

FORMAT = "spade_envs.memory"
FORMAT_VERSION = 1
# Rank keys: (quantised 1 - score) << _SLOT_BITS | slot, unique per slot, so the rank order is a total order.
_SLOT_BITS = 24
_SCORE_STEPS = float(1 << 39)
_NO_KEY = np.uint64(np.iinfo(np.uint64).max)


class MemoryFileError(SpadeEnvError, ValueError):
    """A memory file cannot be restored; the message names the path and line."""


class EnvMemory:
    """The level buffer. Not thread-safe: one owner (the trainer's designer loop) mutates it."""

    def __init__(self, config: MemoryConfig | None = None) -> None:
        self.config = config or MemoryConfig()
        self._records: list[MemoryRecord] = []
        self._slot: dict[str, int] = {}
        self._hash_slot: dict[str, int] = {}
        self._groups: dict[tuple[str, str], int] = {}
        self._arrays: dict[str, np.ndarray] = {}
        self._lines: list[str | None] = []  # serialised records, reused by save() until the record changes
        self._grow(min(self.config.capacity, 1024))
        self._sorted = np.empty(0, np.uint64)  # rank keys of playable slots, ascending = best first
        self._pending: set[int] = set()  # slots whose rank key must be refreshed
        self._order: np.ndarray | None = None  # playable slots, best first
        self._h = np.empty(0)  # P_score by rank for the current number of playable slots

    # ----- size and lookup ---------------------------------------------------------------------------------
    def __len__(self) -> int:
        return len(self._records)

    def __contains__(self, env_id: object) -> bool:
        return env_id in self._slot

    def __iter__(self) -> Iterator[MemoryRecord]:
        return iter(list(self._records))

    def get(self, env_id: str) -> MemoryRecord:
        """The record of ``env_id``; ``KeyError`` otherwise."""
        if env_id not in self._slot:
            raise KeyError(f"env {env_id!r} is not in memory ({len(self)} records)")
        return self._records[self._slot[env_id]]

    # ----- mutation ----------------------------------------------------------------------------------------
    def add(self, record: MemoryRecord, keep: Collection[str] = ()) -> bool:
        """Insert ``record``; ``False`` when it is not stored as a new record (a duplicate, or see below).

        ``keep``: env ids that must not be evicted (the env pool's live envs and the designs about to go live: an
        evicted live env would leave agent rows without a task). ``ValueError`` when every record is kept.

        A duplicate of a stored env (same AST hash) keeps the stored env's id; a played duplicate (``plays > 0``)
        replaces its win rate and regret (the latest measurement of the current agent counts), adds its plays and
        takes its status -- except that a duplicate with an env-failure status never overwrites a playable stored
        record (one failed re-measurement of code that played fine says more about that run than about the code;
        the designer sample was charged its penalty anyway). At capacity the least useful record is evicted:
        lowest score (unplayable records first), then least recently played, then oldest; an unplayable incoming
        record is not stored when that would evict a playable one (``False``, nothing evicted). A playable record
        is always stored, so ``False`` for a playable record always means a duplicate.
        """
        if record.env_id in self._slot:
            raise ValueError(f"env {record.env_id!r} is already in memory; use update_stats to re-score it")
        slot = self._hash_slot.get(record.ast_hash)
        if slot is not None:
            old = self._records[slot]
            if old.playable and not record.playable:
                return False
            stats = {"win_rate": record.win_rate, "regret": record.regret} if record.plays else {}
            last = max(old.last_played_step, record.last_played_step)
            self._set(slot, replace(old, **stats, plays=old.plays + record.plays, last_played_step=last,
                                    status=record.status))  # fmt: skip
            return False
        if len(self._records) >= self.config.capacity:
            victim = self._eviction_slot(keep)
            if not record.playable and self._records[victim].playable:
                return False  # an unplayable record never pushes out a playable one
            self._remove(victim)
        self._append(record)
        return True

    def update_stats(
        self, env_id: str, win_rate: float, regret: float | None, plays: int, step: int, status: str | None = None
    ) -> MemoryRecord:
        """Re-score ``env_id`` after it was (re)played at ``step``; returns the new record.

        The new measurement replaces the old win rate (and regret, unless ``None``: replays without a hinted arm
        measure none), because the agent that produced the old one no longer exists; ``plays`` accumulates.
        """
        old = self.get(env_id)
        check_stats(env_id, win_rate, 0.0 if regret is None else regret, plays, step)
        if step < old.last_played_step:
            raise ValueError(f"{env_id}: step {step} is before its last play at step {old.last_played_step}")
        new = replace(old, win_rate=win_rate, regret=old.regret if regret is None else regret,
                      plays=old.plays + plays, last_played_step=step, status=status or old.status)  # fmt: skip
        self._set(self._slot[env_id], new)
        return new

    # ----- sampling ----------------------------------------------------------------------------------------
    def sample_replay(self, n: int, step: int, rng: np.random.Generator) -> list[MemoryRecord]:
        """Up to ``n`` distinct playable envs, drawn without replacement from ``P`` (see the module docstring).

        When no env is stale (all played at ``step``) ``P = P_score``. Sampling does not mark envs as played:
        call :meth:`update_stats` with the results.
        """
        if not isinstance(n, int) or n < 0:
            raise ValueError(f"n must be an int >= 0, got {n!r}")
        order = self._ranked()
        m = order.size
        k = min(n, m)
        if k == 0:
            return []
        p = self._h
        stale = step - self._arrays["last"][order]
        if stale.min() < 0:
            raise ValueError(f"step {step} is before the last play of a record (step {step - stale.min()})")
        rho, total = self.config.staleness_weight, int(stale.sum())
        if rho > 0 and total > 0:
            p = (1.0 - rho) * p + (rho / total) * stale
        with np.errstate(divide="ignore"):  # exponential race: the k smallest E_i / p_i are a draw without
            keys = rng.standard_exponential(m) / p  # replacement from p, in order (cheaper than k sequential draws)
        top = np.argpartition(keys, k - 1)[:k] if k < m else np.arange(m)
        top = top[np.argsort(keys[top], kind="stable")]
        return [self._records[i] for i in order[top]]

    def exemplars(
        self, skill: str, setting: str, rng: np.random.Generator, n_pos: int = 2, n_neg: int = 1
    ) -> Exemplars:
        """Prompt exemplars of ``setting``/``skill``.

        Positives: win rate in [positive_low, positive_high]; the top ``max(factor * n_pos, pool_min)`` by regret,
        ``n_pos`` of them at random, shown by decreasing regret. Negatives: ``n_neg`` at random among the too easy
        (> too_easy) and too hard (< too_hard), each with its reason.
        """
        if setting not in SETTINGS:
            raise ValueError(f"setting must be one of {SETTINGS}, got {setting!r}")
        if n_pos < 0 or n_neg < 0:
            raise ValueError(f"n_pos and n_neg must be >= 0, got {n_pos}, {n_neg}")
        group = self._groups.get((setting, skill))
        if group is None:
            return Exemplars([], [])
        c, a, n = self.config, self._arrays, len(self._records)
        win, regret = a["win"][:n], a["regret"][:n]
        mine = (a["group"][:n] == group) & a["playable"][:n]
        # a record never played (a seeded built-in) has no measured win rate: it is neither a model nor a warning
        mine[mine] = [self._records[i].plays > 0 for i in np.flatnonzero(mine)]
        pos = np.flatnonzero(mine & (win >= c.positive_low) & (win <= c.positive_high))
        pool = max(c.positive_pool_factor * n_pos, c.positive_pool_min)
        if pos.size > pool:
            pos = pos[np.argpartition(-regret[pos], pool - 1)[:pool]]
        chosen = pos[rng.permutation(pos.size)[:n_pos]]
        chosen = chosen[np.argsort(-regret[chosen], kind="stable")]
        positives = [Exemplar(self._records[i], f"learnable: win rate {win[i]:.2f}, regret {regret[i]:.2f}")
                     for i in chosen]  # fmt: skip
        neg = np.flatnonzero(mine & ((win > c.too_easy) | (win < c.too_hard)))
        negatives = [Exemplar(self._records[i], f"{'too easy' if win[i] > c.too_easy else 'too hard'}: "
                              f"win rate {win[i]:.2f}") for i in neg[rng.permutation(neg.size)[:n_neg]]]  # fmt: skip
        return Exemplars(positives, negatives)

    # ----- persistence -------------------------------------------------------------------------------------
    def save(self, path: str | os.PathLike[str]) -> None:
        """Write all records to ``path`` (JSON lines: a header, then one record per line), atomically.

        The file is written to a temporary file in the same directory, fsynced and renamed over ``path``, so a
        crash leaves either the old file or the new one, never a torn one. Serialised lines are kept until their
        record changes, so saving every regeneration step re-encodes only what changed.
        """
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        header = {"format": FORMAT, "version": FORMAT_VERSION, "config": self.config.to_dict(), "records": len(self)}
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                f.write(json.dumps(header) + "\n")
                dumps = json.JSONEncoder(separators=(",", ":"), allow_nan=False).encode
                for i, line in enumerate(self._lines):
                    if line is None:
                        self._lines[i] = line = dumps(self._records[i].to_dict())
                    f.write(line)
                    f.write("\n")
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
        dir_fd = os.open(path.parent, os.O_RDONLY)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> EnvMemory:
        """Restore a memory written by :meth:`save`, records, order and config exactly.

        Raises:
            MemoryFileError: the file is not a memory file of a known version, a line is not a valid record
                (the message names ``path:line``), ids or AST hashes repeat, or the record count is wrong.
        """
        path = Path(path)
        with path.open("rb") as f:
            header = _parse_line(path, 1, _decode(path, 1, f.readline()))
            if header.get("format") != FORMAT or header.get("version") != FORMAT_VERSION:
                raise MemoryFileError(
                    f"{path}:1: not a {FORMAT} file of version {FORMAT_VERSION} "
                    f"(format={header.get('format')!r}, version={header.get('version')!r})"
                )
            try:
                memory = cls(MemoryConfig.from_dict(header["config"]))
                expected = int(header["records"])
            except (KeyError, TypeError, ValueError) as exc:
                raise MemoryFileError(f"{path}:1: bad header: {exc}") from exc
            for lineno, raw in enumerate(f, start=2):
                line = _decode(path, lineno, raw)
                data = _parse_line(path, lineno, line)
                try:
                    record = MemoryRecord.from_dict(data)
                except (KeyError, TypeError, ValueError) as exc:
                    raise MemoryFileError(f"{path}:{lineno}: bad record: {exc}") from exc
                why = (
                    "duplicate env_id" if record.env_id in memory._slot
                    else "duplicate ast_hash" if record.ast_hash in memory._hash_slot
                    else f"more records than capacity {memory.config.capacity}" if len(memory) >= memory.config.capacity
                    else None
                )  # fmt: skip
                if why:
                    raise MemoryFileError(f"{path}:{lineno}: {why} (env {record.env_id!r})")
                memory._append(record)
                memory._lines[-1] = line.rstrip("\n")
        if len(memory) != expected:
            raise MemoryFileError(f"{path}: header announces {expected} records, found {len(memory)} (truncated?)")
        return memory

    # ----- statistics --------------------------------------------------------------------------------------
    def stats(self) -> dict[str, Any]:
        """Counts per setting, skill (``setting/skill``) and status, and a 10-bin histogram of playable win rates."""
        n = len(self._records)
        playable = self._arrays["playable"][:n]
        counts, edges = np.histogram(self._arrays["win"][:n][playable], bins=10, range=(0.0, 1.0))
        return {
            "records": n,
            "capacity": self.config.capacity,
            "playable": int(playable.sum()),
            "by_setting": dict(Counter(r.setting for r in self._records)),
            "by_skill": dict(Counter(f"{r.setting}/{r.skill}" for r in self._records)),
            "by_status": dict(Counter(r.status for r in self._records)),
            "win_rate_histogram": {"edges": [round(float(e), 6) for e in edges], "counts": counts.tolist()},
        }

    # ----- internals: records live in slots 0..n-1, mirrored by numpy arrays ----------------------------------
    def _grow(self, size: int) -> None:
        kinds = {"score": np.float64, "win": np.float64, "regret": np.float64, "last": np.int64,
                 "created": np.int64, "group": np.int32, "playable": np.bool_, "key": np.uint64}  # fmt: skip
        old = self._arrays
        self._arrays = {k: np.zeros(size, dtype=t) for k, t in kinds.items()}
        self._arrays["key"][:] = _NO_KEY
        for k, arr in old.items():
            self._arrays[k][: arr.size] = arr

    def _score(self, r: MemoryRecord) -> float:
        if not r.playable:
            return -math.inf
        w = self.config.regret_weight
        return w * min(1.0, max(0.0, r.regret)) + (1.0 - w) * 4.0 * r.learnability

    def _set(self, slot: int, r: MemoryRecord) -> None:
        self._records[slot] = r
        group = self._groups.setdefault((r.setting, r.skill), len(self._groups))
        a = self._arrays
        a["score"][slot], a["win"][slot], a["regret"][slot] = self._score(r), r.win_rate, r.regret
        a["last"][slot], a["created"][slot], a["group"][slot] = r.last_played_step, r.created_step, group
        a["playable"][slot] = r.playable
        self._lines[slot] = None
        self._pending.add(slot)
        self._order = None

    def _append(self, r: MemoryRecord) -> None:
        slot = len(self._records)
        if slot >= self._arrays["score"].size:
            self._grow(min(self.config.capacity, 2 * slot))
        self._records.append(r)
        self._lines.append(None)
        self._slot[r.env_id], self._hash_slot[r.ast_hash] = slot, slot
        self._set(slot, r)

    def _remove(self, slot: int) -> None:
        """Swap-remove: the last record moves into ``slot``."""
        gone, last, last_line = self._records[slot], self._records.pop(), self._lines.pop()
        del self._slot[gone.env_id], self._hash_slot[gone.ast_hash]
        self._pending.add(len(self._records))  # the last slot's rank key must go
        self._order = None
        if slot < len(self._records):
            self._slot[last.env_id], self._hash_slot[last.ast_hash] = slot, slot
            self._set(slot, last)
            self._lines[slot] = last_line

    def _eviction_slot(self, keep: Collection[str] = ()) -> int:
        a, n = self._arrays, len(self._records)
        score = a["score"][:n]
        kept = list({self._slot[e] for e in keep if e in self._slot})
        if kept:
            if len(kept) >= n:
                raise ValueError(f"memory is full ({n} records) and every record is kept: raise memory.capacity")
            score = score.copy()
            score[kept] = math.inf
        tied = np.flatnonzero(score == score.min())
        return int(tied[np.lexsort((tied, a["created"][tied], a["last"][tied]))[0]])

    def _ranked(self) -> np.ndarray:
        """Playable slots, best score first (ties: lower slot first); ``self._h`` holds their ``P_score``.

        Each playable slot has a unique rank key, so the order is a total order independent of the history of
        changes: the keys of changed slots are moved in the sorted key array (O(n) memmove, no sort), and a full
        rebuild after many changes or a load gives the same array. That keeps seeded samples identical after a
        save and load. Scores are quantised to 2**-39 for the key, far below any meaningful difference.
        """
        if self._order is None:
            a, n = self._arrays, len(self._records)
            if len(self._pending) > self._sorted.size // 8:  # cheaper to rebuild
                slots = np.flatnonzero(a["playable"][:n])
                a["key"][:] = _NO_KEY
                a["key"][slots] = self._rank_keys(slots)
                self._sorted = np.sort(a["key"][slots])
            elif self._pending:
                slots = np.fromiter(self._pending, np.int64, len(self._pending))
                old = a["key"][slots]
                old = np.sort(old[old != _NO_KEY])
                self._sorted = np.delete(self._sorted, np.searchsorted(self._sorted, old))
                a["key"][slots] = _NO_KEY
                slots = slots[slots < n]
                slots = slots[a["playable"][slots]]
                new = a["key"][slots] = self._rank_keys(slots)
                new = np.sort(new)
                self._sorted = np.insert(self._sorted, np.searchsorted(self._sorted, new), new)
            self._pending.clear()
            self._order = (self._sorted & np.uint64((1 << _SLOT_BITS) - 1)).astype(np.intp)
            if self._h.size != self._order.size:
                h = np.exp(-np.log(np.arange(1, self._order.size + 1)) / self.config.temperature)
                self._h = h / h.sum() if h.size else h
        return self._order

    def _rank_keys(self, slots: np.ndarray) -> np.ndarray:
        quantised = np.rint((1.0 - self._arrays["score"][slots]) * _SCORE_STEPS).astype(np.uint64)
        return (quantised << np.uint64(_SLOT_BITS)) | slots.astype(np.uint64)


def _decode(path: Path, lineno: int, raw: bytes) -> str:
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise MemoryFileError(f"{path}:{lineno}: not UTF-8 ({exc})") from exc


def _parse_line(path: Path, lineno: int, line: str) -> dict[str, Any]:
    try:
        data = json.loads(line)
    except json.JSONDecodeError as exc:
        raise MemoryFileError(f"{path}:{lineno}: not valid JSON ({exc})") from exc
    if not isinstance(data, dict):
        raise MemoryFileError(f"{path}:{lineno}: expected a JSON object, got {type(data).__name__}")
    return data
