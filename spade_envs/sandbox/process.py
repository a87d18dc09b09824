"""Host side of one env worker: launch at an isolation level, call with a deadline, kill and reap.

The host never trusts a reply: sizes are capped, the sequence number must match, nothing unsolicited may arrive,
and every failure maps onto one typed :mod:`~spade_envs.sandbox.errors` exception. A worker that misbehaved is
killed (its whole process group) and must not be used again.
"""

from __future__ import annotations

import ctypes
import itertools
import json
import os
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from spade_envs.sandbox import protocol
from spade_envs.sandbox.config import SandboxConfig
from spade_envs.sandbox.errors import (
    EnvCrashed,
    EnvRaised,
    EnvTimeout,
    OutputTooLarge,
    ProtocolViolation,
    SandboxError,
)

__all__ = ["Worker", "become_subreaper", "reap_orphans"]

_ROOT = str(Path(__file__).resolve().parents[2])
_PACKAGE = str(Path(__file__).resolve().parents[1])
_WORKER = str(Path(__file__).resolve().with_name("worker.py"))
_uids = itertools.count(os.getpid() % 1000 * 1000)
_BASE_UID = 200_000


def become_subreaper() -> None:
    """Make this process adopt orphans of its workers (bubblewrap's inner processes) so they can be reaped."""
    ctypes.CDLL(None, use_errno=True).prctl(36, 1, 0, 0, 0)  # PR_SET_CHILD_SUBREAPER


def reap_orphans() -> int:
    """Reap zombie children that no ``Popen`` owns: worker processes re-parented to us after a kill."""
    reaped = 0
    for child in Path(f"/proc/{os.getpid()}/task").glob("*/children"):
        for pid in child.read_text().split():
            try:
                stat = Path(f"/proc/{pid}/stat").read_text()
            except OSError:
                continue
            name, state = stat[stat.index("(") + 1 : stat.rindex(")")], stat[stat.rindex(")") + 2]
            if state == "Z" and (name == "bwrap" or name.startswith("python")):
                try:
                    reaped += os.waitpid(int(pid), os.WNOHANG)[0] != 0
                except ChildProcessError:
                    pass
    return reaped


def _read_only_paths() -> list[str]:
    # The package itself, not the repository around it (which may hold a developer's secrets).
    paths = {"/usr", "/etc/ld.so.cache", "/etc/alternatives", "/etc/localtime", _PACKAGE}
    paths |= {sys.prefix, sys.base_prefix, sys.exec_prefix, os.path.dirname(os.path.realpath(sys.executable))}
    paths |= {p for p in sys.path if p and os.path.isdir(p) and not p.startswith(_ROOT)}
    return sorted(p for p in paths if os.path.exists(p))


def _bwrap_prefix(scratch: str) -> list[str]:
    # No tmpfs at /tmp: it would hide binds of paths under /tmp (a checkout, a venv, the scratch dir) mounted before
    # it, or let env code write beside them if mounted first. TMPDIR points at scratch instead (worker.py).
    args = ["bwrap", "--unshare-all", "--die-with-parent", "--cap-drop", "ALL", "--clearenv"]
    for link in ("/lib", "/lib64", "/bin", "/sbin"):
        if os.path.islink(link):
            args += ["--symlink", os.readlink(link), link]
        elif os.path.isdir(link):
            args += ["--ro-bind", link, link]
    paths = _read_only_paths()
    for path in paths:  # a path inside another bound path is already visible
        if not any(path != other and path.startswith(other.rstrip("/") + "/") for other in paths):
            args += ["--ro-bind", path, path]
    args += ["--bind", scratch, scratch, "--proc", "/proc", "--dev", "/dev"]
    # The sandbox's own root (a tmpfs holding the mount points) becomes read-only too: only scratch is writable.
    return args + ["--remount-ro", "/", "--chdir", scratch, "--uid", "65534", "--gid", "65534", "--"]


