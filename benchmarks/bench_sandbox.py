"""Benchmark the env sandbox: step round trip, env start, memory per live env and round-robin throughput.

Run ``.venv/bin/python benchmarks/bench_sandbox.py [--quick] [--levels bwrap landlock ...] [--json PATH]``; it
prints machine facts and one table. Targets are printed next to the numbers, never asserted. See
``benchmarks/README.md`` for what each row measures.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import math
import os
import platform
import resource
import shutil
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

_ROOT = Path(__file__).resolve().parents[1]
if str(_ROOT) not in sys.path:  # run as a script from a checkout
    sys.path.insert(0, str(_ROOT))

from spade_envs.envs.loader import load_env_class  # noqa: E402
from spade_envs.sandbox import (  # noqa: E402
    AsyncSandboxEnv,
    RemoteEnv,
    SandboxConfig,
    SandboxError,
    WorkerPool,
    probe_isolation,
    step_all,
)
from spade_envs.sandbox.config import ISOLATION_LEVELS  # noqa: E402
from spade_envs.sandbox.process import Worker, become_subreaper  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
from sandbox_parts import REFERENCE_311D5CE, episode_parts, step_parts  # noqa: E402

__all__ = ["REALISTIC_SOURCE", "TRIVIAL_SOURCE", "Settings", "format_table", "machine_facts", "main", "run"]

GIB = 1 << 30
MIB = 1 << 20

#: The step returns a constant: what is left is the sandbox's own cost per call.
TRIVIAL_SOURCE = '''
class TrivialEnv:
    """Every step returns the same constant result."""

    max_turns = 1_000_000_000

    def reset(self, seed=None):
        return "start", {}

    def step(self, action):
        return "ok", 0.0, False, False, {}

    def solution(self):
        return []
'''

#: A small text maze: every step moves, re-plans the distance to the goal with a BFS, renders the board as the
#: observation and hashes it for visited-state bookkeeping (``__WORK__`` characters, tuned at start-up so that one
#: in-process step costs about 50 us of pure Python on this machine).
REALISTIC_SOURCE = '''
from collections import deque


class MazeEnv:
    """Walk to the goal of a 7x7 maze; the reward is shaped by the BFS distance that every step recomputes."""

    max_turns = 1_000_000_000
    SIZE = 7
    WORK = __WORK__
    MOVES = {"up": (-1, 0), "down": (1, 0), "left": (0, -1), "right": (0, 1)}

    def reset(self, seed=None):
        n = self.SIZE
        self.walls = {(r, c) for r in range(1, n - 1, 2) for c in range(n) if (c + r) % 4 != 0}
        self.goal, self.pos, self.turn = (n - 1, n - 1), (0, 0), 0
        return self._render(self._distance()), {"size": n}

    def _distance(self):
        n, goal = self.SIZE, self.goal
        seen, queue = {self.pos: 0}, deque([self.pos])
        while queue:
            cell = queue.popleft()
            if cell == goal:
                return seen[cell]
            r, c = cell
            for dr, dc in self.MOVES.values():
                nxt = (r + dr, c + dc)
                if 0 <= nxt[0] < n and 0 <= nxt[1] < n and nxt not in self.walls and nxt not in seen:
                    seen[nxt] = seen[cell] + 1
                    queue.append(nxt)
        return -1

    def _render(self, distance):
        rows = []
        for r in range(self.SIZE):
            row = []
            for c in range(self.SIZE):
                cell = (r, c)
                wall = "#" if cell in self.walls else "."
                row.append("@" if cell == self.pos else "G" if cell == self.goal else wall)
            rows.append("".join(row))
        return "\\n".join(rows) + f"\\nturn {self.turn}, distance {distance}"

    def step(self, action):
        dr, dc = self.MOVES.get(action.strip().lower(), (0, 0))
        r, c = self.pos[0] + dr, self.pos[1] + dc
        if 0 <= r < self.SIZE and 0 <= c < self.SIZE and (r, c) not in self.walls:
            self.pos = (r, c)
        distance = self._distance()
        self.turn += 1
        done = self.pos == self.goal
        reward = 1.0 if done else -0.01 * max(distance, 0) / self.SIZE
        obs = self._render(distance)
        digest, size = 0, len(obs)
        for i in range(self.WORK):
            digest = (digest * 31 + ord(obs[i % size])) & 0xFFFFFFFF
        if done:
            self.pos = (0, 0)
        return obs, reward, done, False, {"distance": distance, "turn": self.turn, "digest": digest}

    def solution(self):
        return []
'''

#: The action sequence every realistic-env benchmark cycles through (same for in-process and sandboxed runs).
ACTIONS = ("right", "down", "right", "down", "left", "up", "down", "right")

TARGET_STEP_US = 100.0
TARGET_RATIO = 3.0
TARGET_POOLED_MS = 10.0
TARGET_MEMORY_GIB = 4.0
TARGET_COLD_MS = 50.0  # issue 31: start + init of a worker started on demand
TARGET_STEPS_PER_S = 5000.0  # issue 31: 40 envs round-robin, one host thread


@dataclass
class Settings:
    """One benchmark run. The defaults are the full run; :meth:`quick` gives the ``--quick`` sizes."""

    levels: tuple[str, ...] = ("bwrap", "landlock")
    steps: int = 5000  # step round trips per (env, level)
    warmup: int = 300
    step_blocks: int = 10  # modes alternate in this many blocks of steps
    subprocess_calls: int = 20  # the new-process-per-call baseline is slow: few iterations
    cold_starts: int = 20
    pooled_starts: int = 50
    envs: int = 200  # K live envs for memory and throughput
    throughput_s: float = 5.0
    memory_level: str | None = None  # None: the level ``auto`` picks (the default level)
    probe_levels: bool = True  # machine facts: try every isolation level
    pooled_wait_s: float = 5.0  # longest wait for the pool to refill between pooled starts
    step_work_us: float = 50.0  # target cost of one realistic in-process step
    calibration_rounds: int = 5
    part_steps: int = 2000  # by-hand step round trips per (env, level) for the per-part rows
    episodes: int = 10  # episodes per level for the per-part episode rows
    episode_steps: int = 20
    sandbox: dict[str, Any] = field(default_factory=dict)  # SandboxConfig fields set for every pool (``--set``)
    extra: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def quick(cls, **overrides: Any) -> Settings:
        base = cls(steps=500, warmup=50, subprocess_calls=10, cold_starts=5, pooled_starts=15, envs=40, part_steps=500,
                   episodes=5)  # fmt: skip
        return replace(base, throughput_s=2.0, **overrides)


# -- measuring ---------------------------------------------------------------------------------------------------
@contextmanager
def _no_gc() -> Iterator[None]:
    gc.collect()
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def percentile(samples: list[float], q: float) -> float:
    """Nearest-rank percentile (``q`` in 0..100) of a non-empty sample."""
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, max(0, math.ceil(q / 100 * len(ordered)) - 1))]


def _time_calls(fn: Callable[[int], Any], n: int, warmup: int) -> list[float]:
    """Microseconds of each of ``n`` calls ``fn(i)``, after ``warmup`` untimed calls, with gc off."""
    for i in range(warmup):
        fn(i)
    out = [0.0] * n
    clock = time.perf_counter_ns
    with _no_gc():
        for i in range(n):
            t0 = clock()
            fn(i)
            out[i] = (clock() - t0) / 1000.0
    return out


def _row(name: str, level: str, samples_us: list[float] | None = None, **extra: Any) -> dict[str, Any]:
    row: dict[str, Any] = {"benchmark": name, "level": level, "n": len(samples_us) if samples_us else 0}
    if samples_us:
        row.update(p50_us=statistics.median(samples_us), p99_us=percentile(samples_us, 99))
        row["mean_us"] = statistics.fmean(samples_us)
    row.update(extra)
    return row


def _wait_pool_full(pool: WorkerPool, timeout: float) -> bool:
    """Wait until the pool holds ``pool_size`` ready workers (peeks at its private queue; there is no public count).

    Returns False on timeout. Without that attribute it falls back to a fixed wait.
    """
    ready = getattr(pool, "_ready", None)
    if ready is None:
        time.sleep(min(timeout, 0.5))
        return True
    deadline = time.monotonic() + timeout
    while len(ready) < pool.config.pool_size:
        if time.monotonic() > deadline:
            return False
        time.sleep(0.005)
    time.sleep(0.01)  # let the refill thread go back to waiting
    return True


def calibrate_work(target_us: float, rounds: int = 5) -> int:
    """Hashing work per step that makes one in-process step of the maze env cost about ``target_us`` (0 if more)."""
    env = load_env_class(REALISTIC_SOURCE.replace("__WORK__", "0"))()
    env.reset(0)

    def fastest(work: int) -> float:  # the quietest of a few short runs: neighbours come and go
        env.WORK = work
        samples = (_time_calls(lambda i: env.step(ACTIONS[i % len(ACTIONS)]), 200, 50) for _ in range(rounds))
        return min(statistics.median(s) for s in samples)

    base, more = fastest(0), fastest(300)
    per_unit = max((more - base) / 300, 1e-3)
    return max(0, round((target_us - base) / per_unit))


# -- 1. step round trip -------------------------------------------------------------------------------------------
def _step_round_trips(
    sources: dict[str, str], pools: dict[str, WorkerPool], n: int, warmup: int, blocks: int
) -> dict[tuple[str, str], list[float]]:
    """Microseconds per ``step`` for every (env, mode): ``in-process`` or a level (``RemoteEnv.step``).

    The modes run in interleaved blocks, so that a noisy neighbour slows all of them alike and ratios stay fair.
    """
    steppers: dict[tuple[str, str], Callable[[int], Any]] = {}
    remotes: list[RemoteEnv] = []
    try:
        for name, source in sources.items():
            env = load_env_class(source)()
            env.reset(0)
            steppers[(name, "in-process")] = lambda i, env=env: env.step(ACTIONS[i % len(ACTIONS)])
            for level, pool in pools.items():
                remote = RemoteEnv(source, pool)
                remotes.append(remote)
                remote.reset(0)
                steppers[(name, level)] = lambda i, env=remote: env.step(ACTIONS[i % len(ACTIONS)])
        for pool in pools.values():
            _wait_pool_full(pool, 10.0)  # no worker starting in the background while timing
        samples: dict[tuple[str, str], list[float]] = {key: [] for key in steppers}
        per_block = max(1, n // blocks)
        for block in range(blocks):
            for key, step in steppers.items():
                count = per_block if block < blocks - 1 else n - per_block * (blocks - 1)
                samples[key] += _time_calls(step, count, warmup if block == 0 else min(warmup, 20))
        return samples
    finally:
        for remote in remotes:
            remote.close()


def _subprocess_steps(source: str, class_name: str, n: int) -> list[float]:
    """A fresh ``python -I -c`` per call that execs the env, resets it and takes one step (no isolation)."""
    code = (
        f"ns = {{}}\nexec(compile({source!r}, '<env>', 'exec'), ns)\nenv = ns[{class_name!r}]()\n"
        f"env.reset(0)\nprint(env.step({ACTIONS[0]!r})[1])\n"
    )
    cmd = [sys.executable, "-I", "-c", code]

    def one(_i: int) -> None:
        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stdin=subprocess.DEVNULL)

    return _time_calls(one, n, 1)


def _part_rows(level: str, pool: WorkerPool, sources: dict[str, str], settings: Settings) -> list[dict[str, Any]]:
    """One row per part of a step (both envs) and of an episode (the 50 us env), p50 each (sandbox_parts.py)."""
    rows = []
    for name, source in sources.items():
        remote = RemoteEnv(source, pool)
        try:
            remote.reset(0)
            with _no_gc():
                parts = step_parts(remote.worker, ACTIONS, settings.part_steps)
        finally:
            remote.close()
        rows += [_row(f"step part ({name} env): {part}", level, us) for part, us in parts.items()]
    parts = episode_parts(pool.config, level, sources["50us"], ACTIONS, settings.episode_steps, settings.episodes)
    rows += [_row(f"episode part: {part}", level, us) for part, us in parts.items()]
    return rows


# -- 2. env start -------------------------------------------------------------------------------------------------
def _cold_starts(config: SandboxConfig, level: str, source: str, n: int) -> tuple[list[float], list[float]]:
    """(start until ready, start + init) in microseconds for ``n`` fresh workers."""
    become_subreaper()
    ready, total = [], []
    for _ in range(n):
        t0 = time.perf_counter_ns()
        worker = Worker(config, level)
        t1 = time.perf_counter_ns()
        try:
            worker.call("init", timeout=config.start_timeout_s, source=source)
            t2 = time.perf_counter_ns()
        finally:
            worker.kill()
        ready.append((t1 - t0) / 1000.0)
        total.append((t2 - t0) / 1000.0)
    return ready, total


def _pooled_starts(pool: WorkerPool, source: str, n: int, wait_s: float) -> dict[str, Any]:
    """``RemoteEnv(source, pool)`` with a full pool before every start: the pre-started worker path."""
    starts, releases, empty = [], [], 0
    for _ in range(n):
        empty += not _wait_pool_full(pool, wait_s)
        with _no_gc():
            t0 = time.perf_counter_ns()
            env = RemoteEnv(source, pool)
            t1 = time.perf_counter_ns()
            env.close()
            t2 = time.perf_counter_ns()
        starts.append((t1 - t0) / 1000.0)
        releases.append((t2 - t1) / 1000.0)
    return {"starts": starts, "releases": releases, "pool_not_refilled": empty}


# -- 3. memory and 4. throughput ---------------------------------------------------------------------------------
def process_tree(pid: int) -> list[int]:
    """``pid`` and all its descendants (bwrap's outer and inner process, then python)."""
    pids, i = [pid], 0
    while i < len(pids):
        for children in Path(f"/proc/{pids[i]}/task").glob("*/children"):
            try:
                pids += [int(p) for p in children.read_text().split()]
            except OSError:
                pass
        i += 1
    return pids


def smaps_rollup(pid: int) -> dict[str, int]:
    """Rss, Pss and private (USS) bytes of one process from ``/proc/<pid>/smaps_rollup``."""
    out = {"rss": 0, "pss": 0, "uss": 0}
    try:
        text = Path(f"/proc/{pid}/smaps_rollup").read_text()
    except OSError:
        return out
    for line in text.splitlines():
        key, _, rest = line.partition(":")
        parts = rest.split()
        if not parts or not parts[0].isdigit():
            continue
        kib = int(parts[0]) * 1024
        if key == "Rss":
            out["rss"] += kib
        elif key == "Pss":
            out["pss"] += kib
        elif key in ("Private_Clean", "Private_Dirty"):
            out["uss"] += kib
    return out


def tree_memory(pid: int) -> dict[str, int]:
    """Memory of a worker's whole process tree, summed."""
    total = {"rss": 0, "pss": 0, "uss": 0, "processes": 0}
    for p in process_tree(pid):
        for key, value in smaps_rollup(p).items():
            total[key] += value
        total["processes"] += 1
    return total


def mem_available() -> int:
    for line in Path("/proc/meminfo").read_text().splitlines():
        if line.startswith("MemAvailable:"):
            return int(line.split()[1]) * 1024
    return 0


def _raise_fd_limit() -> None:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != hard:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))


