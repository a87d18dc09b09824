"""Attacks on the *host side* of the sandbox (issue 18): one program per finding, at both untrusted levels.

``test_attacks.py`` shows that reads, writes, network and neighbours are contained. These programs aim at the host
itself: crashing it with replies it cannot handle, hanging it, growing its memory, or leaving things behind. Each
asserts the host's behaviour: a typed error with its failure code (or the correct result), bounded wall time and
host memory, and afterwards no leftover worker process, scratch file, SysV IPC object or pool slot.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from spade_envs.sandbox import (
    EnvRaised,
    EnvTimeout,
    OutputTooLarge,
    ProtocolViolation,
    RemoteEnv,
    SandboxConfig,
    SandboxError,
    WorkerPool,
)
from spade_envs.sandbox.process import Worker
from spade_envs.sandbox.replies import MAX_TURNS

LEVELS = ("bwrap", "landlock")
CALL_TIMEOUT_S, SOFT_TIMEOUT_S, EPISODE_WALL_S = 3.0, 1.0, 5.0
CONFIG = {
    "call_timeout_s": CALL_TIMEOUT_S,
    "soft_timeout_s": SOFT_TIMEOUT_S,
    "episode_wall_s": EPISODE_WALL_S,
    "start_timeout_s": 10,
    "episode_cpu_s": 20,
    "memory_mb": 512,
    "pool_size": 1,
    "max_workers": 3,
    "max_episode_reply_bytes": 1 << 20,
    "scratch_mb": 16,
    "scratch_files": 256,
    "preload_numpy": False,
}
MIB = 1 << 20


@pytest.fixture(scope="module", params=LEVELS)
def pool(request: pytest.FixtureRequest, procs: Any):
    pool = WorkerPool(SandboxConfig(isolation=request.param, **CONFIG))
    try:
        assert pool.level == request.param
        yield pool
    finally:
        pool.shutdown()
    procs.assert_no_workers_left()


def _rss() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    return 0


def _sysv_objects() -> set[str]:
    found = set()
    for kind in ("shm", "msg", "sem"):
        try:
            lines = Path(f"/proc/sysvipc/{kind}").read_text().splitlines()[1:]
        except OSError:
            continue
        found |= {f"{kind} {line.split()[1]}" for line in lines if line.split()}
    return found


@dataclass
class Outcome:
    level: str
    worker: Worker
    result: Any = None
    error: SandboxError | None = None
    elapsed: float = 0.0
    rss_growth: int = 0


@dataclass
class Finding:
    """One finding of the review: the env program, how the host drives it, and what the host must do."""

    name: str
    source: str
    drive: Callable[[RemoteEnv], Any]
    check: Callable[[Outcome], None]
    max_s: float = CALL_TIMEOUT_S + 2


def expect(kind: type[SandboxError], *codes: str, alive: bool | None = None) -> Callable[[Outcome], None]:
    def check(out: Outcome) -> None:
        assert isinstance(out.error, kind), f"expected {kind.__name__}{codes}, got {out.error!r} / {out.result!r}"
        assert not codes or out.error.code in codes, f"code {out.error.code!r}, expected {codes}"

    return check


def returned(predicate: Callable[[Outcome], object], what: str) -> Callable[[Outcome], None]:
    def check(out: Outcome) -> None:
        assert out.error is None, f"expected {what}, got {out.error!r}"
        assert predicate(out), f"expected {what}, got {out.result!r}"

    return check


GAME = """
class AttackEnv:
    max_turns = 5

    def reset(self, seed=None):
        return "ready", {}

    def step(self, action):
        return "ok", 0.0, False, False, {}

    def solution(self):
        return ["x"]
"""


def forged(target_seq: int, line: str) -> str:
    """Env code that replaces the worker's reply to request ``target_seq`` by ``line`` (init is 1, the next 2)."""
    return (
        "import sys\n"
        "_protocol = sys.modules['spade_envs.sandbox.protocol']\n"
        "_encode = _protocol.encode\n"
        f"def _forge(message):\n"
        f"    if message.get('seq') == {target_seq}:\n"
        f"        return {line!r}.encode() + b'\\n'\n"
        "    return _encode(message)\n"
        "_protocol.encode = _forge\n" + GAME
    )


