"""Adversarial environments: each attack must be contained, and neither the host nor a neighbouring worker harmed.

Every attack is a small env program (class ``AttackEnv``) whose malicious code runs at import time, in ``reset``
or in ``step``. It runs at the two isolation levels meant for untrusted code: ``bwrap`` and ``landlock`` (the
fallback where user namespaces are blocked). A level that does not work here fails the tests; it never skips.

Each test asserts the typed error the client raises where that is deterministic, or, for attacks that the
sandbox defeats by making a syscall fail, what the env itself saw (its observation lists each attempt as
``label: blocked <error>`` or ``label: SUCCEEDED <result>``). After every attack, whatever its outcome:

* the attack worker's processes are gone once the env is closed;
* canary files (world-writable, in 0777 directories, one hidden from the sandbox and one visible read-only
  inside it) are unchanged, and no file named with the attack marker appeared anywhere the host looks;
* TCP, UDP, unix-path and abstract-unix listeners on the host received nothing;
* a host sentinel process is alive, and the neighbour (a second env from the same pool) still answers ``step``
  with its scratch state intact.

After each pool shuts down, no process running the worker script remains (the test run's descendants are checked:
orphans are re-parented to the pool's process, a subreaper).
"""

from __future__ import annotations

import ast
import json
import math
import os
import select
import shutil
import socket
import subprocess
import sys
import tempfile
import textwrap
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

import spade_envs
from spade_envs.sandbox import (
    EnvCrashed,
    EnvRaised,
    EnvTimeout,
    OutputTooLarge,
    ProtocolViolation,
    RemoteEnv,
    SandboxConfig,
    SandboxError,
    WorkerPool,
)
from spade_envs.sandbox.process import Worker, _read_only_paths
from spade_envs.sandbox.worker import WORKER_ENV_KEYS

LEVELS = ("bwrap", "landlock")
CALL_TIMEOUT_S, SOFT_TIMEOUT_S = 3.0, 1.0
CONFIG = {
    "call_timeout_s": CALL_TIMEOUT_S,
    "soft_timeout_s": SOFT_TIMEOUT_S,
    "start_timeout_s": 10,
    "episode_cpu_s": 10,
    "memory_mb": 512,
    "pool_size": 2,
    # small file and scratch caps: the attack that hits them writes a few MiB, not 50 (it must finish inside the
    # 1 s soft timeout on a loaded CI machine; at 16/32 MiB it once took 1.3 s at load 18)
    "file_size_mb": 4,
    "scratch_mb": 8,
}
#: The repository root: bound read-only into every worker (the worker imports the contract from it).
REPO_ROOT = str(Path(spade_envs.__file__).resolve().parents[1])
TOKEN = uuid.uuid4().hex[:12]
FILE_SECRET = f"file-secret-{TOKEN}"
ENV_SECRET = f"env-secret-{TOKEN}"
ENV_SECRET_NAME = "SPADE_SANDBOX_TEST_SECRET"
MARK = f"spade_pwned_{TOKEN}"
CANARY_TEXT = f"canary {TOKEN}\n"
#: Places where a successful escape would leave a file named with ``MARK``.
MARK_DIRS = ["/tmp", "/var/tmp", "/dev/shm", "/", "/root", REPO_ROOT, os.getcwd(), sys.prefix]
MARK_DIRS.append(os.path.dirname(os.__file__))


# -- the host: secrets, canaries, listeners and a sentinel process that attacks aim at --------------------------
class Host:
    """Everything on the host an attack might reach; :meth:`assert_unharmed` checks that none of it was."""

    def __init__(self) -> None:
        self.plant()
        self.sock_dir = tempfile.mkdtemp(prefix="spade-attack-sock-")
        self.tcp = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.tcp.bind(("127.0.0.1", 0))
        self.tcp.listen(8)
        self.udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.udp.bind(("127.0.0.1", 0))
        self.unix_path = os.path.join(self.sock_dir, "listener.sock")
        self.unix = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.unix.bind(self.unix_path)
        os.chmod(self.sock_dir, 0o777)
        os.chmod(self.unix_path, 0o777)
        self.unix.listen(8)
        self.abstract_name = f"spade-attack-{TOKEN}"
        self.abstract = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.abstract.bind("\0" + self.abstract_name)
        self.abstract.listen(8)
        self.listeners = {"tcp": self.tcp, "udp": self.udp, "unix": self.unix, "abstract unix": self.abstract}
        # A host process that attacks try to kill; its environment holds the secret, its argv a marker.
        self.sentinel_arg = f"3600.{int(TOKEN[:6], 16)}"
        self.sentinel = subprocess.Popen(["sleep", self.sentinel_arg])

    def plant(self) -> None:
        """Create the secrets and canaries afresh, and remember their state."""
        self.secret_dir = tempfile.mkdtemp(prefix="spade-attack-secret-")  # 0700, owned by the test's user
        self.tmp_secret = os.path.join(self.secret_dir, "secret.txt")
        self.tmp_canary_dir = tempfile.mkdtemp(prefix="spade-attack-canary-")  # hidden from the sandbox
        self.repo_dir = tempfile.mkdtemp(prefix=".spade-attack-", dir=REPO_ROOT)  # visible to it, read-only
        self.repo_secret = os.path.join(self.repo_dir, "secret.txt")
        for directory in (self.tmp_canary_dir, self.repo_dir):
            os.chmod(directory, 0o777)  # anyone may create and delete here: only the sandbox stands in the way
            canary = os.path.join(directory, "canary.txt")
            Path(canary).write_text(CANARY_TEXT)
            os.chmod(canary, 0o666)  # anyone may write it, too
        for secret in (self.tmp_secret, self.repo_secret):
            Path(secret).write_text(FILE_SECRET)
            os.chmod(secret, 0o600)
        self.baseline = self.snapshot()

    def snapshot(self) -> dict[str, Any]:
        state: dict[str, Any] = {}
        for directory in (self.tmp_canary_dir, self.repo_dir, self.secret_dir):
            state[directory] = sorted(os.listdir(directory)) if os.path.isdir(directory) else "missing"
        for path in (self.tmp_secret, self.repo_secret, *self.canaries):
            try:
                st = os.stat(path)
                xattrs = sorted(os.listxattr(path))
            except OSError as exc:
                state[path] = repr(exc)
                continue
            state[path] = (Path(path).read_text(), st.st_mode, st.st_uid, st.st_mtime_ns, st.st_nlink, xattrs)
        return state

    @property
    def canaries(self) -> list[str]:
        return [os.path.join(self.tmp_canary_dir, "canary.txt"), os.path.join(self.repo_dir, "canary.txt")]

    def ctx(self, neighbour: RemoteEnv, procs: Any) -> dict[str, Any]:
        """What the attack env is told about its targets (paths and pids, never the secrets themselves)."""
        shell_targets = [os.path.join(d, MARK + "_sh") for d in (self.tmp_canary_dir, self.repo_dir, "/tmp")]
        return {
            "tmp_secret": self.tmp_secret,
            "repo_secret": self.repo_secret,
            "tmp_canary_dir": self.tmp_canary_dir,
            "repo_canary_dir": self.repo_dir,
            "repo_root": REPO_ROOT,
            "tcp_port": self.tcp.getsockname()[1],
            "udp_port": self.udp.getsockname()[1],
            "unix_path": self.unix_path,
            "abstract_name": self.abstract_name,
            "host_pid": os.getpid(),
            "sentinel_pid": self.sentinel.pid,
            "neighbour_pids": sorted(procs.tree(neighbour.worker.proc.pid)),
            "neighbour_scratch": neighbour.worker.scratch,
            "mark": MARK,
            "shell": f"touch {' '.join(shell_targets)}; kill -9 {self.sentinel.pid} {os.getpid()}",
        }

    def assert_unharmed(self) -> None:
        """Fail if anything on the host changed; repair it first, so that one escape does not fail later tests."""
        harm = []
        if self.sentinel.poll() is not None:
            harm.append(f"the host sentinel process died ({self.sentinel.returncode})")
            self.sentinel = subprocess.Popen(["sleep", self.sentinel_arg])
        now = self.snapshot()
        changed = {k: (self.baseline[k], now[k]) for k in self.baseline if now[k] != self.baseline[k]}
        if changed:
            harm.append(f"canary or secret files changed (before, after): {changed}")
        planted = []
        for directory in [*MARK_DIRS, self.tmp_canary_dir, self.repo_dir, os.path.dirname(self.repo_dir)]:
            try:
                planted += [os.path.join(directory, n) for n in os.listdir(directory) if MARK in n]
            except OSError:
                continue
        if planted:
            harm.append(f"the attack created files on the host: {planted}")
        for name, listener in self.listeners.items():
            if select.select([listener], [], [], 0)[0]:
                harm.append(f"the host's {name} listener was reached")
                if listener.type == socket.SOCK_DGRAM:
                    listener.recv(65536)
                else:
                    listener.accept()[0].close()
        if os.environ.get(ENV_SECRET_NAME) != ENV_SECRET:
            harm.append("the host's environment changed")
        if harm:
            for path in planted:
                if os.path.isdir(path) and not os.path.islink(path):
                    shutil.rmtree(path, ignore_errors=True)
                else:
                    os.remove(path)
            self.remove_planted()
            self.plant()
            pytest.fail("the attack harmed the host: " + "; ".join(harm))

    def remove_planted(self) -> None:
        for directory in (self.secret_dir, self.tmp_canary_dir, self.repo_dir):
            for path in (directory, directory + "_" + MARK):  # an attack may have renamed it
                if os.path.isdir(path):
                    os.chmod(path, 0o700)
                    shutil.rmtree(path, ignore_errors=True)

    def close(self) -> None:
        self.sentinel.kill()
        self.sentinel.wait()
        for listener in self.listeners.values():
            listener.close()
        self.remove_planted()
        shutil.rmtree(self.sock_dir, ignore_errors=True)