def _live_envs(level: str, source: str, settings: Settings) -> list[dict[str, Any]]:
    """Start K live envs, measure their memory, then step them round-robin for a while."""
    k = settings.envs
    rows: list[dict[str, Any]] = []
    notes = []
    if 2 * k + 64 > 1024:  # Worker.call uses select(), which cannot watch fds >= FD_SETSIZE (1024)
        notes.append(f"K={k} needs fds past 1024, where select() fails; capped")
        k = (1024 - 64) // 2
    _raise_fd_limit()
    config = SandboxConfig(**{**settings.sandbox, "isolation": level, "pool_size": 2, "max_workers": k + 2})
    envs: list[RemoteEnv] = []
    margin = 2 * GIB
    with WorkerPool(config) as pool:
        try:
            for i in range(k):
                env = RemoteEnv(source, pool)
                envs.append(env)
                env.reset(i)
                for j in range(3):
                    env.step(ACTIONS[j])
                if i in (0, 9) or (i + 1) % 25 == 0:  # does the rest still fit? (one env's RSS as the estimate)
                    per_env = tree_memory(envs[0].worker.proc.pid)["rss"]
                    if mem_available() - (k - i - 1) * per_env < margin:
                        notes.append(f"stopped at {i + 1} envs: {k} would leave under 2 GiB available")
                        break
            _wait_pool_full(pool, 10.0)
            memories = [tree_memory(env.worker.proc.pid) for env in envs]
            live = len(envs)
            total = {key: sum(m[key] for m in memories) for key in ("rss", "pss", "uss", "processes")}
            pss_gib = total["pss"] / GIB
            extrapolated = pss_gib / live * 200
            rows.append(
                _row(
                    f"memory, {live} live envs",
                    level,
                    n=live,
                    rss_total_bytes=total["rss"],
                    pss_total_bytes=total["pss"],
                    uss_total_bytes=total["uss"],
                    rss_per_env_bytes=total["rss"] / live,
                    pss_per_env_bytes=total["pss"] / live,
                    uss_per_env_bytes=total["uss"] / live,
                    processes_per_env=total["processes"] / live,
                    pss_for_200_envs_gib=extrapolated,
                    result=f"PSS {_fmt_bytes(total['pss'] / live)}/env = {_fmt_bytes(total['pss'])}",
                    target=f"200 envs < {TARGET_MEMORY_GIB:g} GiB PSS",
                    met=extrapolated < TARGET_MEMORY_GIB,
                    notes="; ".join(
                        [f"RSS {_fmt_bytes(total['rss'] / live)}/env = {_fmt_bytes(total['rss'])}"]
                        + [f"USS {_fmt_bytes(total['uss'] / live)}/env"]
                        + ([] if live == 200 else [f"200 envs: {extrapolated:.2f} GiB PSS"])
                        + notes
                    ),
                )
            )
            rows.append(_throughput(envs, level, settings.throughput_s))
            rows.append(_throughput_batched(envs, level, settings.throughput_s))
            rows.append(_throughput_async(envs, pool, level, settings.throughput_s, dispatcher=True))
            rows.append(_throughput_async(envs, pool, level, settings.throughput_s, dispatcher=False))
        finally:
            for env in envs:
                env.close()
    return rows