def _steps(n: int, action: str = "x") -> Callable[[RemoteEnv], Any]:
    def drive(env: RemoteEnv) -> Any:
        env.reset(0)
        for _ in range(n):
            env.step(action)
        return n

    return drive


def _turn_caps(env: RemoteEnv) -> Any:
    declared = env.max_turns
    env.reset(0)
    return declared, env.max_turns, len(range(env.max_turns))


def _report(env: RemoteEnv) -> dict[str, str]:
    obs = env.step("go")[0] if env.reset(0)[0] == "ready" else ""
    return dict(line.split(": ", 1) for line in obs.splitlines() if ": " in line)


def _all_blocked(*labels: str) -> Callable[[Outcome], None]:
    def check(out: Outcome) -> None:
        assert out.error is None, repr(out.error)
        for label in labels:
            assert out.result.get(label, "missing").startswith("blocked"), (label, out.result)

    return check


ATTEMPT = """
import ctypes, errno, os, time

libc = ctypes.CDLL(None, use_errno=True)


def attempt(label, fn, *args):
    try:
        return f"{label}: SUCCEEDED {fn(*args)!r}"[:300]
    except Exception as exc:
        return f"{label}: blocked {type(exc).__name__}: {exc}"[:300]


def checked(ret):
    if ret == -1:
        raise OSError(ctypes.get_errno(), os.strerror(ctypes.get_errno()))
    return ret


class AttackEnv:
    max_turns = 5

    def reset(self, seed=None):
        return "ready", {}

    def solution(self):
        return ["x"]

    def step(self, action):
        return "\\n".join(self.attack()), 0.0, False, False, {}
"""


def attack_env(body: str) -> str:
    return ATTEMPT + "\n    def attack(self):\n" + "\n".join("        " + line for line in body.strip().splitlines())


def _stat_exposure_is_the_documented_one(out: Outcome) -> None:
    """docs/sandbox.md, known limits: Landlock cannot hide metadata (contents stay unreadable); bwrap hides both."""
    assert out.error is None, repr(out.error)
    lines = out.result
    assert lines["read host file"].startswith("blocked"), lines
    if out.level == "bwrap":
        assert lines["stat host file"].startswith("blocked FileNotFoundError"), lines
        assert lines["host pids"] == "SUCCEEDED False", lines
    else:
        assert lines["stat host file"].startswith("SUCCEEDED"), lines  # the known limit, pinned
        assert lines["host pids"] == "SUCCEEDED True", lines