@pytest.fixture(scope="module")
def host() -> Iterator[Host]:
    old = os.environ.get(ENV_SECRET_NAME)
    os.environ[ENV_SECRET_NAME] = ENV_SECRET  # set before any pool starts: no worker may see it
    host = Host()
    yield host
    host.close()
    if old is None:
        del os.environ[ENV_SECRET_NAME]
    else:
        os.environ[ENV_SECRET_NAME] = old


# -- the neighbour: a benign env in the same pool whose state the attacks try to damage -------------------------
NEIGHBOUR_SOURCE = """
import os


class NeighbourEnv:
    max_turns = 1000

    def reset(self, seed=None):
        self.steps = 0
        with open("neighbour_state.txt", "w") as f:
            f.write("intact")
        return "neighbour ready", {}

    def step(self, action):
        self.steps += 1
        with open("neighbour_state.txt") as f:
            state = f.read()
        return f"neighbour step {self.steps}: {state}", 0.0, False, False, {}

    def solution(self):
        return []
"""


class Neighbour:
    """A second env of the pool; it must answer every check with its own step count and intact state."""

    def __init__(self, pool: WorkerPool) -> None:
        self.pool = pool
        self.start()

    def start(self) -> None:
        self.env = RemoteEnv(NEIGHBOUR_SOURCE, self.pool)
        self.env.reset(0)
        self.steps = 0

    def assert_answers(self) -> None:
        self.steps += 1
        try:
            obs = self.env.step("ping")[0]
            assert obs == f"neighbour step {self.steps}: intact"
        except BaseException:
            self.env.close()
            self.start()  # so that one damaging attack does not fail every later test too
            raise


@pytest.fixture(scope="module", params=LEVELS)
def pool(request: pytest.FixtureRequest, host: Host, procs: Any) -> Iterator[WorkerPool]:
    # No skip: a level that does not work here raises SandboxUnavailable, which fails every test of the level.
    pool = WorkerPool(SandboxConfig(isolation=request.param, **CONFIG))
    try:
        assert pool.level == request.param
        yield pool
    finally:
        pool.shutdown()
    procs.assert_no_workers_left()


@pytest.fixture(scope="module")
def neighbour(pool: WorkerPool) -> Iterator[Neighbour]:
    neighbour = Neighbour(pool)
    yield neighbour
    neighbour.env.close()


# -- attacks ------------------------------------------------------------------------------------------------------
TEMPLATE = '''
import json
import os
import sys

CTX = json.loads(@CTX@)


def attempt(label, fn, *args, **kwargs):
    """Try one attack step and report it as a line: ``label: blocked <error>`` or ``label: SUCCEEDED <result>``."""
    try:
        result = fn(*args, **kwargs)
    except Exception as exc:
        return f"{label}: blocked {type(exc).__name__}: {exc}"
    return f"{label}: SUCCEEDED {result!r}"[:3000]


def attack():
@BODY@


RESULT = attack() if @AT_IMPORT@ else None


class AttackEnv:
    max_turns = 5

    def reset(self, seed=None):
        if @AT_RESET@:
            return str(attack()), {}
        return "attack env ready", {}

    def step(self, action):
        out = RESULT if @AT_IMPORT@ else attack()
        if isinstance(out, tuple):
            return out
        return str(out), 0.0, False, False, {}

    def solution(self):
        return ["x"]
'''


@dataclass
class Outcome:
    """What one attack produced: the observation of its phase, or the error the client raised."""

    phase: str
    obs: str | None = None
    result: Any = None
    error: BaseException | None = None
    elapsed: float = 0.0
    env: RemoteEnv | None = None
    worker: Worker | None = None
    pids: set[int] = field(default_factory=set)

    @property
    def lines(self) -> dict[str, str]:
        """The attack's report, label -> what happened."""
        assert self.error is None, f"expected the env to return, but the client raised {self.error!r}"
        assert self.obs is not None
        return dict(line.split(": ", 1) for line in self.obs.splitlines() if ": " in line)


Check = Callable[[Outcome, Host], None]


@dataclass
class Attack:
    name: str
    body: str
    check: Check
    phase: str = "step"  # import | reset | step

    def source(self, ctx: dict[str, Any]) -> str:
        body = textwrap.indent(textwrap.dedent(self.body).strip("\n"), "    ")
        return (
            TEMPLATE.replace("@CTX@", repr(json.dumps(ctx)))
            .replace("@BODY@", body)
            .replace("@AT_IMPORT@", str(self.phase == "import"))
            .replace("@AT_RESET@", str(self.phase == "reset"))
        )