class Worker:
    """One worker process, started at ``level`` and ready for ``call``; use once, then :meth:`kill`."""

    def __init__(self, config: SandboxConfig, level: str) -> None:
        self.config, self.level = config, level
        self.scratch = tempfile.mkdtemp(prefix="spade-env-")
        self._seq = 0
        self._buffer = b""
        self.dead = False
        req_r, self._req_w = os.pipe()
        self._resp_r, resp_w = os.pipe()
        self._poller = select.poll()  # not select.select: that fails on descriptors >= 1024
        self._poller.register(self._resp_r, select.POLLIN)
        uid = _BASE_UID + next(_uids) % 100_000
        worker_cfg = {
            "rfd": req_r,
            "wfd": resp_w,
            "level": level,
            "root": _ROOT,
            "scratch": self.scratch,
            "uid": uid,
            "read_only": _read_only_paths(),
            "soft_timeout_s": config.soft_timeout_s,
            "max_request_bytes": config.max_request_bytes,
            "max_observation_chars": config.max_observation_chars,
            "preload_numpy": config.preload_numpy,
            "limits": {"memory_mb": config.memory_mb, "cpu_s": config.episode_cpu_s,
                       "file_size_mb": config.file_size_mb, "open_files": config.open_files,
                       "processes": config.processes},
        }  # fmt: skip
        cmd = [sys.executable, "-I", _WORKER, json.dumps(worker_cfg)]
        if level == "bwrap":
            cmd = _bwrap_prefix(self.scratch) + cmd
        try:
            self.proc = subprocess.Popen(
                cmd, pass_fds=(req_r, resp_w), stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL, start_new_session=True, env={}, close_fds=True,
            )  # fmt: skip
        finally:
            os.close(req_r)
            os.close(resp_w)
        self.started = time.monotonic()
        try:
            self.info = self._read_reply(0, config.start_timeout_s, "start")
        except SandboxError:
            self.kill()  # a worker that could not harden itself must not linger
            raise

    # -- calls ----------------------------------------------------------------------------------------------------
    def call(self, op: str, timeout: float | None = None, **payload: Any) -> Any:
        """Send one request and return its result, or raise a typed :class:`SandboxError`.

        After an error the worker is dead, unless the error is :class:`EnvRaised` or a soft :class:`EnvTimeout`.
        """
        if self.dead:
            raise EnvCrashed(f"worker {self.proc.pid} is no longer usable")
        if self._buffer or self._poller.poll(0):
            self._fail(ProtocolViolation("the worker sent data nobody asked for"))
        self._seq += 1
        data = protocol.encode({"seq": self._seq, "op": op, **payload})
        if len(data) > self.config.max_request_bytes:
            raise OutputTooLarge(f"{op} request of {len(data)} bytes exceeds {self.config.max_request_bytes}")
        try:
            while data:
                data = data[os.write(self._req_w, data) :]
        except (BrokenPipeError, OSError):
            self._fail(EnvCrashed(self._death_note("before the request could be sent")))
        return self._read_reply(self._seq, timeout or self.config.call_timeout_s, op)

    def _read_reply(self, seq: int, timeout: float, op: str) -> Any:
        deadline = time.monotonic() + timeout
        cap = self.config.max_response_bytes
        while b"\n" not in self._buffer:
            if not self._wait_readable(deadline):
                self._fail(EnvTimeout(f"{op} did not answer within {timeout:g} s; the worker was killed"))
            chunk = os.read(self._resp_r, 1 << 16)
            if not chunk:
                self._fail(EnvCrashed(self._death_note(f"during {op}")))
            self._buffer += chunk
            if len(self._buffer) > cap and b"\n" not in self._buffer[:cap]:
                self._fail(OutputTooLarge(f"{op} reply exceeds {cap} bytes; the worker was killed"))
        line, self._buffer = self._buffer.split(b"\n", 1)
        if len(line) > cap:
            self._fail(OutputTooLarge(f"{op} reply exceeds {cap} bytes; the worker was killed"))
        try:
            reply = protocol.decode(line)
        except ValueError as exc:
            self._fail(ProtocolViolation(f"unparseable reply to {op}: {exc}"))
        if reply.get("seq") != seq or not isinstance(reply.get("ok"), bool):
            self._fail(ProtocolViolation(f"reply to {op} carries seq {reply.get('seq')!r}, expected {seq}"))
        if self._buffer:
            self._fail(ProtocolViolation(f"extra data after the reply to {op}"))
        if reply["ok"]:
            return reply.get("result")
        kind, code, error = reply.get("kind"), str(reply.get("code", "")), str(reply.get("error", ""))[:4000]
        if kind == "timeout":
            raise EnvTimeout(f"{op}: {error}")
        if kind == "too_large":
            raise OutputTooLarge(f"{op}: {error}")
        raise EnvRaised(f"{op}: {error}", code=code or "exception")

    def _wait_readable(self, deadline: float) -> bool:
        """Busy-poll briefly (fast replies arrive within microseconds), then sleep in ``poll`` until the deadline."""
        spin_until = time.perf_counter() + self.config.reply_spin_us / 1e6
        while time.perf_counter() < spin_until:
            if self._poller.poll(0):
                return True
            os.sched_yield()
        left = deadline - time.monotonic()
        return left > 0 and bool(self._poller.poll(max(1, int(left * 1000))))

    # -- lifecycle ------------------------------------------------------------------------------------------------
    def _death_note(self, when: str) -> str:
        try:
            rc = self.proc.wait(timeout=1.0)
        except subprocess.TimeoutExpired:
            return f"the worker stopped answering {when}"
        how = f"signal {signal.Signals(-rc).name}" if rc < 0 else f"exit code {rc}"
        return f"the worker died {when} ({how})"

    def _fail(self, error: SandboxError) -> None:
        self.kill()
        raise error

    def kill(self) -> None:
        """SIGKILL the worker's process group, reap it and remove its scratch dir (safe to call twice)."""
        if self.dead:
            return
        self.dead = True
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        try:
            self.proc.wait(timeout=5.0)
        except subprocess.TimeoutExpired:
            self.proc.kill()
        for fd in (self._req_w, self._resp_r):
            try:
                os.close(fd)
            except OSError:
                pass
        shutil.rmtree(self.scratch, ignore_errors=True)
        reap_orphans()

    def close(self) -> None:
        """Ask the worker to exit, then make sure it is gone."""
        if not self.dead:
            try:
                self.call("close", timeout=1.0)
            except SandboxError:
                pass
        self.kill()