def _throughput(envs: list[RemoteEnv], level: str, seconds: float) -> dict[str, Any]:
    for i, env in enumerate(envs):  # warm-up round
        env.step(ACTIONS[i % len(ACTIONS)])
    latencies: list[float] = []
    clock = time.perf_counter_ns
    turn = 0
    with _no_gc():
        start = clock()
        end = start + int(seconds * 1e9)
        while clock() < end:
            action = ACTIONS[turn % len(ACTIONS)]
            for env in envs:
                t0 = clock()
                env.step(action)
                latencies.append((clock() - t0) / 1000.0)
            turn += 1
        elapsed = (clock() - start) / 1e9
    rate = len(latencies) / elapsed
    return _row(
        f"throughput, {len(envs)} envs round-robin",
        level,
        latencies,
        steps_per_s=rate,
        seconds=elapsed,
        result=f"{rate:,.0f} steps/s",
        target=f">= {TARGET_STEPS_PER_S:,.0f} steps/s",
        met=rate >= TARGET_STEPS_PER_S,
        notes="1 host thread, maze env; p50/p99 per step",
    )


def _throughput_batched(envs: list[RemoteEnv], level: str, seconds: float) -> dict[str, Any]:
    """The same round-robin, each round one ``step_all`` over every env: all requests out, then the replies."""
    step_all(envs, [ACTIONS[0]] * len(envs))  # warm-up round
    rounds: list[float] = []
    clock = time.perf_counter_ns
    turn = 0
    with _no_gc():
        start = clock()
        end = start + int(seconds * 1e9)
        while clock() < end:
            t0 = clock()
            results = step_all(envs, [ACTIONS[turn % len(ACTIONS)]] * len(envs))
            rounds.append((clock() - t0) / 1000.0)
            turn += 1
        elapsed = (clock() - start) / 1e9
    failed = sum(isinstance(r, SandboxError) for r in results)
    rate = len(rounds) * len(envs) / elapsed
    return _row(
        f"throughput, {len(envs)} envs, step_all",
        level,
        rounds,
        steps_per_s=rate,
        seconds=elapsed,
        result=f"{rate:,.0f} steps/s",
        target=f">= {TARGET_STEPS_PER_S:,.0f} steps/s",
        met=rate >= TARGET_STEPS_PER_S and not failed,
        notes=f"1 host thread, maze env; p50/p99 per round of {len(envs)} steps"
        + (f"; {failed} failed" if failed else ""),
    )