# -- checks -------------------------------------------------------------------------------------------------------
def raises(kind: type[BaseException] | tuple[type[BaseException], ...], *fragments: str, **expect: Any) -> Check:
    """The client raised ``kind`` whose message has every fragment; ``alive``: is the worker still usable after it."""

    def check(out: Outcome, _host: Host) -> None:
        assert out.error is not None, f"expected {kind}, but the env returned {str(out.obs)[:500]!r}"
        assert isinstance(out.error, kind), f"expected {kind}, got {out.error!r}"
        for fragment in fragments:
            assert fragment in str(out.error), f"{fragment!r} not in {str(out.error)[:1500]!r}"
        if "code" in expect:
            assert out.error.code in expect["code"], f"code {out.error.code!r}"
        if "max_s" in expect:
            assert out.elapsed < expect["max_s"], f"took {out.elapsed:.2f} s"
        if "min_s" in expect:
            assert out.elapsed >= expect["min_s"], f"took only {out.elapsed:.2f} s"
        if out.worker is not None and "alive" in expect:
            if expect["alive"]:
                assert out.worker.call("ping") == "pong", "the worker should still answer after this error"
            else:
                assert out.worker.dead, "the worker should have been killed"

    return check


def blocked(*labels: str, allowed: tuple[str, ...] = (), extra: Callable[[Outcome, Host], None] | None = None) -> Check:
    """The env returned; every attempt it reports failed (``allowed`` labels may succeed), ``labels`` among them."""

    def check(out: Outcome, host: Host) -> None:
        lines = out.lines
        for label in labels:
            assert label in lines, f"attempt {label!r} missing from the report: {out.obs!r}"
        for label, what in lines.items():
            if label not in allowed:
                assert what.startswith("blocked "), f"{label}: {what}"
        if extra is not None:
            extra(out, host)

    return check


def no_secret(out: Outcome, _host: Host) -> None:
    assert FILE_SECRET not in out.obs and ENV_SECRET not in out.obs and ENV_SECRET_NAME not in out.obs


def contains(*fragments: str) -> Check:
    def check(out: Outcome, _host: Host) -> None:
        assert out.error is None, f"expected the env to return, but the client raised {out.error!r}"
        for fragment in fragments:
            assert fragment in out.obs, f"{fragment!r} not in {out.obs[:1500]!r}"

    return check


def both(*checks: Check) -> Check:
    def check(out: Outcome, host: Host) -> None:
        for one in checks:
            one(out, host)

    return check


def that(predicate: Callable[[Outcome], object], what: str) -> Check:
    """``predicate(outcome)`` holds; ``what`` says what it means."""

    def check(out: Outcome, _host: Host) -> None:
        assert predicate(out), f"expected {what}; got {out.error!r} / {str(out.obs)[:1500]!r}"

    return check


#: ``EnvRaised.code`` of an env output the contract rejects (the implementation refines it by reason).
CONTRACT_CODES = ("bad_output", "bad_types", "nonfinite_reward")
HARD_TIMEOUT = raises(EnvTimeout, "did not answer", min_s=CALL_TIMEOUT_S - 0.5, max_s=CALL_TIMEOUT_S + 2, alive=False)
SOFT_TIMEOUT = raises(EnvTimeout, "exceeded", max_s=CALL_TIMEOUT_S, alive=True)
ANY_TIMEOUT = raises(EnvTimeout, max_s=CALL_TIMEOUT_S + 2)


def forged_or_desync(out: Outcome, _host: Host) -> None:
    """A forged reply with the right ``seq`` cannot be told from the real one (the env writes both from the same
    process, so it could as well have returned that result); but the real reply then arrives unasked and the
    host must notice the desynchronised stream and kill the worker."""
    if isinstance(out.error, ProtocolViolation):
        assert out.worker.dead
        return
    assert out.error is None, repr(out.error)
    with pytest.raises(ProtocolViolation):
        out.env.step("again")
    assert out.worker.dead


def listing_of_root_is_harmless(out: Outcome, _host: Host) -> None:
    allowed = {Path(p).relative_to("/root").parts[0] for p in _read_only_paths() if p.startswith("/root/")}
    what = out.lines["listdir /root"]
    if what.startswith("SUCCEEDED"):
        names = set(ast.literal_eval(what.removeprefix("SUCCEEDED ")))  # a list repr the env produced from os.listdir
        assert names <= allowed, f"/root shows more than the mount points of bound paths: {names - allowed}"


def pids_not_visible(out: Outcome, host: Host) -> None:
    seen = out.lines.get("visible pids", "blocked")
    if not seen.startswith("blocked"):
        pids = set(json.loads(seen))
        assert str(os.getpid()) not in pids and str(host.sentinel.pid) not in pids, pids
    assert host.sentinel_arg not in out.obs and "pytest" not in out.obs


def file_size_is_capped(out: Outcome, _host: Host) -> None:
    assert "File too large" in out.lines["8 MiB file"]
    assert out.lines["6 files of 1 MiB"].startswith("SUCCEEDED")  # the cap is per file: 6 MiB in all fits


def fds_are_the_protocol_pipes(out: Outcome, _host: Host) -> None:
    kinds = json.loads(out.obs)
    assert [kinds.get(str(fd)) for fd in (0, 1, 2)] == ["chr"] * 3, kinds  # stdio is /dev/null
    assert sorted(kinds.values()).count("fifo") == 2, kinds  # the request and the reply pipe, nothing else
    assert not {k for k in kinds.values() if k not in ("chr", "fifo")}, f"host fds leaked into the worker: {kinds}"


def unserialisable_info(out: Outcome, _host: Host) -> None:
    assert out.error is None, repr(out.error)
    obs, reward, terminated, truncated, info = out.result
    assert (obs, reward, terminated, truncated) == ("odd info", 0.0, False, False)
    assert info["obj"].startswith("<object object") and info["set"] == [1, 2] and info["3"] == "b'raw'"
    json.dumps(info, allow_nan=False)


LIBC = """
import ctypes
import platform

libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
NR = {
    "x86_64": {"clone": 56, "fork": 57, "pidfd_open": 434, "pidfd_send_signal": 424, "rt_sigqueueinfo": 129,
               "rt_tgsigqueueinfo": 297, "tgkill": 234, "socket": 41},
    "aarch64": {"clone": 220, "pidfd_open": 434, "pidfd_send_signal": 424, "rt_sigqueueinfo": 138,
                "rt_tgsigqueueinfo": 240, "tgkill": 131, "socket": 198},
}[platform.machine()]


def ok(ret):
    if ret < 0:
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err))
    return ret
"""


def _libc(body: str) -> str:
    return LIBC + textwrap.dedent(body)


NET = """
import struct

try:
    import socket as pysocket
except ImportError:  # the worker may be unable to load extension modules it did not preload: libc always works
    pysocket = None

HOSTS = ("127.0.0.1", "0.0.0.0")


def sockaddr_in(host, port):
    return struct.pack("=H", 2) + struct.pack("!H", port) + bytes(int(x) for x in host.split(".")) + bytes(8)


def c_connect(family, kind, address):
    fd = ok(libc.socket(family, kind, 0))
    return ok(libc.connect(fd, address, len(address)))


def c_sendto(address, data=b"pwned"):
    fd = ok(libc.socket(2, 2, 0))
    return ok(libc.sendto(fd, data, len(data), 0, address, len(address)))
"""


def _net(body: str) -> str:
    """Network attacks go through libc (always) and the ``socket`` module (when the worker can import it)."""
    return LIBC + NET + textwrap.dedent(body)