FINDINGS = [
    # -- host crashes ------------------------------------------------------------------------------------------
    Finding(
        "max_turns_2_pow_63",
        GAME.replace("max_turns = 5", "max_turns = 2**63").replace(
            'return "ready", {}', 'self.max_turns = 10**30\n        return "ready", {}'
        ),
        _turn_caps,
        returned(lambda out: out.result == (MAX_TURNS, MAX_TURNS, MAX_TURNS), "max_turns clamped to an int"),
    ),
    Finding(
        "deep_directory_chain_in_scratch",
        GAME.replace(
            'return "ready", {}',
            "import os\n        depth = 0\n        try:\n            while depth < 3000:\n"
            '                os.mkdir("d")\n                os.chdir("d")\n                depth += 1\n'
            '            os.mkdir("locked", 0)\n        except OSError:\n            pass\n'
            '        return f"depth {depth}", {}',
        ),
        lambda env: env.reset(0),
        returned(lambda out: out.result[0].startswith("depth "), "a normal reset"),
        max_s=20,
    ),
    Finding(
        "forged_deeply_nested_reply",
        forged(2, '{"seq":2,"ok":true,"result":' + "[" * 100_000 + "]" * 100_000 + "}"),
        lambda env: env.reset(0),
        expect(ProtocolViolation, "garbled_reply"),
    ),
    Finding(
        "forged_400_digit_reward",
        forged(3, '{"seq":3,"ok":true,"result":["won",1' + "0" * 400 + ",true,false,{}]}"),
        _steps(1),
        expect(ProtocolViolation, "garbled_reply"),
    ),
    Finding(
        "forged_1e999_reward",
        forged(3, '{"seq":3,"ok":true,"result":["won",1e999,true,false,{}]}'),
        _steps(1),
        expect(ProtocolViolation, "garbled_reply"),
    ),
    Finding(
        "forged_reset_of_the_wrong_shape",
        forged(2, '{"seq":2,"ok":true,"result":"not a pair"}'),
        lambda env: env.reset(0),
        expect(ProtocolViolation, "invalid_result"),
    ),
    Finding(
        "forged_tools_schema",
        forged(2, '{"seq":2,"ok":true,"result":["not a schema"]}'),
        lambda env: env.tools(),
        expect(ProtocolViolation, "invalid_result"),
    ),
    Finding(
        "forged_observation_over_the_cap",
        forged(3, '{"seq":3,"ok":true,"result":["' + "x" * 70_000 + '",0.0,false,false,{}]}'),
        _steps(1),
        expect(ProtocolViolation, "garbled_reply"),
    ),
    Finding(
        "forged_lone_surrogate",
        forged(3, '{"seq":3,"ok":true,"result":["\\ud800",0.0,false,false,{}]}'),
        _steps(1),
        expect(ProtocolViolation, "garbled_reply"),
    ),
    Finding(
        "lone_surrogate_observation",
        GAME.replace('return "ok", 0.0', 'return "\\ud800", 0.0'),
        _steps(1),
        expect(EnvRaised, "bad_types"),
    ),
    Finding(
        "tools_returning_junk",
        GAME + '\n    def tools(self):\n        return ["not a schema"]\n',
        lambda env: env.tools(),
        expect(EnvRaised, "bad_types"),
    ),
    Finding(
        "huge_int_reward",
        GAME.replace('return "ok", 0.0', 'return "ok", 10**400'),
        _steps(1),
        lambda out: expect(OutputTooLarge)(out) if isinstance(out.error, OutputTooLarge) else expect(EnvRaised)(out),
    ),
    # -- host hangs and unbounded host resources ---------------------------------------------------------------
    Finding(
        "stop_reading_requests",
        GAME.replace(
            'return "ok", 0.0, False, False, {}',
            """import fcntl, sys, time
        frame = sys._getframe()
        while type(frame.f_locals.get("self")).__name__ != "_Server":
            frame = frame.f_back
        server = frame.f_locals["self"]
        fcntl.fcntl(server.reader.fileno(), 1031, 4096)  # F_SETPIPE_SZ: the request pipe holds 4 KiB now

        class Stuck:
            def readline(self, limit):
                while True:
                    try:
                        time.sleep(3600)
                    except BaseException:
                        pass

        self.pipe = server.reader  # keep the request pipe open: the host must not see EPIPE, only a full pipe
        server.reader = Stuck()
        return "ok", 0.0, False, False, {}""",
        ),
        lambda env: (env.reset(0), env.step("x"), env.step("y" * 200_000)),
        expect(EnvTimeout, "write_timeout"),
    ),
    Finding(
        "sleep_just_under_the_soft_timeout_forever",
        GAME.replace("max_turns = 5", "max_turns = 10**12").replace(
            'return "ok", 0.0', f'import time\n        time.sleep({SOFT_TIMEOUT_S * 0.8})\n        return "ok", 0.0'
        ),
        lambda env: _steps(10**6)(env),
        expect(EnvTimeout, "episode_wall_budget"),
        max_s=EPISODE_WALL_S + CALL_TIMEOUT_S + 2,
    ),
    Finding(
        "thousands_of_large_observations",
        GAME.replace("max_turns = 5", "max_turns = 10**12").replace('return "ok", 0.0', 'return "x" * 60000, 0.0'),
        _steps(2000),
        expect(OutputTooLarge, "episode_output_budget"),
        max_s=20,
    ),
    Finding(  # issue 24, finding 5: only observations counted; a fat info cost the host ~0.3 s of CPU per step
        "fat_info_replies",
        GAME.replace("max_turns = 5", "max_turns = 10**12").replace(
            'return "ok", 0.0, False, False, {}', 'return "ok", 0.0, False, False, {"pad": ["x" * 60_000] * 2}'
        ),
        _steps(2000),
        expect(OutputTooLarge, "episode_output_budget"),
        max_s=10,
    ),
    # -- bounded worker resources ------------------------------------------------------------------------------
    Finding(
        "write_host_ram_under_dev",
        attack_env("""
def write(path):
    with open(path, "wb") as f:
        f.write(b"x" * (1 << 20))
    return path
return [attempt("/dev/shm", write, "/dev/shm/spade_attack"), attempt("/dev", write, "/dev/spade_attack"),
        attempt("/run/shm", write, "/run/shm/spade_attack")]
"""),
        _report,
        _all_blocked("/dev/shm", "/dev", "/run/shm"),
    ),
    Finding(
        "fill_scratch_with_bytes_and_files",
        attack_env("""
def fill(size, limit):
    n = 0
    try:
        while n < limit:
            with open(f"f{n}_{size}", "wb") as f:
                f.write(b"x" * size)
            n += 1
    except OSError as exc:
        return f"stopped after {n} files of {size} bytes: {exc}"
    return f"wrote {n} files of {size} bytes"
return ["big: " + fill(8 << 20, 200), "empty: " + fill(0, 20000)]
"""),
        _report,
        lambda out: _scratch_quota_held(out),
        max_s=CALL_TIMEOUT_S + 2,
    ),
    Finding(
        "thousands_of_raw_clone_threads",
        attack_env("""
stacks, started, error = [], 0, "none"
flags = 0x100 | 0x200 | 0x400 | 0x800 | 0x10000 | 0x40000  # VM FS FILES SIGHAND THREAD SYSVSEM
fn = ctypes.cast(libc.pause, ctypes.c_void_p)
for _ in range(5000):
    stack = ctypes.create_string_buffer(16384)
    top = ctypes.c_void_p((ctypes.addressof(stack) + 16384) & ~15)
    if libc.clone(fn, top, flags, None) == -1:
        error = os.strerror(ctypes.get_errno())
        break
    stacks.append(stack)
    started += 1
self.stacks = stacks
return [f"threads: started {started}, then {error}"]
"""),
        _report,
        lambda out: _threads_capped(out),
    ),
    Finding(
        "stat_host_paths",
        attack_env(f"""
host_file = {str(Path(__file__).resolve())!r}
return [attempt("stat host file", lambda: os.stat(host_file).st_size > 0),
        attempt("read host file", lambda: len(open(host_file).read())),
        attempt("host pids", lambda: os.path.exists("/proc/{os.getpid()}"))]
"""),
        _report,
        _stat_exposure_is_the_documented_one,
    ),
    Finding(
        "sysv_and_posix_ipc_objects",
        attack_env("""
return [
    attempt("shmget", lambda: checked(libc.shmget(0, 1 << 20, 0o1666))),
    attempt("msgget", lambda: checked(libc.msgget(0, 0o1666))),
    attempt("semget", lambda: checked(libc.semget(0, 1, 0o1666))),
    attempt("mq_open", lambda: checked(libc.mq_open(b"/spade_attack", 0o102, 0o666, None))),
]
"""),
        _report,
        _all_blocked("shmget", "msgget", "semget", "mq_open"),
    ),
]