def _throughput_async(
    envs: list[RemoteEnv], pool: WorkerPool, level: str, seconds: float, dispatcher: bool
) -> dict[str, Any]:
    """The same round-robin through the asyncio client the recipe's agent loops use: each round one ``gather``.

    ``dispatcher``: calls through the pool's I/O thread (the client's way); else one executor thread per call (the
    client's way before issue 39), for comparison in the same run.
    """
    clients = [AsyncSandboxEnv(env, pool.executor, pool.dispatcher if dispatcher else None) for env in envs]

    async def rounds() -> tuple[list[float], float]:
        await asyncio.gather(*(c.step(ACTIONS[0]) for c in clients))  # warm-up round (starts the threads)
        out: list[float] = []
        clock = time.perf_counter_ns
        start = clock()
        end, turn = start + int(seconds * 1e9), 0
        while clock() < end:
            t0 = clock()
            await asyncio.gather(*(c.step(ACTIONS[turn % len(ACTIONS)]) for c in clients))
            out.append((clock() - t0) / 1000.0)
            turn += 1
        return out, (clock() - start) / 1e9

    with _no_gc():
        samples, elapsed = asyncio.run(rounds())
    rate = len(samples) * len(envs) / elapsed
    return _row(
        f"throughput, {len(envs)} envs, AsyncSandboxEnv, {'I/O thread' if dispatcher else 'executor threads'}",
        level,
        samples,
        steps_per_s=rate,
        seconds=elapsed,
        result=f"{rate:,.0f} steps/s",
        notes=f"asyncio.gather{' (the recipe path)' if dispatcher else ''}; p50/p99 per round of {len(envs)}",
    )