ATTACKS = [
    # -- time --------------------------------------------------------------------------------------------------
    Attack("infinite_loop", "while True:\n    pass", SOFT_TIMEOUT),
    Attack(
        "loop_catching_base_exception",
        """
        while True:
            try:
                while True:
                    pass
            except BaseException:
                pass
        """,
        HARD_TIMEOUT,
    ),
    Attack(
        "ignore_sigalrm_and_sigterm",
        """
        import signal
        for sig in (signal.SIGALRM, signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGXCPU):
            signal.signal(sig, signal.SIG_IGN)
        signal.setitimer(signal.ITIMER_REAL, 0)
        while True:
            pass
        """,
        HARD_TIMEOUT,
    ),
    Attack(
        "block_sigalrm_then_sleep",
        """
        import signal, time
        signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGALRM})
        time.sleep(100)
        """,
        HARD_TIMEOUT,
    ),
    # Blocking C calls return EINTR to the soft alarm, whose handler then raises in Python code.
    Attack("hang_in_blocking_read", "r, w = os.pipe()\nos.read(r, 1)", SOFT_TIMEOUT),
    Attack("hang_in_libc_sleep", "import ctypes\nctypes.CDLL(None).sleep(100)", SOFT_TIMEOUT),
    Attack("hang_in_c_builtin", "return sum(range(10**15))", HARD_TIMEOUT),
    Attack(
        "hang_in_numpy_matmul",
        """
        import numpy as np
        a = np.full((2500, 2500), 1e-3, dtype=np.float32)
        while True:
            a = a @ a
        """,
        ANY_TIMEOUT,
    ),
    Attack("catastrophic_regex", 'import re\nreturn re.match(r"(a+)+$", "a" * 64 + "b")', SOFT_TIMEOUT),
    Attack("hang_at_import", "while True:\n    pass", raises(EnvTimeout, "init", max_s=CALL_TIMEOUT_S), "import"),
    Attack(
        "endless_repr_in_info",
        """
        class Endless:
            def __repr__(self):
                while True:
                    pass
        return "endless", 0.0, False, False, {"x": Endless()}
        """,
        SOFT_TIMEOUT,
    ),
    # -- memory ------------------------------------------------------------------------------------------------
    Attack("allocate_8_gib", "return len(bytearray(8 << 30))", raises(EnvRaised, "MemoryError", alive=True)),
    Attack(
        "creeping_allocation",
        """
        import numpy as np
        chunks = []
        try:
            while True:
                chunks.append(np.empty(1 << 20, dtype=np.uint8))  # address space, not touched: fast
        except MemoryError:
            n = len(chunks)
            chunks.clear()
            return f"creeping allocation: blocked MemoryError after {n} MiB"
        """,
        both(blocked("creeping allocation"), that(lambda out: int(out.obs.split()[-2]) < 512, "under 512 MiB")),
    ),
    Attack(
        "numpy_16_gib",
        "import numpy as np\nreturn float(np.ones(1 << 31).sum())",
        raises(EnvRaised, "MemoryError", alive=True),
    ),
    Attack(
        "raise_rlimits_then_allocate",
        """
        import resource
        lines = []
        for name in ("RLIMIT_AS", "RLIMIT_CPU", "RLIMIT_FSIZE", "RLIMIT_NOFILE"):
            limit = (resource.RLIM_INFINITY, resource.RLIM_INFINITY)
            lines.append(attempt(name, resource.setrlimit, getattr(resource, name), limit))
        lines.append(attempt("allocate 4 GiB", lambda: len(bytearray(4 << 30))))
        return "\\n".join(lines)
        """,
        blocked("RLIMIT_AS", "RLIMIT_CPU", "RLIMIT_FSIZE", "RLIMIT_NOFILE", "allocate 4 GiB"),
    ),
    # -- processes ---------------------------------------------------------------------------------------------
    Attack(
        "fork_bomb",
        """
        forked, error = 0, "none"
        for _ in range(200):
            try:
                pid = os.fork()
            except OSError as exc:
                error = f"{type(exc).__name__}: {exc}"
                break
            if pid == 0:  # bounded: should the sandbox fail, this must not become a real bomb on the host
                os._exit(0)
            forked += 1
        return f"forked {forked}; fork failed: {error}"
        """,
        contains("forked 0; fork failed: PermissionError: [Errno 1] Operation not permitted"),
        "reset",
    ),
    Attack(
        "fork_setsid_escape",
        """
        import time

        def escape():
            pid = os.fork()
            if pid == 0:
                try:
                    os.setsid()
                finally:
                    time.sleep(30)
                    os._exit(0)
            return pid

        return "\\n".join([attempt("setsid", os.setsid), attempt("setpgid", os.setpgid, 0, 0), attempt("fork", escape)])
        """,
        blocked("setsid", "setpgid", "fork"),
    ),
    Attack(
        "raw_clone_syscall",
        _libc("""
        import signal

        def spawn(name, *args):
            pid = ok(libc.syscall(NR[name], *args))
            if pid == 0:
                libc._exit(0)
            return pid

        lines = [attempt("clone", spawn, "clone", signal.SIGCHLD, 0, 0, 0, 0)]
        if "fork" in NR:
            lines.append(attempt("fork", spawn, "fork"))
        return "\\n".join(lines)
        """),
        blocked("clone"),
    ),
    Attack(
        "subprocess_and_shell",
        """
        def run(**kwargs):
            import subprocess

            return subprocess.run(**kwargs)

        def fork_exec():
            pid = os.fork()
            if pid == 0:
                os.execv("/bin/sh", ["sh", "-c", CTX["shell"]])
            return os.waitpid(pid, 0)

        return "\\n".join([
            attempt("subprocess.run", run, args=["sh", "-c", CTX["shell"]]),
            attempt("subprocess shell", run, args=CTX["shell"], shell=True),
            attempt("posix_spawn", os.posix_spawn, "/bin/sh", ["sh", "-c", CTX["shell"]], {}),
            attempt("fork+exec", fork_exec),
        ])
        """,
        both(
            blocked("subprocess.run", "subprocess shell", "posix_spawn", "fork+exec"),
            that(lambda out: "PermissionError" in out.lines["posix_spawn"] + out.lines["fork+exec"], "EPERM"),
        ),
    ),
    Attack(
        "os_system",
        "return f\"os.system rc={os.system(CTX['shell'])}\"",
        both(contains("os.system rc="), that(lambda out: out.obs != "os.system rc=0", "a failed shell")),
    ),
    Attack(
        "libc_system_via_ctypes",
        """
        import ctypes
        libc = ctypes.CDLL(None)
        rc = libc.system(CTX["shell"].encode())
        # Through a bare function pointer too, as the prototype's audit-hook bypass did.
        address = ctypes.cast(libc.system, ctypes.c_void_p).value
        rc2 = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_char_p)(address)(CTX["shell"].encode())
        return f"libc.system rc={rc}; pointer rc={rc2}"
        """,
        both(
            contains("libc.system rc="),
            that(lambda out: "rc=0;" not in out.obs and not out.obs.endswith("rc=0"), "both shells to fail"),
        ),
    ),
    Attack(
        "exec_replaces_worker",
        """
        return "\\n".join([
            attempt("execv sh", os.execv, "/bin/sh", ["sh", "-c", CTX["shell"]]),
            attempt("execve python", os.execve, sys.executable, [sys.executable, "-c", "pass"], {}),
        ])
        """,
        blocked("execv sh", "execve python"),
        "import",
    ),
    # -- secrets -----------------------------------------------------------------------------------------------
    Attack(
        "read_host_secret_in_tmp",
        """
        return "\\n".join([
            attempt("open secret", lambda: open(CTX["tmp_secret"]).read()),
            attempt("listdir secret dir", os.listdir, os.path.dirname(CTX["tmp_secret"])),
        ])
        """,
        both(blocked("open secret", "listdir secret dir"), no_secret),
    ),
    Attack(
        "read_host_secret_in_bound_repo",
        """
        # The repository root is bound read-only (the worker imports the contract from it): a 0600 file there,
        # like a developer's .env, must stay unreadable.
        return "\\n".join([
            attempt("open secret", lambda: open(CTX["repo_secret"]).read()),
            attempt("listdir", os.listdir, CTX["repo_canary_dir"]),
        ])
        """,
        both(blocked("open secret", allowed=("listdir",)), no_secret),
    ),
    Attack(
        "read_system_secrets",
        """
        paths = ["/etc/shadow", "/etc/gshadow", "/etc/sudoers", "/root/.bash_history", "/root/.ssh/id_rsa",
                 "/root/.ssh/authorized_keys", "/etc/ssh/ssh_host_ed25519_key", "/etc/passwd"]
        lines = [attempt(path, lambda p=path: open(p).read()) for path in paths]
        lines.append(attempt("listdir /root", os.listdir, "/root"))
        return "\\n".join(lines)
        """,
        blocked(
            "/etc/shadow",
            "/root/.bash_history",
            "listdir /root",
            allowed=("listdir /root",),
            extra=listing_of_root_is_harmless,
        ),
        "import",
    ),
    Attack(
        "read_environment_secrets",
        """
        lines = [f"environ: {sorted(os.environ)}"]
        paths = ["/proc/self/environ", "/proc/1/environ", f"/proc/{os.getppid()}/environ",
                 f"/proc/{CTX['host_pid']}/environ", f"/proc/{CTX['sentinel_pid']}/environ"]
        for path in paths:
            lines.append(attempt(path, lambda p=path: open(p, "rb").read().decode(errors="replace")))
        try:
            for pid in os.listdir("/proc"):
                if pid.isdigit():
                    path = f"/proc/{pid}/environ"
                    lines.append(attempt(path, lambda p=path: open(p, "rb").read().decode(errors="replace")))
        except OSError as exc:
            lines.append(f"listdir /proc: blocked {exc}")
        return "\\n".join(lines)
        """,
        both(
            that(
                lambda out: set(ast.literal_eval(out.lines["environ"])) <= WORKER_ENV_KEYS,
                "only the worker's own variables",
            ),
            no_secret,
        ),
        "reset",
    ),
    Attack(
        "snoop_on_proc",
        """
        lines = []
        try:
            pids = [p for p in os.listdir("/proc") if p.isdigit()]
            lines.append(f"visible pids: {json.dumps(pids)}")
            for pid in pids:
                read = lambda p=pid: open(f"/proc/{p}/cmdline", "rb").read().replace(b"\\0", b" ").decode()
                lines.append(attempt(f"cmdline {pid}", read))
        except OSError as exc:
            lines.append(f"visible pids: blocked {exc}")
        lines.append(attempt("host cmdline", lambda: open(f"/proc/{CTX['host_pid']}/cmdline", "rb").read()))
        return "\\n".join(lines)
        """,
        both(contains("visible pids: "), pids_not_visible),
    ),
    # -- files -------------------------------------------------------------------------------------------------
    Attack(
        "write_outside_scratch",
        """
        def write(path, mode="w"):
            with open(path, mode) as f:
                f.write("pwned")
            return path

        mark = CTX["mark"]
        lines = []
        for d in (CTX["tmp_canary_dir"], CTX["repo_canary_dir"], CTX["repo_root"], os.path.dirname(os.__file__),
                  sys.prefix, os.path.dirname(sys.executable)):
            lines.append(attempt(f"create in {d}", write, os.path.join(d, mark)))
        for d in (CTX["tmp_canary_dir"], CTX["repo_canary_dir"]):
            lines.append(attempt(f"overwrite canary in {d}", write, os.path.join(d, "canary.txt")))
            lines.append(attempt(f"append to canary in {d}", write, os.path.join(d, "canary.txt"), "a"))
        lines.append(attempt("makedirs in repo", os.makedirs, os.path.join(CTX["repo_root"], mark, "x")))
        # Private to the sandbox (a tmpfs under bwrap) or denied: the host checks that nothing appeared.
        for d in ("/tmp", "/var/tmp", "/dev/shm", "/"):
            lines.append("private " + attempt(d, write, os.path.join(d, mark)).replace(": ", " | "))
        lines.append(attempt("write in scratch", write, os.path.join(os.getcwd(), "own.txt")))
        return "\\n".join(lines)
        """,
        blocked(
            "makedirs in repo",
            "write in scratch",
            allowed=("write in scratch",),
            extra=that(lambda out: out.lines["write in scratch"].startswith("SUCCEEDED"), "scratch to be writable"),
        ),
        "reset",
    ),
    Attack(
        "delete_and_tamper_with_host_files",
        """
        lines = []
        for d in (CTX["tmp_canary_dir"], CTX["repo_canary_dir"]):
            canary = os.path.join(d, "canary.txt")
            lines += [
                attempt(f"remove {canary}", os.remove, canary),
                attempt(f"rename {canary}", os.rename, canary, os.path.join(d, CTX["mark"])),
                attempt(f"chmod {canary}", os.chmod, canary, 0),
                attempt(f"chown {canary}", os.chown, canary, 65534, 65534),
                attempt(f"utime {canary}", os.utime, canary, (0, 0)),
                attempt(f"truncate {canary}", os.truncate, canary, 0),
                attempt(f"symlink in {d}", os.symlink, "/etc/passwd", os.path.join(d, CTX["mark"])),
                attempt(f"setxattr {canary}", os.setxattr, canary, "user.pwned", b"1"),
                attempt(f"rename dir {d}", os.rename, d, d + "_" + CTX["mark"]),
            ]
        return "\\n".join(lines)
        """,
        both(blocked(), that(lambda out: len(out.lines) == 18, "18 attempts, all blocked")),
    ),
    Attack(
        "links_from_scratch_to_host_files",
        """
        def write(path):  # no O_CREAT: only an existing link may be written through
            fd = os.open(path, os.O_WRONLY | os.O_APPEND)
            try:
                return os.write(fd, b"pwned")
            finally:
                os.close(fd)

        repo_canary = os.path.join(CTX["repo_canary_dir"], "canary.txt")
        tmp_canary = os.path.join(CTX["tmp_canary_dir"], "canary.txt")
        lines = [
            attempt("symlink to repo dir", os.symlink, CTX["repo_canary_dir"], "escape_repo"),
            attempt("symlink to tmp dir", os.symlink, CTX["tmp_canary_dir"], "escape_tmp"),
            attempt("symlink to canary", os.symlink, repo_canary, "canary_link"),
            attempt("hardlink repo canary", os.link, repo_canary, "canary_hardlink"),
            attempt("hardlink tmp canary", os.link, tmp_canary, "tmp_canary_hardlink"),
            attempt("write through symlink", write, "canary_link"),
            attempt("write through dir symlink", write, os.path.join("escape_repo", "canary.txt")),
            attempt("write through hardlink", write, "canary_hardlink"),
        ]
        return "\\n".join(lines)
        """,
        # The links themselves may be created in scratch; writing through them must fail, and removing the
        # scratch dir on close must not follow them (the host checks the canaries after close).
        blocked(
            "hardlink repo canary",
            "hardlink tmp canary",
            "write through symlink",
            "write through dir symlink",
            allowed=("symlink to repo dir", "symlink to tmp dir", "symlink to canary"),
        ),
    ),
    Attack(
        "tamper_with_neighbour_scratch",
        """
        state = os.path.join(CTX["neighbour_scratch"], "neighbour_state.txt")

        def write():
            with open(state, "w") as f:
                f.write("pwned")

        return "\\n".join([
            attempt("listdir", os.listdir, CTX["neighbour_scratch"]),
            attempt("read", lambda: open(state).read()),
            attempt("write", write),
            attempt("delete", os.remove, state),
        ])
        """,
        blocked("listdir", "read", "write", "delete"),
    ),
    Attack(
        "file_size_limit_and_scratch_cleanup",
        """
        def write(name, size, count=1):
            for i in range(count):
                with open(f"{name}{i}", "wb") as f:
                    f.write(b"x" * size)
            return count * size

        lines = [attempt("8 MiB file", write, "big", 8 << 20)]
        os.remove("big0")  # the first 4 MiB were written: free them for the next attempt
        lines.append(attempt("6 files of 1 MiB", write, "small", 1 << 20, 6))
        return "\\n".join(lines)
        """,
        file_size_is_capped,
    ),
    # -- network -----------------------------------------------------------------------------------------------
    Attack(
        "tcp_to_host_loopback",
        _net("""
        port = CTX["tcp_port"]
        lines = [attempt(f"libc tcp {host}", c_connect, 2, 1, sockaddr_in(host, port)) for host in HOSTS]
        if pysocket is not None:
            lines += [attempt(f"tcp {host}", pysocket.create_connection, (host, port), 0.5) for host in HOSTS]
        return "\\n".join(lines)
        """),
        blocked("libc tcp 127.0.0.1", "libc tcp 0.0.0.0"),
        "import",
    ),
    Attack(
        "tcp_to_outside_address",
        _net("""
        import time
        start = time.monotonic()
        lines = [attempt("libc tcp 10.255.255.1:80", c_connect, 2, 1, sockaddr_in("10.255.255.1", 80))]
        if pysocket is not None:
            lines.append(attempt("tcp 10.255.255.1:80", pysocket.create_connection, ("10.255.255.1", 80), 0.5))
        lines.append(f"seconds: {time.monotonic() - start:.3f}")
        return "\\n".join(lines)
        """),
        both(
            blocked("libc tcp 10.255.255.1:80", allowed=("seconds",)),
            that(lambda out: float(out.lines["seconds"]) < 0.25, "an immediate refusal, nothing on the wire"),
        ),
    ),
    Attack(
        "udp_to_host_loopback",
        _net("""
        def send():
            s = pysocket.socket(pysocket.AF_INET, pysocket.SOCK_DGRAM)
            return s.sendto(b"pwned", ("127.0.0.1", CTX["udp_port"]))

        lines = [attempt("libc udp sendto", c_sendto, sockaddr_in("127.0.0.1", CTX["udp_port"]))]
        if pysocket is not None:
            lines.append(attempt("udp sendto", send))
        return "\\n".join(lines)
        """),
        blocked("libc udp sendto"),
    ),
    Attack(
        "unix_sockets_to_host",
        _net("""
        def connect(address):
            s = pysocket.socket(pysocket.AF_UNIX, pysocket.SOCK_STREAM)
            s.connect(address)
            return "connected"

        abstract = struct.pack("=H", 1) + b"\\0" + CTX["abstract_name"].encode()
        lines = [
            attempt("libc unix path", c_connect, 1, 1, struct.pack("=H", 1) + CTX["unix_path"].encode() + b"\\0"),
            attempt("libc unix abstract", c_connect, 1, 1, abstract),
            attempt("libc socketpair", lambda: ok(libc.socketpair(1, 1, 0, (ctypes.c_int * 2)()))),
        ]
        if pysocket is not None:
            lines += [
                attempt("unix path", connect, CTX["unix_path"]),
                attempt("unix abstract", connect, "\\0" + CTX["abstract_name"]),
                attempt("socketpair", pysocket.socketpair),
            ]
        return "\\n".join(lines)
        """),
        blocked("libc unix path", "libc unix abstract", "libc socketpair"),
    ),
    Attack(
        "raw_socket_syscall",
        _libc("""
        return "\\n".join([
            attempt("libc socket", lambda: ok(libc.socket(2, 1, 0))),
            attempt("syscall socket", lambda: ok(libc.syscall(NR["socket"], 2, 2, 0))),
        ])
        """),
        blocked("libc socket", "syscall socket"),
    ),
    # -- signals and other processes ---------------------------------------------------------------------------
    Attack(
        "kill_everything",
        """
        import signal
        return "\\n".join([
            attempt("kill(-1, SIGKILL)", os.kill, -1, signal.SIGKILL),
            attempt("kill(-1, SIGTERM)", os.kill, -1, signal.SIGTERM),
            attempt("kill(0, SIGKILL)", os.kill, 0, signal.SIGKILL),
            attempt("killpg(own group)", os.killpg, os.getpgrp(), signal.SIGKILL),
            attempt("kill(1)", os.kill, 1, signal.SIGKILL),
        ])
        """,
        blocked("kill(-1, SIGKILL)", "kill(0, SIGKILL)", "killpg(own group)", "kill(1)"),
        "reset",
    ),
    Attack(
        "kill_host_and_neighbour",
        """
        import signal
        targets = {"host": CTX["host_pid"], "sentinel": CTX["sentinel_pid"], "parent": os.getppid()}
        targets.update({f"neighbour {pid}": pid for pid in CTX["neighbour_pids"]})
        lines = []
        for name, pid in targets.items():
            for sig in (signal.SIGKILL, signal.SIGSTOP):
                lines.append(attempt(f"{sig.name} {name}", os.kill, pid, sig))
        return "\\n".join(lines)
        """,
        blocked("SIGKILL host", "SIGKILL sentinel", "SIGKILL parent"),
    ),
    Attack(
        "pidfd_and_sigqueue_kill",
        _libc("""
        import signal

        def pidfd_kill(pid):
            fd = ok(libc.syscall(NR["pidfd_open"], pid, 0))
            return ok(libc.syscall(NR["pidfd_send_signal"], fd, signal.SIGKILL, None, 0))

        def sigqueue(pid):
            info = (ctypes.c_int * 32)(signal.SIGKILL, 0, -1)  # si_signo, si_errno, si_code = SI_QUEUE
            return ok(libc.syscall(NR["rt_sigqueueinfo"], pid, signal.SIGKILL, info))

        def tgsigqueue(pid):
            info = (ctypes.c_int * 32)(signal.SIGKILL, 0, -1)
            return ok(libc.syscall(NR["rt_tgsigqueueinfo"], pid, pid, signal.SIGKILL, info))

        def tgkill(pid):
            return ok(libc.syscall(NR["tgkill"], pid, pid, signal.SIGKILL))

        targets = {"host": CTX["host_pid"], "sentinel": CTX["sentinel_pid"]}
        targets.update({f"neighbour {pid}": pid for pid in CTX["neighbour_pids"]})
        lines = []
        for name, pid in targets.items():
            for how in (pidfd_kill, sigqueue, tgsigqueue, tgkill):
                lines.append(attempt(f"{how.__name__} {name}", how, pid))
        return "\\n".join(lines)
        """),
        blocked("pidfd_kill host", "tgsigqueue sentinel", "tgkill host"),
    ),
    Attack(
        "ptrace_and_read_host_memory",
        _libc("""
        libc.ptrace.restype = ctypes.c_long

        class IoVec(ctypes.Structure):
            _fields_ = [("base", ctypes.c_void_p), ("len", ctypes.c_size_t)]

        def vm_read(pid):
            buf = ctypes.create_string_buffer(64)
            local, remote = IoVec(ctypes.addressof(buf), 64), IoVec(0x400000, 64)
            return ok(libc.process_vm_readv(pid, ctypes.byref(local), 1, ctypes.byref(remote), 1, 0))

        lines = []
        for name, pid in {"host": CTX["host_pid"], "neighbour": CTX["neighbour_pids"][-1]}.items():
            lines += [
                attempt(f"PTRACE_ATTACH {name}", lambda p=pid: ok(libc.ptrace(16, p, None, None))),
                attempt(f"PTRACE_SEIZE {name}", lambda p=pid: ok(libc.ptrace(0x4206, p, None, None))),
                attempt(f"process_vm_readv {name}", vm_read, pid),
                attempt(f"/proc/{name}/mem", lambda p=pid: open(f"/proc/{p}/mem", "rb").read(1)),
            ]
        return "\\n".join(lines)
        """),
        blocked("PTRACE_ATTACH host", "process_vm_readv host", "PTRACE_ATTACH neighbour"),
    ),
    Attack(
        "namespace_and_privilege_escape",
        _libc("""
        def setns():
            fd = os.open("/proc/1/ns/mnt", os.O_RDONLY)
            return ok(libc.setns(fd, 0))

        return "\\n".join([
            f"uid: {os.getuid()}",
            attempt("chown in scratch", lambda: os.chown(open("mine", "w").name, 1, 1)),
            attempt("unshare user", lambda: ok(libc.unshare(0x10000000))),
            attempt("unshare mount", lambda: ok(libc.unshare(0x00020000))),
            attempt("unshare net", lambda: ok(libc.unshare(0x40000000))),
            attempt("chroot", lambda: ok(libc.chroot(b"/"))),
            attempt("mount", lambda: ok(libc.mount(b"none", b"/tmp", b"tmpfs", 0, None))),
            attempt("setns", setns),
            attempt("setuid 0", os.setuid, 0),
            attempt("setgid 0", os.setgid, 0),
        ])
        """),
        lambda out, host: blocked(  # setuid(0) is a no-op for a worker that already runs as uid 0
            "chown in scratch",
            "unshare user",
            "unshare mount",
            "chroot",
            "mount",
            "setuid 0",
            allowed=("uid", "setuid 0", "setgid 0") if out.lines["uid"] == "0" else ("uid",),
        )(out, host),
    ),
    # -- threads -----------------------------------------------------------------------------------------------
    Attack(
        "spinning_threads_left_behind",
        """
        import _thread  # the low-level module: always loaded, unlike threading
        import time

        state = globals().setdefault("SPIN", {"started": 0, "beats": [0, 0, 0, 0]})
        if state["started"]:  # a later step: count the threads that are still running
            before, deadline = list(state["beats"]), time.monotonic() + 0.6
            while time.monotonic() < deadline and not all(a != b for a, b in zip(before, state["beats"])):
                time.sleep(0.02)
            return f"{sum(a != b for a, b in zip(before, state['beats']))} threads still spinning"

        def spin(i):
            while True:
                try:
                    while True:
                        state["beats"][i] += 1
                except BaseException:
                    pass

        for i in range(4):
            _thread.start_new_thread(spin, (i,))
        state["started"] = 4
        return "started 4 spinning threads"
        """,
        contains("started 4 spinning threads"),
    ),
    Attack(
        "thread_bomb",
        """
        import _thread
        hold = _thread.allocate_lock()
        hold.acquire()
        started, error = 0, "none"
        try:
            for _ in range(5000):
                _thread.start_new_thread(hold.acquire, ())
                started += 1
        except Exception as exc:
            error = f"{type(exc).__name__}: {exc}"
        return f"started {started} threads; then {error}"
        """,
        both(
            contains("; then "),
            that(lambda out: int(out.obs.split()[1]) < 5000, "a cap well below 5000 threads"),
            that(lambda out: "RuntimeError" in out.obs or "MemoryError" in out.obs, "thread creation to fail"),
        ),
    ),
    # -- output ------------------------------------------------------------------------------------------------
    Attack(
        "print_200_mb",
        """
        chunk = "x" * (1 << 20)
        for _ in range(100):
            print(chunk)
            sys.stderr.write(chunk)
        os.write(1, chunk.encode())
        os.write(2, chunk.encode())
        return "printed"
        """,
        contains("printed"),
    ),
    Attack(
        "huge_observation",
        'return "x" * 10_000_000',
        raises((OutputTooLarge, EnvRaised), "10000000", alive=True),
    ),
    Attack(
        "huge_info",
        'return "big", 0.0, False, False, {"data": ["x" * 60_000] * 40}',
        raises(OutputTooLarge, "exceeds 1048576 bytes", alive=False),
    ),
    Attack(
        "str_subclass_lying_about_its_length",
        """
        class Liar(str):
            def __len__(self):
                return 1

        return Liar("x" * 5_000_000), 0.0, False, False, {}
        """,
        raises(OutputTooLarge),
    ),
    # -- crashes and exits -------------------------------------------------------------------------------------
    Attack(
        "deep_recursion_with_raised_limit",
        """
        sys.setrecursionlimit(10**6)

        def down(n):
            return down(n + 1) + 1

        return down(0)
        """,
        raises((EnvCrashed, EnvRaised, EnvTimeout)),
    ),
    Attack(
        "c_stack_overflow",
        """
        import json
        sys.setrecursionlimit(10**6)  # the encoder recurses in C, checking only this limit
        nested = []
        for _ in range(300_000):
            nested = [nested]
        return json.dumps(nested)[:100]
        """,
        raises((EnvCrashed, EnvRaised, EnvTimeout)),
    ),
    Attack("segfault", "import ctypes\nreturn ctypes.string_at(0)", raises(EnvCrashed, "died during step")),
    Attack(
        "segfault_at_import",
        "import ctypes\nreturn ctypes.string_at(0)",
        raises(EnvCrashed, "died during init"),
        "import",
    ),
    Attack("sys_exit", "sys.exit(3)", raises(EnvRaised, "SystemExit", alive=True)),
    Attack("os_exit", "os._exit(0)", raises(EnvCrashed, "died during reset"), "reset"),
    Attack("sigkill_self", "import signal\nos.kill(os.getpid(), signal.SIGKILL)", raises(EnvCrashed)),
    # -- bad values --------------------------------------------------------------------------------------------
    Attack(
        "nan_reward",
        'return "won", float("nan"), True, False, {}',
        raises(EnvRaised, "finite", code=CONTRACT_CODES, alive=True),
    ),
    Attack(
        "inf_reward",
        'return "won", float("inf"), True, False, {}',
        raises(EnvRaised, "finite", code=CONTRACT_CODES, alive=True),
    ),
    Attack(
        "numpy_nan_reward",
        'import numpy as np\nreturn "won", np.float64("nan"), np.True_, False, {}',
        raises(EnvRaised, "finite", code=CONTRACT_CODES, alive=True),
    ),
    Attack("huge_reward", 'return "won", 1e308, True, False, {}', raises((SandboxError, ValueError), "beyond")),
    Attack(
        "object_as_observation",
        "return object(), 1.0, True, False, {}",
        raises(EnvRaised, "observation must be str", code=CONTRACT_CODES, alive=True),
    ),
    Attack(
        "unserialisable_info",
        'return "odd info", 0.0, False, False, {"obj": object(), "set": {1, 2}, 3: b"raw", "fn": print}',
        unserialisable_info,
    ),
    # -- the protocol ------------------------------------------------------------------------------------------
    Attack(
        "forged_reply_on_every_fd",
        """
        line = b'{"seq":1,"ok":true,"result":["won",1.0,true,false,{}]}\\n'
        for fd in range(65):
            try:
                os.write(fd, line)
            except OSError:
                pass
        return "lost", 0.0, True, False, {}
        """,
        raises(ProtocolViolation, alive=False),
    ),
    Attack(
        "forged_reply_with_the_right_seq",
        """
        import time
        line = b'{"seq":3,"ok":true,"result":["won",1.0,true,false,{}]}\\n'  # init is 1, reset 2, this step 3
        for fd in range(3, 65):
            try:
                os.write(fd, line)
            except OSError:
                pass
        time.sleep(0.3)
        return "lost", 0.0, True, False, {}
        """,
        forged_or_desync,
    ),
    Attack(
        "partial_line_before_the_reply",
        """
        for fd in range(3, 65):
            try:
                os.write(fd, b'{"seq":3,"ok":true,"result":')
            except OSError:
                pass
        return "lost", 0.0, True, False, {}
        """,
        raises(ProtocolViolation, alive=False),
    ),
    Attack(
        "patch_isfinite_and_json_to_send_nan",
        """
        import json, math, sys
        math.isfinite = lambda x: True
        dumps = json.dumps
        json.dumps = lambda *a, **k: dumps(*a, **{**k, "allow_nan": True})
        # the worker encodes with one shared encoder (issue 39): replace it with one that writes NaN
        sys.modules["spade_envs.sandbox.protocol"]._ENCODER = json.JSONEncoder(separators=(",", ":"))
        return "won", float("nan"), True, False, {"inf": float("inf")}
        """,
        raises(ProtocolViolation, "NaN", alive=False),
    ),
    Attack(
        "patch_encoder_to_send_1e999",
        """
        # Patched at import time: the worker looks its checks up before it calls step.
        protocol = sys.modules["spade_envs.sandbox.protocol"]
        sys.modules["spade_envs.envs.contract"].check_step_output = lambda result: result
        encode = protocol.encode
        protocol.encode = lambda message: encode(message).replace(b'"REWARD"', b"1e999")
        return "won", "REWARD", True, False, {}
        """,
        raises((SandboxError, ValueError), "finite"),
        "import",
    ),
    Attack(
        "patch_contract_to_send_bad_types",
        """
        sys.modules["spade_envs.envs.contract"].check_step_output = lambda result: result
        return "won", True, 1, "no", []
        """,
        raises((SandboxError, ValueError), "reward must be a finite number"),
        "import",
    ),
    Attack(
        "unimportable_traceback_and_an_exception_that_cannot_be_printed",
        """
        # The worker imports traceback lazily to report an exception; its fallback, the exception's repr, is env code.
        sys.modules["traceback"] = None  # `import traceback` now raises ImportError, in warm and cold workers alike

        class Unprintable(Exception):
            def __repr__(self):
                raise RuntimeError("no repr")

            __str__ = __repr__

        raise Unprintable()
        """,
        raises(EnvRaised, "Unprintable", code={"exception"}, alive=True),
    ),
    Attack(
        "close_the_protocol_fds",
        """
        for fd in range(3, 65):
            try:
                os.close(fd)
            except OSError:
                pass
        return "won", 1.0, True, False, {}
        """,
        raises(EnvCrashed, "during step"),
    ),
    Attack(
        "inventory_of_inherited_fds",
        """
        import stat
        kinds = {}
        for fd in range(1024):
            try:
                mode = os.fstat(fd).st_mode
            except OSError:
                continue
            kinds[fd] = next(k for k, test in (("fifo", stat.S_ISFIFO), ("sock", stat.S_ISSOCK), ("chr", stat.S_ISCHR),
                             ("reg", stat.S_ISREG), ("dir", stat.S_ISDIR), ("other", lambda m: True)) if test(mode))
        return json.dumps(kinds)
        """,
        fds_are_the_protocol_pipes,
        "import",
    ),
]