def _scratch_quota_held(out: Outcome) -> None:
    assert out.error is None, repr(out.error)
    big, empty = out.result["big"], out.result["empty"]
    config = SandboxConfig(**CONFIG)
    limited_bytes = out.worker._scratch.mounted or out.level == "bwrap"
    if limited_bytes:
        assert big.startswith("stopped") and "No space left" in big, big
        assert int(big.split()[2]) * 8 <= config.scratch_mb, big
    if out.worker._scratch.mounted:  # the file count needs the host's tmpfs (docs/sandbox.md, known limits)
        assert empty.startswith("stopped") and int(empty.split()[2]) <= config.scratch_files, empty


def _threads_capped(out: Outcome) -> None:
    assert out.error is None, repr(out.error)
    line = out.result["threads"]
    started = int(line.split()[1].rstrip(","))
    assert started < SandboxConfig(**CONFIG).processes, line


@pytest.mark.parametrize("finding", FINDINGS, ids=lambda f: f.name)
def test_the_host_survives(finding: Finding, pool: WorkerPool, procs: Any) -> None:
    ipc_before = _sysv_objects()
    workers: list[Worker] = []
    acquire = pool.acquire

    def spy(timeout: float | None = None) -> Worker:
        workers.append(acquire(timeout))
        return workers[-1]

    pool.acquire = spy  # type: ignore[method-assign]
    rss, started = _rss(), time.monotonic()
    env, out = None, None
    try:
        try:
            env = RemoteEnv(finding.source, pool)
            out = Outcome(pool.level, workers[0], result=finding.drive(env))
        except SandboxError as exc:
            out = Outcome(pool.level, workers[0], error=exc)
        out.elapsed, out.rss_growth = time.monotonic() - started, _rss() - rss
    finally:
        del pool.acquire
        if env is not None:
            env.close()
        elif workers:
            pool.release(workers[0])
    finding.check(out)
    assert out.elapsed < finding.max_s, f"took {out.elapsed:.1f} s"
    assert out.rss_growth < 64 * MIB, f"host memory grew by {out.rss_growth / MIB:.0f} MiB"
    procs.assert_gone(procs.tree(out.worker.proc.pid) | {out.worker.proc.pid})
    assert not os.path.exists(out.worker.scratch), "the scratch dir outlived its worker"
    assert pool.live_count == 0 and pool._slots.free == pool.config.max_workers, "a pool slot leaked"
    assert _sysv_objects() <= ipc_before, "IPC objects outlived the worker"