# -- the whole run ------------------------------------------------------------------------------------------------
def _level_works(level: str) -> str | None:
    if level == "none":
        return None
    try:
        probe_isolation(SandboxConfig(isolation=level))
    except SandboxError as exc:
        return str(exc)[:200]
    return None


def machine_facts(probe_levels: bool = True) -> dict[str, Any]:
    facts: dict[str, Any] = {
        "nproc": len(os.sched_getaffinity(0)),
        "cpu_count": os.cpu_count(),
        "python": f"{platform.python_implementation()} {platform.python_version()} ({sys.executable})",
        "kernel": f"{platform.system()} {platform.release()} {platform.machine()}",
        "mem_total_gib": round(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / GIB, 1),
        "mem_available_gib": round(mem_available() / GIB, 1),
        "loadavg": os.getloadavg(),
        "euid": os.geteuid(),
    }
    bwrap = shutil.which("bwrap")
    if bwrap:
        result = subprocess.run([bwrap, "--version"], capture_output=True, text=True, check=False)
        facts["bwrap"] = result.stdout.strip() or result.stderr.strip()
    try:
        from spade_envs.sandbox.hardening import landlock_abi

        facts["landlock_abi"] = landlock_abi()
    except Exception as exc:  # pragma: no cover - informational only
        facts["landlock_abi"] = f"unknown ({exc})"
    if probe_levels:
        facts["isolation_levels"] = {level: _level_works(level) or "works" for level in ISOLATION_LEVELS}
        try:
            facts["default_level"] = probe_isolation(SandboxConfig())
        except SandboxError as exc:
            facts["default_level"] = f"none works: {exc}"
    return facts


