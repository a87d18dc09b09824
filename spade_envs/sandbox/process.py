"""Host side of one env worker: launch at an isolation level, call with a deadline, kill and reap.

The host never trusts a reply: sizes are capped, the sequence number must match, nothing unsolicited may arrive,
and every failure maps onto one typed :mod:`~spade_envs.sandbox.errors` exception. A worker that misbehaved is
killed (its whole process group) and must not be used again.
"""

from __future__ import annotations

import os
import select
import signal
import subprocess
import time
from typing import Any, NamedTuple

from spade_envs.envs.failures import FAILURE_CODES
from spade_envs.sandbox import protocol
from spade_envs.sandbox.affinity import CpuFollower, sandbox_pid
from spade_envs.sandbox.autogroup import weigh_session
from spade_envs.sandbox.cgroups import PidsCgroup, pids_root
from spade_envs.sandbox.config import SandboxConfig
from spade_envs.sandbox.errors import (
    SANDBOX_FAILURE_CODES,
    EnvCrashed,
    EnvRaised,
    EnvTimeout,
    OutputTooLarge,
    ProtocolViolation,
    SandboxError,
    SandboxUnavailable,
)
from spade_envs.sandbox.launch import bwrap_prefix, read_only_paths, spawn, worker_command
from spade_envs.sandbox.reaping import await_exit, become_subreaper, reap_orphans
from spade_envs.sandbox.replies import MAX_DEPTH, BadReply, check_json, check_result
from spade_envs.sandbox.reply_line import ReplyLineReader
from spade_envs.sandbox.scratch import Scratch
from spade_envs.sandbox.uids import UidLease, lease_uid
from spade_envs.sandbox.waiting import ReplyWait

__all__ = ["PendingCall", "Worker", "become_subreaper", "reap_orphans"]

# Kept for callers and tests that imported them from here.
_read_only_paths = read_only_paths
_bwrap_prefix = bwrap_prefix


class PendingCall(NamedTuple):
    """A request sent by :meth:`Worker.begin` whose reply :meth:`Worker.finish` has not read yet."""

    op: str
    seq: int
    deadline: float  # time.monotonic() by which the reply must be in
    timeout_code: str
    started: float


#: How long a thread that carries many workers' calls (``block=False``) waits for a worker whose pipe closed to
#: exit, for the error's note: env code that closes its pipe ends and lives on would otherwise hold that thread a
#: whole second (``Worker.call`` waits up to 1 s; the worker is killed either way).
SHARED_DEATH_WAIT_S = 0.05