def _run(attack: Attack, pool: WorkerPool, ctx: dict[str, Any], procs: Any) -> Outcome:
    """Load the attack env, reset it and step it once; time the phase the attack runs in."""
    out = Outcome(attack.phase)
    acquire = pool.acquire

    def spy(timeout: float | None = None) -> Worker:  # note the worker and its processes before any attack runs
        out.worker = acquire(timeout)
        out.pids = procs.tree(out.worker.proc.pid)
        return out.worker

    pool.acquire = spy  # type: ignore[method-assign]
    stage, start = "import", time.monotonic()
    try:
        out.env = RemoteEnv(attack.source(ctx), pool)
        stage, start = "reset", time.monotonic()
        obs, _ = out.env.reset(0)
        if attack.phase == "reset":
            out.obs = obs
        else:
            stage, start = "step", time.monotonic()
            out.result = out.env.step("go")
            out.obs = out.result[0]
    except (SandboxError, ValueError) as exc:
        out.error = exc
        # An attack at import time may only show in the step that returns what it produced.
        expected = ("import", "step") if attack.phase == "import" else (attack.phase,)
        assert stage in expected, f"the {stage} phase failed, but the attack runs in {attack.phase}: {exc!r}"
    finally:
        out.elapsed = time.monotonic() - start
        del pool.acquire
    return out