def run(settings: Settings, log: Callable[[str], None] = lambda _msg: None) -> dict[str, Any]:
    """Run every benchmark; return ``{"machine", "settings", "rows"}`` (times in microseconds, sizes in bytes)."""
    report: dict[str, Any] = {"machine": machine_facts(settings.probe_levels), "settings": asdict(settings)}
    rows: list[dict[str, Any]] = []
    report["rows"] = rows
    work = calibrate_work(settings.step_work_us, settings.calibration_rounds)
    report["settings"]["maze_hash_work"] = work
    realistic = REALISTIC_SOURCE.replace("__WORK__", str(work))
    sources = {"trivial": TRIVIAL_SOURCE, "50us": realistic}

    usable = []
    for level in settings.levels:
        why = _level_works(level)
        if why is None:
            usable.append(level)
        else:
            rows.append(_row("(level unavailable)", level, notes=why))
    configs = {level: SandboxConfig(**{**settings.sandbox, "isolation": level, "pool_size": 2}) for level in usable}
    pools = {level: WorkerPool(config) for level, config in configs.items()}
    try:
        log(f"step round trip: in-process and {', '.join(usable) or 'no sandbox level'}, interleaved")
        steps = _step_round_trips(sources, pools, settings.steps, settings.warmup, settings.step_blocks)
        base = statistics.median(steps[("50us", "in-process")])
        for (name, mode), samples in steps.items():
            row = _row(f"step {name} env", mode, samples)
            if mode == "in-process":
                row["notes"] = "env.step() directly"
            else:
                row["notes"] = "RemoteEnv.step"
                if name == "trivial":
                    row.update(target=f"p50 <= {TARGET_STEP_US:g} us", met=row["p50_us"] <= TARGET_STEP_US)
                else:
                    ratio = row["p50_us"] / base
                    row.update(ratio=ratio, result=f"{ratio:.2f}x in-process", target=f"<= {TARGET_RATIO:g}x")
                    row["met"] = ratio <= TARGET_RATIO
            rows.append(row)
        for level, pool in pools.items():
            log(f"step parts and episode parts: {level}")
            rows.extend(_part_rows(level, pool, sources, settings))
        log("step round trip: a new process per call")
        samples = _subprocess_steps(realistic, "MazeEnv", settings.subprocess_calls)
        ratio = statistics.median(samples) / base
        rows.append(
            _row(
                "step 50us env",
                "new process/call",
                samples,
                ratio=ratio,
                result=f"{ratio:,.0f}x in-process",
                notes="python -I -c: exec+reset+1 step, no isolation",
            )
        )

        starts = _time_calls(lambda i: load_env_class(realistic)().reset(0), settings.cold_starts, 1)
        rows.append(_row("start", "in-process", starts, notes="compile+exec+construct+reset"))
        for level, pool in pools.items():
            log(f"env start: {level}, cold")
            ready, total = _cold_starts(pool.config, level, realistic, settings.cold_starts)
            rows.append(
                _row(
                    "start cold (start+init)",
                    level,
                    total,
                    ready_p50_us=statistics.median(ready),
                    result=f"ready p50 {_fmt_us(statistics.median(ready))}",
                    target=f"p50 <= {TARGET_COLD_MS:g} ms",
                    met=statistics.median(total) <= TARGET_COLD_MS * 1000,
                    notes="Worker(config, level) + init",
                )
            )
            log(f"env start: {level}, pooled")
            pooled = _pooled_starts(pool, realistic, settings.pooled_starts, settings.pooled_wait_s)
            rows.append(
                _row(
                    "start pooled",
                    level,
                    pooled["starts"],
                    release_p50_us=statistics.median(pooled["releases"]),
                    pool_not_refilled=pooled["pool_not_refilled"],
                    result=f"close p50 {_fmt_us(statistics.median(pooled['releases']))}",
                    target=f"p50 <= {TARGET_POOLED_MS:g} ms",
                    met=statistics.median(pooled["starts"]) <= TARGET_POOLED_MS * 1000,
                    notes=f"RemoteEnv(src, pool); pool refilled before each "
                    f"(missed {pooled['pool_not_refilled']}/{len(pooled['starts'])})",
                )
            )
    finally:
        for pool in pools.values():
            pool.shutdown()

    memory_level = settings.memory_level or report["machine"].get("default_level")
    if memory_level not in usable:
        memory_level = usable[0] if usable else None
    if memory_level and settings.envs > 0:
        log(f"memory and throughput: {settings.envs} live envs at {memory_level}")
        rows.extend(_live_envs(memory_level, realistic, settings))
    return report