class Worker(ReplyLineReader):
    """One worker process, started at ``level`` and ready for ``call``; use once, then :meth:`kill`.

    Every path out of the constructor and of :meth:`call` either returns a checked result or raises a typed
    :class:`SandboxError`; on any failure but an env exception or a soft timeout the worker is killed, and a
    killed worker leaves no process, pipe or scratch file behind.

    ``warm``: load what env code commonly uses (and numpy, with ``preload_numpy``) before reporting ready, as the
    pool's pre-started workers do off the critical path; a worker started on demand leaves that to its env, so a
    cold start pays only for what its env imports.
    """

    def __init__(self, config: SandboxConfig, level: str, warm: bool = False) -> None:
        self.config, self.level, self.warm = config, level, warm
        self.dead = False
        self.proc: subprocess.Popen[bytes] | None = None
        self.busy_s = 0.0  # wall time spent in calls: the episode's budget is config.episode_wall_s
        self.reply_bytes = 0  # bytes of replies since the last reset: the budget is config.max_episode_reply_bytes
        self._seq = 0
        self._pending: PendingCall | None = None
        self._buffer = b""
        self._unsent: memoryview | None = None  # the rest of a request that begin(block=False) could not write yet
        self._death_wait_s = 1.0
        self._fds: list[int] = []
        self._cgroup: PidsCgroup | None = None
        self._uid: UidLease | None = None
        try:
            if os.geteuid() == 0 and level != "none":  # env code never runs as (or as a mapping of) host root
                self._uid = lease_uid()
            self._scratch = Scratch(config.scratch_mb, config.scratch_files, self._uid.uid if self._uid else None)
        except OSError as exc:
            if self._uid is not None:
                self._uid.release()
            raise SandboxUnavailable(f"could not create a scratch dir: {exc}", code="spawn_failed") from exc
        self.scratch = self._scratch.path
        try:
            self._start()
        except OSError as exc:  # pipes, cgroup or process creation failed on the host (fds, pids, memory)
            self.kill()
            raise SandboxUnavailable(f"could not start a worker: {exc}", code="spawn_failed") from exc
        except BaseException:
            self.kill()  # a worker that could not start or harden itself must not linger
            raise

    def _start(self) -> None:
        config, level = self.config, self.level
        root = pids_root()
        if root is not None:  # a process/thread cap that also binds a worker running as (mapped) host root
            self._cgroup = PidsCgroup(root, config.processes)
        req_r, self._req_w = os.pipe()
        self._fds = [self._req_w, req_r]
        self._resp_r, resp_w = os.pipe()
        self._fds += [self._resp_r, resp_w]
        try:  # the worker's ends of the pipes are closed here once it has them (or could not start)
            uid = self._uid.uid if self._uid is not None else None
            cmd, env = worker_command(config, level, req_r, resp_w, self.scratch, self._scratch.mounted, uid,
                                      self.warm)  # fmt: skip
            cmd = self._cgroup.wrap(cmd) if self._cgroup is not None else cmd
            self.proc = spawn(
                cmd, pass_fds=(req_r, resp_w), stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL, start_new_session=True, env=env, close_fds=True,
            )  # fmt: skip
        finally:
            os.close(req_r)
            os.close(resp_w)
            self._fds = [self._req_w, self._resp_r]
        if config.nice:  # the session's CPU weight too, or the floor counts only within it (autogroup.py)
            weigh_session(self.proc.pid, config.nice)
        os.set_blocking(self._req_w, False)  # writes get a deadline too: a worker may stop reading
        self._wait = ReplyWait(self._resp_r, config.reply_spin_us)
        self._poller = self._wait.poller  # the reply pipe's (kept for callers that poll it by hand)
        self._write_poller = select.poll()  # not select.select: that fails on descriptors >= 1024
        self._write_poller.register(self._req_w, select.POLLOUT)
        self.started = time.monotonic()
        try:
            info = self._read_reply(0, self.started + config.start_timeout_s, "start", "start_timeout")
        except EnvRaised as exc:  # no env code has run yet: the machine's condition (a limit above the host's own,
            # threads exhausted by a process of the same uid), never an environment's fault to charge
            self._fail(SandboxUnavailable(f"the worker could not start: {exc}"[:2000], code="spawn_failed"))
        if not (isinstance(info, dict) and isinstance(info.get("pid"), int) and info.get("level") == level):
            self._fail(ProtocolViolation("the worker's start-up message is malformed", code="invalid_result"))
        self.info = info
        if config.follow_caller_cpu:
            self._follow(info["pid"])

    def _follow(self, ns_pid: int) -> None:
        """Let calls wake the worker on their CPU (``affinity.py``).

        Where the worker is not our child, a pidfd joins the idle poll so that a dead worker's pid is never pinned.
        """
        if self.level != "bwrap":  # the host's own child (the cgroup's shell execs python): its pid stays ours
            self._wait.follow(CpuFollower(self.proc.pid, None))  # type: ignore[union-attr]
            return
        pid = sandbox_pid(self.proc.pid, ns_pid)  # type: ignore[union-attr]
        if pid is None:
            return
        try:
            pidfd = os.pidfd_open(pid)
        except OSError:
            return
        self._fds.append(pidfd)
        if sandbox_pid(self.proc.pid, ns_pid) != pid:  # type: ignore[union-attr]  # it died before the pidfd
            return
        self._wait.follow(CpuFollower(pid, pidfd))

    # -- calls ----------------------------------------------------------------------------------------------------
    def call(self, op: str, timeout: float | None = None, **payload: Any) -> Any:
        """Send one request and return its checked result, or raise a typed :class:`SandboxError`.

        After an error the worker is dead, unless the error is :class:`EnvRaised`, a soft :class:`EnvTimeout` or an
        :class:`OutputTooLarge` for one string. The call's deadline is ``timeout`` (default ``call_timeout_s``) or
        what is left of the episode's wall-clock budget, whichever comes first.
        """
        return self.finish(self.begin(op, timeout, payload))

    def begin(self, op: str, timeout: float | None = None, payload: dict[str, Any] | None = None,
              *, pin: bool = True, block: bool = True) -> PendingCall:  # fmt: skip
        """The first half of :meth:`call`: check and send the request; :meth:`finish` reads the reply.

        Between the two the worker runs while the host does other work (``batch.call_many`` keeps many workers
        busy from one thread this way). One call at a time: a second ``begin`` before ``finish`` kills the worker.
        ``pin=False``: never pin the worker to this thread's CPU for this call (a batch has many on one thread).
        ``block=False``: never wait for the request pipe; what does not fit is left to :meth:`push` (while
        :attr:`sending`), so that a worker that stopped reading holds up no other worker's call.
        """
        if self.dead:
            raise EnvCrashed(
                f"worker {self.proc.pid if self.proc else '?'} is no longer usable", code="worker_unusable"
            )
        if self._pending is not None:
            self._fail(ProtocolViolation(f"{op} sent while a {self._pending.op} call is pending",
                                         code="host_check_failed"))  # fmt: skip
        try:
            data = protocol.encode({"seq": self._seq + 1, "op": op, **(payload or {})})
        except (TypeError, ValueError) as exc:  # e.g. NaN in tool arguments parsed from agent text; worker untouched
            raise ProtocolViolation(f"{op} request cannot be sent as JSON: {exc}"[:500], code="bad_request") from exc
        if len(data) > self.config.max_request_bytes:
            raise OutputTooLarge(
                f"{op} request of {len(data)} bytes exceeds {self.config.max_request_bytes}", code="request_too_large"
            )
        left = self.config.episode_wall_s - self.busy_s
        limit = timeout or self.config.call_timeout_s
        timeout_code = "episode_wall_budget" if left < limit else ("call_timeout" if op != "init" else "start_timeout")
        started = time.monotonic()
        try:
            if left <= 0:
                self._fail(EnvTimeout(f"the episode's {self.config.episode_wall_s:g} s wall-clock budget is spent",
                                      code="episode_wall_budget"))  # fmt: skip
            if self._wait.unsolicited() or self._buffer:
                self._fail(ProtocolViolation("the worker sent data nobody asked for", code="unsolicited_data"))
            self._seq += 1
            if op == "reset":
                self.reply_bytes = 0
            deadline = started + min(limit, left)
            self._wait.before_request(pin)
            self._death_wait_s = 1.0 if block else SHARED_DEATH_WAIT_S
            self._write(data, deadline, op, timeout_code, block)
        except BaseException as exc:
            self.busy_s += time.monotonic() - started
            self._unforeseen(op, exc)
            raise
        self._pending = PendingCall(op, self._seq, deadline, timeout_code, started)
        return self._pending

    def finish(self, pending: PendingCall) -> Any:
        """The second half of :meth:`call`: wait for, read and check the reply to ``pending`` (from :meth:`begin`)."""
        if self.dead:  # killed meanwhile (by the pool's shutdown, say): its pipes are closed, never read
            raise EnvCrashed(f"the worker was killed during {pending.op}", code="worker_unusable")
        if pending is not self._pending:
            self._fail(ProtocolViolation(f"finish of a {pending.op} call not pending", code="host_check_failed"))
        self._pending = None
        try:
            if self._unsent is not None:
                self._end_write(pending)
            return self._read_reply(pending.seq, pending.deadline, pending.op, pending.timeout_code)
        except BaseException as exc:
            self._unforeseen(pending.op, exc)
            raise
        finally:
            self.busy_s += time.monotonic() - pending.started

    def _unforeseen(self, op: str, exc: BaseException) -> None:
        """After a call failed: a typed error passes; anything else (a host-side bug, an interrupt) kills the worker."""
        if isinstance(exc, SandboxError):
            return
        self.kill()  # never leave a half-used worker
        if isinstance(exc, Exception):
            raise ProtocolViolation(f"{op}: checking the reply failed: {type(exc).__name__}: {exc}"[:2000],
                                    code="host_check_failed") from exc  # fmt: skip

    @property
    def reply_fd(self) -> int:
        """The reply pipe's read end (readable once a reply, or the worker's death, is there): for ``poll``."""
        return self._resp_r

    @property
    def sending(self) -> bool:
        """Whether part of the pending call's request is still unwritten (``begin(block=False)``; see :meth:`push`)."""
        return self._unsent is not None

    @property
    def request_fd(self) -> int:
        """The request pipe's write end (writable once the worker took some of the request): for ``poll``."""
        return self._req_w

    def push(self) -> bool:
        """Write more of the request (call it only when the pipe is writable); True once ``finish`` won't wait.

        True when the request is all out, or writing it failed in a way ``finish`` will report. Never blocks and
        never raises.
        """
        view = self._unsent
        if view is None or self.dead:
            return True
        try:
            self._unsent = view[os.write(self._req_w, view) :] or None
        except BlockingIOError:
            return False
        except OSError:
            return True  # finish's own write fails the same way and reports it
        return self._unsent is None

    def _end_write(self, pending: PendingCall) -> None:
        """In ``finish``: one more try at what ``push`` left unwritten, then the call fails if some is still left."""
        view, self._unsent = self._unsent, None
        self._write(view, pending.deadline, pending.op, pending.timeout_code, block=False)  # type: ignore[arg-type]
        if self._unsent is None:
            return
        if time.monotonic() >= pending.deadline:
            code = pending.timeout_code if pending.timeout_code == "episode_wall_budget" else "write_timeout"
            self._fail(EnvTimeout(f"{pending.op}: the worker did not take the request in time; it was killed",
                                  code=code))  # fmt: skip
        self._fail(ProtocolViolation(f"the worker answered {pending.op} before it took the whole request",
                                     code="unsolicited_data"))  # fmt: skip

    def _write(self, data: bytes | memoryview, deadline: float, op: str, timeout_code: str,
               block: bool = True) -> None:  # fmt: skip
        view = memoryview(data)
        while view:
            try:
                view = view[os.write(self._req_w, view) :]
            except BlockingIOError:
                pass
            except OSError:
                self._fail(EnvCrashed(self._death_note("before the request could be sent")))
            if view and not block:
                self._unsent = view
                return
            if view:
                left = deadline - time.monotonic()
                if left <= 0 or not self._write_poller.poll(max(1, int(left * 1000))):
                    code = timeout_code if timeout_code == "episode_wall_budget" else "write_timeout"
                    self._fail(
                        EnvTimeout(f"{op}: the worker did not take the request in time; it was killed", code=code)
                    )

    def _read_reply(self, seq: int, deadline: float, op: str, timeout_code: str) -> Any:
        cap = self.config.max_response_bytes
        # Every byte the host decodes counts against the episode, checked before decoding (the start message and
        # the fixed-size ping/close answers aside): a fat info or tool list costs host CPU like an observation.
        counted = op not in ("start", "ping", "close")
        left = self.config.max_episode_reply_bytes - self.reply_bytes if counted else cap
        line = self._read_line(deadline, op, timeout_code, cap, left)
        self._wait.replied()
        if counted:
            self.reply_bytes += len(line)
        try:
            reply = protocol.decode(line)
            check_json(reply, self.config.max_observation_chars, MAX_DEPTH + 4, line)
        except (ValueError, UnicodeDecodeError) as exc:
            self._fail(ProtocolViolation(f"unparseable reply to {op}: {exc}"[:2000], code="garbled_reply"))
        if reply.get("seq") != seq or not isinstance(reply.get("ok"), bool):
            self._fail(ProtocolViolation(f"reply to {op} carries seq {reply.get('seq')!r}, expected {seq}"[:300],
                                         code="wrong_seq"))  # fmt: skip
        if self._buffer:
            self._fail(ProtocolViolation(f"extra data after the reply to {op}", code="unsolicited_data"))
        if reply["ok"]:
            if op == "start":
                return reply.get("result")
            try:
                return check_result(op, reply.get("result"), self.config.max_observation_chars, walk=False)
            except BadReply as exc:
                self._fail(ProtocolViolation(f"invalid {op} result from the worker: {exc}"[:2000]))
        kind, code, error = reply.get("kind"), reply.get("code"), str(reply.get("error", ""))[:4000]
        code = code if isinstance(code, str) and (code in SANDBOX_FAILURE_CODES or code in FAILURE_CODES) else None
        if kind == "timeout":
            raise EnvTimeout(f"{op}: {error}", code="soft_timeout")
        if kind == "too_large":
            raise OutputTooLarge(f"{op}: {error}", code="output_too_large")
        if kind == "raised":
            raise EnvRaised(f"{op}: {error}", code=code or "exception")
        self._fail(ProtocolViolation(f"reply to {op} has an unknown kind {kind!r}"[:300], code="garbled_reply"))

    # -- lifecycle ------------------------------------------------------------------------------------------------
    def _death_note(self, when: str) -> str:
        try:
            rc = self.proc.wait(timeout=self._death_wait_s)  # type: ignore[union-attr]
        except subprocess.TimeoutExpired:
            return f"the worker stopped answering {when}"
        how = f"signal {signal.Signals(-rc).name}" if rc < 0 else f"exit code {rc}"
        return f"the worker died {when} ({how})"

    def _fail(self, error: SandboxError) -> None:
        self.kill()
        raise error

    def kill(self) -> None:
        """SIGKILL the worker's process group, reap it and remove its scratch dir.

        Safe to call twice; never raises, never blocks for long.
        """
        if self.dead:
            return
        self.dead = True
        if self.proc is not None:
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
            await_exit(self.proc.pid, 5.0)
            try:
                self.proc.wait(timeout=5.0)
            except subprocess.TimeoutExpired:
                self.proc.kill()
        for fd in self._fds:
            try:
                os.close(fd)
            except OSError:
                pass
        self._fds = []
        if self._cgroup is not None:
            self._cgroup.remove()
        self._scratch.remove()
        if self._uid is not None:  # only once nothing runs as it any more
            self._uid.release()
        reap_orphans()

    def close(self) -> None:
        """Ask the worker to exit, then make sure it is gone."""
        if not self.dead:
            try:
                self.call("close", timeout=1.0)
            except SandboxError:
                pass
        self.kill()