def test_forged_init_replies_leak_no_slot(pool: WorkerPool) -> None:
    """Two malformed ``init`` results used to leak their worker and slot; with max_workers slots, acquire hung."""
    source = forged(1, '{"seq":1,"ok":true,"result":["X","games",5]}')
    for _ in range(pool.config.max_workers + 2):
        with pytest.raises(ProtocolViolation) as info:
            RemoteEnv(source, pool)
        assert info.value.code == "invalid_result"
    env = RemoteEnv(GAME, pool)
    try:
        assert env.reset(0)[0] == "ready"
    finally:
        env.close()
    assert pool.live_count == 0 and pool._slots.free == pool.config.max_workers


def test_there_is_an_attack_per_finding() -> None:
    assert len(FINDINGS) >= 18 and len({f.name for f in FINDINGS}) == len(FINDINGS)


HOST_SCRIPT = """
import json, sys, time
from spade_envs.sandbox import RemoteEnv, SandboxConfig, WorkerPool

pool = WorkerPool(SandboxConfig(isolation=sys.argv[1], pool_size=0, preload_numpy=False, call_timeout_s=120,
                                soft_timeout_s=60))
env = RemoteEnv(sys.stdin.read(), pool)
print(json.dumps({"pid": env.worker.proc.pid, "scratch": env.worker.scratch}), flush=True)
env.reset(0)  # never returns: the env sleeps, ignoring every signal it can
"""

UNDYING = GAME.replace(
    'return "ready", {}',
    """import ctypes, signal, time
        ctypes.CDLL(None).prctl(1, 0, 0, 0, 0)  # PR_SET_PDEATHSIG 0: clear the parent-death signal (issue 24, 6)
        for sig in (signal.SIGALRM, signal.SIGTERM, signal.SIGHUP, signal.SIGINT, signal.SIGPIPE):
            signal.signal(sig, signal.SIG_IGN)
        while True:
            try:
                time.sleep(3600)
            except BaseException:
                pass""",
)


@pytest.mark.parametrize("level", LEVELS)
def test_workers_die_with_a_killed_host_and_the_next_pool_removes_their_scratch(level: str, procs: Any) -> None:
    import json
    import signal
    import subprocess
    import sys

    host = subprocess.Popen(
        [sys.executable, "-c", HOST_SCRIPT, level], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    try:
        host.stdin.write(UNDYING)
        host.stdin.close()
        started = json.loads(host.stdout.readline())
        pids = procs.tree(started["pid"]) | {started["pid"]}
        time.sleep(0.5)  # the worker is inside reset now
        assert procs.alive(pids)
    finally:
        host.send_signal(signal.SIGKILL)
        host.wait()
        host.stdout.close()
    procs.assert_gone(pids, grace=5.0)
    with WorkerPool(SandboxConfig(isolation=level, pool_size=0, preload_numpy=False)):
        assert not os.path.exists(started["scratch"]), "a killed host's scratch survived the next pool's start"