# -- output --------------------------------------------------------------------------------------------------------
def _fmt_us(us: float | None) -> str:
    if us is None:
        return ""
    if us < 1000:
        return f"{us:.1f} us" if us < 100 else f"{us:.0f} us"
    if us < 1_000_000:
        return f"{us / 1000:.2f} ms"
    return f"{us / 1e6:.2f} s"


def _fmt_bytes(n: float) -> str:
    return f"{n / GIB:.2f} GiB" if n >= GIB else f"{n / MIB:.1f} MiB"


def format_table(report: dict[str, Any]) -> str:
    """Machine facts, then one aligned table of every row."""
    lines = [f"{key}: {value}" for key, value in report["machine"].items()]
    lines += ["", "reference: main at 311d5ce, before the host-boundary work (issue 31's figures, load ~2):"]
    lines += [f"  {key}: {value}" for key, value in REFERENCE_311D5CE.items()]
    header = ("benchmark", "level", "n", "p50", "p99", "result", "target", "notes")
    table = [header]
    for row in report["rows"]:
        met = row.get("met")
        target = row.get("target", "")
        if target:
            target = f"{target} [{'ok' if met else 'MISS'}]"
        table.append(
            (
                row["benchmark"],
                row["level"],
                str(row["n"] or ""),
                _fmt_us(row.get("p50_us")),
                _fmt_us(row.get("p99_us")),
                row.get("result", ""),
                target,
                row.get("notes", ""),
            )
        )
    widths = [max(len(r[i]) for r in table) for i in range(len(header))]
    right = {2, 3, 4}
    lines.append("")
    for j, r in enumerate(table):
        cells = [c.rjust(w) if i in right else c.ljust(w) for i, (c, w) in enumerate(zip(r, widths))]
        lines.append("  ".join(cells).rstrip())
        if j == 0:
            lines.append("  ".join("-" * w for w in widths))
    return "\n".join(lines)


