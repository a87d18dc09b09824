"""The env worker: a process that hardens itself, then serves one environment over the JSON-lines protocol.

Run as a script (``python -S -P worker.py CONFIG_JSON`` with an environment holding only ``PYTHONHASHSEED``, see
``launch.py``), never imported by the host. It imports only the parts of
``spade_envs`` that environments need (the contract, the loader, the tool-use base), without the package's
``__init__`` (which pulls in gymnasium), then applies the isolation layers of its level *before* it reads any
env code: a pool can start workers ahead of time and hand them code later.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import types
from typing import Any

_SAFE_ENV = {
    "PATH": "/usr/bin:/bin",
    "LANG": "C.UTF-8",
    "OPENBLAS_NUM_THREADS": "1",
    "OMP_NUM_THREADS": "1",
    "MKL_NUM_THREADS": "1",
    "MALLOC_ARENA_MAX": "2",
    "PYTHONDONTWRITEBYTECODE": "1",
}


#: Every variable a worker's environment holds: the fixed ones above, plus temp and home dirs set to its scratch.
WORKER_ENV_KEYS = frozenset(_SAFE_ENV) | {"TMPDIR", "HOME"}


class SoftTimeout(BaseException):
    """Raised into env code by the in-worker alarm (a BaseException so that ``except Exception`` cannot eat it)."""


#: What a pre-started worker imports before it reports ready (after hardening, with env code's own rights): the
#: tool-use base, the stdlib modules env code commonly uses and the exception formatter. A worker started on demand
#: skips them: its env imports what it uses.
WARM_MODULES = ("spade_envs.envs.tooluse", "traceback", "collections", "dataclasses", "functools", "heapq", "itertools",
                "math", "random", "re", "string")  # fmt: skip


def _import_core(root: str) -> dict[str, Any]:
    """What every worker loads before it reports ready: hardening, the wire format, the loader, the contract.

    Every ``init`` and ``step`` needs them, and env code finds them loaded, as the worker's own.
    """
    for name in ("spade_envs", "spade_envs.sandbox"):
        package = types.ModuleType(name)
        package.__path__ = [os.path.join(root, *name.split("."))]
        sys.modules[name] = package
    sys.path.insert(0, root)
    from spade_envs.envs import contract, errors, loader, public_names
    from spade_envs.sandbox import hardening, protocol, replies

    public_names.install()  # env code imports the tool-use base as ``spade_envs.envs.tooluse``

    return {"contract": contract, "errors": errors, "loader": loader, "hardening": hardening, "protocol": protocol,
            "replies": replies}  # fmt: skip


def _warm_up(modules: tuple[str, ...]) -> None:
    """Import ``modules``; a failure is left to env code, whose own ``import`` then fails the same way."""
    for name in modules:
        try:
            __import__(name)
        except Exception:  # noqa: BLE001,S112
            continue


def _harden(cfg: dict[str, Any], hardening: Any) -> None:
    level = cfg["level"]
    if level == "none":
        return
    own_uid = False
    uid = cfg.get("uid")
    if os.geteuid() == 0 and uid is not None:  # env code never runs as host uid 0, nor as a userns mapping of it
        readable = all(hardening.world_readable(p) for p in cfg["bound"] if os.path.exists(p))
        if readable:  # at bwrap this sees the sandbox's own tree: parents made 0755, the binds keep their modes
            hardening.drop_privileges(uid)
        elif level == "landlock":  # Landlock confines the reads that CAP_DAC_READ_SEARCH would otherwise allow
            hardening.drop_to_uid_keeping_read_search(uid)
        else:
            raise PermissionError(
                f"the {level} level on a root host needs an interpreter readable by an unprivileged uid (env code "
                f"never runs as root), and {sys.base_prefix} is not: the landlock level keeps working; or make "
                "the interpreter world-readable (chmod o+rX along its path)"
            )
        own_uid = True
    limits = cfg["limits"]
    # RLIMIT_NPROC counts the processes and threads of a uid: meaningful once the worker has a uid of its own, or
    # inside bubblewrap's user namespace (counted per namespace since Linux 5.14), never for a shared host uid.
    nproc = limits["processes"] if own_uid or (level == "bwrap" and hardening.nproc_counts_per_userns()) else None
    hardening.apply_rlimits(limits["memory_mb"], limits["cpu_s"], limits["file_size_mb"], limits["open_files"], nproc)
    if level == "landlock":
        hardening.restrict_filesystem(cfg["read_only"], [cfg["scratch"], "/dev/null"], cfg.get("list_only", ()))
    _die_with_host(cfg.get("host_pid"))  # again: changing the uid cleared the parent-death signal
    hardening.load_seccomp()  # refuses prctl(PR_SET_PDEATHSIG) from here on: env code cannot clear it
    _watch_parent()  # started after seccomp and Landlock, so the thread is as confined as env code


def _watch_parent() -> None:
    """Exit when the parent changes (a second layer under the parent-death signal): a thread asleep on a pidfd."""
    import select
    import threading

    parent, getppid, exit_now = os.getppid(), os.getppid, os._exit  # bound now: env code may rebind the modules'

    def watch() -> None:
        try:
            fd = os.pidfd_open(parent)
        except (AttributeError, OSError):
            fd = -1
        poller = select.poll()
        if fd >= 0:
            poller.register(fd, select.POLLIN)
        while getppid() == parent:
            if fd >= 0 and not poller.poll(1000):
                continue
            fd = -1  # no pidfd, or an event while the parent lives (env code closed or replaced the fd): sleep-poll
            threading.Event().wait(0.5)
        exit_now(5)

    threading.Thread(target=watch, name="spade-parent-watchdog", daemon=True).start()


def _die_with_host(host_pid: int | None) -> None:
    """SIGKILL this worker when its parent dies; exit now if the host is already gone.

    The host spawns workers from one long-lived thread, so no ordinary thread exit fires the signal.
    """
    import ctypes

    ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL, 0, 0, 0)  # PR_SET_PDEATHSIG
    if host_pid is not None and os.getppid() != host_pid:
        os._exit(5)


def _format_exception(exc: BaseException) -> str:
    """The last frames of ``exc``'s traceback; its type and repr if even that fails; never raises.

    ``traceback`` is imported here, after env code ran: env code may have made it unimportable (``sys.modules``),
    used up the memory, or given ``exc`` a ``__repr__`` that raises. The worker must still report the exception.
    """
    try:
        import traceback

        return "".join(traceback.format_exception(type(exc), exc, exc.__traceback__, limit=-3))[-2000:]
    except BaseException:  # noqa: BLE001
        name = type.__dict__["__name__"].__get__(type(exc))  # the C-level name: a metaclass cannot run code here
    try:
        return f"{name}: {exc!r}"[-2000:]
    except BaseException:  # noqa: BLE001
        return f"{name}: <the exception could not be printed>"


class _RequestWait:
    """Busy-poll for the next request for up to ``spin_us`` after a reply, while requests follow replies that fast.

    A request that finds the worker asleep wakes it with an inter-processor interrupt when the worker's CPU is
    halted (~25-30 us on a quiet VM, issue 39); a caller stepping in a tight loop sends its next request ~20-30 us
    after the reply. Every gap (reply sent until the next request is readable) feeds a moving average; the worker
    spins only while it is under ``spin_us``, and tries again every ``_PROBE_EVERY``-th request otherwise, so a
    worker whose requests come seconds apart (an LLM's turns) burns at most ``spin_us`` per that many requests.
    """

    _PROBE_EVERY = 8

    def __init__(self, fd: int, spin_us: int) -> None:
        import select
        import time

        self.spin_s, self.clock, self.yield_cpu = spin_us / 1e6, time.perf_counter, os.sched_yield
        self.poll = select.poll()
        self.poll.register(fd, select.POLLIN)
        self.gap_s, self.unspun, self.sent = 0.0, 0, 0.0

    def replied(self) -> None:
        self.sent = self.clock()

    def arrived(self) -> None:
        """A request was read: its gap (reply sent until then) feeds the moving average."""
        if self.sent:
            self.gap_s = 0.5 * self.gap_s + 0.5 * (self.clock() - self.sent)

    def wait(self) -> None:
        """Spin until the request is readable or the spin is over; the read that follows blocks as before."""
        if not self.spin_s or not self.sent:
            return
        if self.gap_s >= self.spin_s and self.unspun < self._PROBE_EVERY:
            self.unspun += 1
            return
        self.unspun = 0
        clock, poll, until = self.clock, self.poll.poll, self.sent + self.spin_s
        while clock() < until:
            if poll(0):
                return
            self.yield_cpu()  # a host thread on this CPU runs first: it is the one that writes the request


class _Server:
    def __init__(self, cfg: dict[str, Any], core: dict[str, Any]) -> None:
        self.cfg, self.core = cfg, core
        self.reader = os.fdopen(cfg["rfd"], "rb", buffering=1 << 16)
        self.wfd = cfg["wfd"]
        self.env: Any = None
        self.max_chars = cfg["max_observation_chars"]

    def send(self, message: dict[str, Any]) -> None:
        data = self.core["protocol"].encode(message)
        while data:
            data = data[os.write(self.wfd, data) :]

    def serve(self) -> None:
        self.send({"seq": 0, "ok": True, "result": {"pid": os.getpid(), "level": self.cfg["level"]}})
        limit = self.cfg["max_request_bytes"]
        wait = _RequestWait(self.cfg["rfd"], self.cfg.get("request_spin_us", 0))
        while True:
            wait.wait()
            line = self.reader.readline(limit + 1)
            wait.arrived()
            if not line or not line.endswith(b"\n"):
                os._exit(0 if not line else 3)  # host closed the pipe, or an oversized request
            request = json.loads(line)
            reply = self.handle(request)
            self.send(reply)
            wait.replied()
            if request.get("op") == "close":
                os._exit(0)

    def handle(self, request: dict[str, Any]) -> dict[str, Any]:
        seq, op = request.get("seq"), request.get("op")
        errors, protocol, replies = self.core["errors"], self.core["protocol"], self.core["replies"]
        signal.setitimer(signal.ITIMER_REAL, self.cfg["soft_timeout_s"])
        try:
            try:
                result = protocol.scrub(self.dispatch(op, request), self.max_chars)
                replies.check_result(op, result, self.max_chars, walk=False)  # the host's shape check (scrub did
                # the rest): never send what the host refuses
                return {"seq": seq, "ok": True, "result": result}
            finally:  # disarm before any handler runs: formatting a huge traceback must not be interrupted
                signal.setitimer(signal.ITIMER_REAL, 0)
        except SoftTimeout:
            kind, code, message = "timeout", "timeout", f"{op} exceeded {self.cfg['soft_timeout_s']} s"
        except errors.InvalidEnvSource as exc:
            kind, code, message = "raised", exc.code, exc.message
        except errors.ContractViolation as exc:
            kind, code, message = "raised", exc.code, str(exc)
        except OverflowError as exc:
            kind, code, message = "too_large", "output_too_large", str(exc)
        except (protocol.BadOutput, replies.BadReply) as exc:
            kind, code, message = "raised", "bad_types", f"{op} returned an invalid result: {exc}"
        except BaseException as exc:  # env code may raise anything, SystemExit included
            kind, code, message = "raised", "exception", _format_exception(exc)
        message = message[-min(4000, self.max_chars) :]  # the host refuses any string over max_observation_chars
        if not protocol.valid_text(message):  # env code chose the exception's text
            message = message.encode("utf-8", "replace").decode("utf-8")
        return {"seq": seq, "ok": False, "kind": kind, "code": code, "error": message}

    def dispatch(self, op: str, req: dict[str, Any]) -> Any:
        if op == "ping":
            return "pong"
        if op == "close":
            return None
        if op == "init":
            invalid = self.core["errors"].InvalidEnvSource
            cls = self.core["loader"].load_env_class(req["source"])  # one name for every load, in every context
            try:
                self.env = cls()
            except Exception as exc:
                raise invalid("construct_failed", f"{cls.__name__}() raised {type(exc).__name__}: {exc}") from exc
            tooluse = sys.modules.get("spade_envs.envs.tooluse")  # a tool-use env imported it to subclass ToolUseEnv
            is_tool = tooluse is not None and isinstance(self.env, tooluse.ToolUseEnv)
            max_turns = getattr(self.env, "max_turns", None)
            if isinstance(max_turns, bool) or not isinstance(max_turns, int) or max_turns < 1:
                raise invalid("construct_failed", f"max_turns must be a positive int, got {max_turns!r}"[:300])
            return {"class_name": cls.__name__, "setting": "tool_use" if is_tool else "games",
                    "max_turns": min(max_turns, self.core["replies"].MAX_TURNS)}  # fmt: skip
        if self.env is None:
            raise RuntimeError(f"{op!r} before init")
        if op == "reset":
            obs, info = self.core["contract"].check_reset_output(self.env.reset(req.get("seed")))
            max_turns = getattr(self.env, "max_turns", None)  # some envs size their turn budget per episode
            if isinstance(max_turns, bool) or not isinstance(max_turns, int) or max_turns < 1:
                max_turns = None
            return [obs, info, None if max_turns is None else min(max_turns, self.core["replies"].MAX_TURNS)]
        if op == "step":
            return list(self.core["contract"].check_step_output(self.env.step(req["action"])))
        if op == "step_calls":
            return list(self.core["contract"].check_step_output(self.env.step_calls(req["calls"], req.get("answer"))))
        if op == "call_tool":
            out = self.env.call_tool(req["name"], req.get("arguments", {}))
            if not isinstance(out, str):
                raise self.core["errors"].ContractViolation(f"call_tool must return str, got {type(out).__name__}")
            return out
        if op == "tools":
            try:
                return self.core["replies"].check_tools(self.core["protocol"].scrub(self.env.tools(), self.max_chars))
            except ValueError as exc:
                raise self.core["errors"].ContractViolation(f"tools(): {exc}") from exc
        if op == "solution":
            actions = self.env.solution()
            if not isinstance(actions, list) or not all(isinstance(a, str) for a in actions):
                raise self.core["errors"].ContractViolation("solution() must return a list of str")
            return actions
        raise ValueError(f"unknown op {op!r}")


def main() -> None:
    cfg = json.loads(sys.argv[1])
    # env code sees one fixed command line: the config names this worker's fds, scratch and uid, none of its context
    sys.argv[:], sys.orig_argv[:] = [""], [sys.executable]
    _die_with_host(cfg.get("host_pid"))
    if os.getpriority(os.PRIO_PROCESS, 0) < cfg.get("nice", 0):  # raise only: env code's threads inherit it
        os.setpriority(os.PRIO_PROCESS, 0, cfg["nice"])
    here = os.path.dirname(os.path.abspath(__file__))
    sys.path[:] = [p for p in sys.path if p and os.path.abspath(p) != here]  # what -P does on Python >= 3.11
    sys.path.extend(cfg.get("site_packages", []))  # started with -S: the venv's packages, no .pth code
    os.environ.clear()
    os.environ.update(_SAFE_ENV, TMPDIR=cfg["scratch"], HOME=cfg["scratch"])  # temp files go to scratch only
    devnull = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(devnull, fd)
    os.close(devnull)
    core = _import_core(cfg["root"])
    server = _Server(cfg, core)
    try:
        _harden(cfg, core["hardening"])
        os.chdir(cfg["scratch"])  # after the uid change: as a root host's worker, scratch belongs to the new uid
    except Exception as exc:  # report why this level cannot work here, then stop
        server.send({"seq": 0, "ok": False, "kind": "raised", "code": "hardening_failed", "error": str(exc)})
        os._exit(4)
    if cfg.get("warm"):  # a pre-started worker: loaded off the critical path, before it is handed out
        _warm_up(WARM_MODULES + (("numpy",) if cfg.get("preload_numpy") else ()))
    sys.setrecursionlimit(3000)
    sys.dont_write_bytecode = True

    def on_alarm(_signum: int, _frame: Any) -> None:
        raise SoftTimeout

    signal.signal(signal.SIGALRM, on_alarm)
    server.serve()


if __name__ == "__main__":
    main()