def _spinners_still_spin(out: Outcome) -> None:
    # The threads keep spinning after step returned; the worker still serves, and they die with it on close.
    assert out.env.step("again")[0] == "4 threads still spinning"


def _bomb_leaves_a_working_worker(out: Outcome) -> None:
    assert out.env.step("again")[0].startswith("started ")


FOLLOW_UPS: dict[str, Callable[[Outcome], None]] = {
    "spinning_threads_left_behind": _spinners_still_spin,
    "thread_bomb": _bomb_leaves_a_working_worker,
}


@pytest.mark.parametrize("attack", ATTACKS, ids=lambda a: a.name)
def test_attack_is_contained(attack: Attack, pool: WorkerPool, neighbour: Neighbour, host: Host, procs: Any) -> None:
    out = _run(attack, pool, host.ctx(neighbour.env, procs), procs)
    try:
        attack.check(out, host)
        if attack.name in FOLLOW_UPS:
            FOLLOW_UPS[attack.name](out)
    finally:  # whatever the env saw: the host, the neighbour and the process table must be unharmed
        if out.env is not None:
            out.env.close()
        elif out.worker is not None:
            pool.release(out.worker)
        _assert_all(
            host.assert_unharmed,  # first: it repairs the host, so that one escape does not fail later tests
            neighbour.assert_answers,
            lambda: procs.assert_gone(out.pids),
            lambda: _assert_removed(out.worker.scratch),
        )


def _assert_removed(scratch: str) -> None:
    assert not os.path.exists(scratch), "the worker's scratch dir outlived it"


def _assert_all(*checks: Callable[[], None]) -> None:
    """Run every check; fail with all their messages."""
    failures = []
    for check in checks:
        try:
            check()
        except (AssertionError, pytest.fail.Exception) as exc:
            failures.append(str(exc))
    if failures:
        pytest.fail("\n".join(failures))


def test_there_are_enough_attacks() -> None:
    assert len(ATTACKS) >= 28 and len({a.name for a in ATTACKS}) == len(ATTACKS)
    assert {a.phase for a in ATTACKS} == {"import", "reset", "step"}


def test_reward_checks_reject_what_attacks_send() -> None:
    # The host-side check is the last line of defence when env code has patched the worker's own checks.
    from spade_envs.sandbox.protocol import check_step_result

    for reward in (math.nan, math.inf, -math.inf, 1e308, -1e5, True, "1"):
        with pytest.raises(ValueError):
            check_step_result(["won", reward, True, False, {}])