def main(argv: Iterable[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="500 steps, 40 live envs, fewer starts")
    parser.add_argument("--levels", nargs="+", default=["bwrap", "landlock"], choices=ISOLATION_LEVELS)
    parser.add_argument("--steps", type=int, help="step round trips per env and level (default 5000; quick 500)")
    parser.add_argument("--envs", type=int, help="K live envs for memory and throughput (default 200; quick 40)")
    parser.add_argument("--memory-level", choices=ISOLATION_LEVELS, help="level of the K live envs (default: auto)")
    parser.add_argument("--cpus", type=int, nargs="+", help="pin this process and its workers to these CPUs")
    parser.add_argument("--json", metavar="PATH", help="also save the report as JSON")
    parser.add_argument("--set", metavar="FIELD=VALUE", nargs="+", default=[],
                        help="SandboxConfig fields for every pool, e.g. request_spin_us=0 (A/B runs)")  # fmt: skip
    args = parser.parse_args(list(argv) if argv is not None else None)
    sandbox = {}
    for item in args.set:
        name, sep, value = item.partition("=")
        if not sep:
            parser.error(f"--set takes FIELD=VALUE, got {item!r}")
        sandbox[name] = json.loads(value) if value not in ("", "auto") else value
    try:
        SandboxConfig.from_dict(sandbox)  # unknown fields and bad values fail here, naming the known ones
    except (TypeError, ValueError) as exc:
        parser.error(f"--set: {exc}")
    overrides: dict[str, Any] = {"levels": tuple(args.levels), "memory_level": args.memory_level, "sandbox": sandbox}
    if args.steps:
        overrides["steps"] = args.steps
    if args.envs is not None:
        overrides["envs"] = args.envs
    settings = Settings.quick(**overrides) if args.quick else Settings(**overrides)
    if args.cpus:
        os.sched_setaffinity(0, set(args.cpus))
        settings.extra["cpus"] = args.cpus
    started = time.monotonic()
    report = run(settings, log=lambda msg: print(f"[{time.monotonic() - started:6.1f} s] {msg}", file=sys.stderr))
    report["elapsed_s"] = round(time.monotonic() - started, 1)
    report["machine"]["loadavg_end"] = os.getloadavg()
    print(format_table(report), flush=True)
    print(f"\ntotal time: {report['elapsed_s']} s")
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=2, default=str) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
