"""Serve a checkpoint with ``vllm serve`` for the length of an evaluation, and always stop it afterwards.

The server runs in its own process group (vLLM starts engine and worker processes), logs to a file, and is
ready once ``GET /v1/models`` answers. Stopping sends SIGTERM to the whole group, then SIGKILL to whatever is
left after a grace period, so no GPU stays held by an orphan, whether the evaluation ended, failed or was
interrupted. The launcher is configurable so that tests can stand in a small fake server for vLLM.
"""

from __future__ import annotations

import json
import os
import shlex
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from types import FrameType, TracebackType
from typing import TextIO

from spade_envs.envs.errors import SpadeEnvError

__all__ = ["ModelServer", "ServeConfig", "ServeError", "sigterm_as_exit"]

LOG_TAIL_LINES = 40


class ServeError(SpadeEnvError):
    """The model server did not start, exited early or was not ready in time; the message holds its log tail."""


@dataclass(frozen=True)
class ServeConfig:
    """How to serve a checkpoint.

    Attributes:
        checkpoint: the model directory (Hugging Face format), passed as the first argument of ``command``.
        log_path: where the server's stdout and stderr go.
        command: the launcher, split like a shell would (``vllm serve``; tests use a fake server script).
        extra_args: more arguments for the launcher (``--tensor-parallel-size 8 --max-model-len 40960``).
        port: the port to serve on; 0 picks a free one.
        timeout_s: how long to wait for ``/v1/models`` (loading a large model takes minutes).
        grace_s: how long SIGTERM gets before SIGKILL when stopping.
        poll_s: seconds between readiness checks.
    """

    checkpoint: Path
    log_path: Path
    command: str = "vllm serve"
    extra_args: str = ""
    port: int = 0
    timeout_s: float = 1800.0
    grace_s: float = 30.0
    poll_s: float = 1.0

    def __post_init__(self) -> None:
        if not 0 <= self.port < 65536:
            raise ValueError(f"port must be in [0, 65536), got {self.port}")
        if self.timeout_s <= 0 or self.grace_s < 0 or self.poll_s <= 0:
            raise ValueError(f"timeout_s and poll_s must be > 0 and grace_s >= 0, got {self}")
        if not shlex.split(self.command):
            raise ValueError("command must not be empty")


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _port_taken(port: int) -> bool:
    with socket.socket() as probe:
        probe.settimeout(1.0)
        return probe.connect_ex(("127.0.0.1", port)) == 0


def _group_alive(pgid: int) -> bool:
    """Whether a live (not zombie) process is left in the group; zombies wait for a reaper, not for us."""
    proc = Path("/proc")
    if not proc.is_dir():
        try:
            os.killpg(pgid, 0)
        except ProcessLookupError:
            return False
        return True
    for stat in proc.glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue  # the process exited while we looked
        if int(fields[2]) == pgid and fields[0] != "Z":
            return True
    return False


class ModelServer:
    """``with ModelServer(config) as server:`` serves at ``server.base_url`` as ``server.model`` until the block ends.

    Entering starts the launcher and waits for readiness (raising :class:`ServeError` with the log tail when the
    process exits first or the timeout passes, after killing it); leaving stops the process group in every case.
    """

    def __init__(self, config: ServeConfig, progress: TextIO | None = sys.stderr) -> None:
        self.config, self.progress = config, progress
        self.port = config.port or _free_port()
        self.base_url = f"http://127.0.0.1:{self.port}/v1"
        self.model = ""
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def argv(self) -> list[str]:
        """The command line that starts the server."""
        c = self.config
        return [*shlex.split(c.command), str(c.checkpoint), "--host", "127.0.0.1", "--port", str(self.port),
                *shlex.split(c.extra_args)]  # fmt: skip

    def __enter__(self) -> ModelServer:
        if _port_taken(self.port):  # the readiness check would otherwise talk to someone else's server
            raise ServeError(f"port {self.port} is already in use; pick another with --serve-port")
        self.config.log_path.parent.mkdir(parents=True, exist_ok=True)
        try:
            with open(self.config.log_path, "wb") as log:
                self.process = subprocess.Popen(
                    self.argv, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
                )
        except OSError as exc:
            raise ServeError(f"could not start {shlex.join(self.argv)}: {exc}") from exc
        try:
            self.model = self._wait_ready()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()

    def log_tail(self, lines: int = LOG_TAIL_LINES) -> str:
        """The last ``lines`` lines of the server's log."""
        try:
            text = self.config.log_path.read_text(encoding="utf-8", errors="replace")
        except OSError:
            return "(no log)"
        return "\n".join(text.splitlines()[-lines:]) or "(empty log)"

    def _models(self) -> list[str] | None:
        """The served model names, or ``None`` while the server does not answer yet."""
        try:
            with urllib.request.urlopen(self.base_url + "/models", timeout=5) as response:
                return [m["id"] for m in json.loads(response.read())["data"]]
        except (OSError, ValueError, KeyError, TypeError, urllib.error.URLError):
            return None

    def _wait_ready(self) -> str:
        assert self.process is not None
        start = time.monotonic()
        command = shlex.join(self.argv)
        while True:
            waited = time.monotonic() - start
            code = self.process.poll()
            if code is not None:
                raise ServeError(f"{command} exited with code {code} before it was ready. Last lines of "
                                 f"{self.config.log_path}:\n{self.log_tail()}")  # fmt: skip
            models = self._models()
            if models:
                self._say(f"\rspade-eval: server ready on port {self.port} after {waited:.0f} s\n")
                return models[0]
            if waited > self.config.timeout_s:
                self.stop()
                raise ServeError(f"{command} was not ready after {self.config.timeout_s:g} s (--serve-timeout-s); "
                                 f"stopped it. Last lines of {self.config.log_path}:\n{self.log_tail()}")  # fmt: skip
            self._say(f"\rspade-eval: waiting for the server on port {self.port}: {waited:.0f} s of "
                      f"{self.config.timeout_s:g} s (log: {self.config.log_path})")  # fmt: skip
            time.sleep(self.config.poll_s)

    def _say(self, text: str) -> None:
        if self.progress is not None:
            self.progress.write(text)
            self.progress.flush()

    def stop(self) -> None:
        """SIGTERM the process group, SIGKILL it after ``grace_s``, reap the leader. Safe to call twice."""
        if self.process is None:
            return
        pgid = self.process.pid  # the leader of its own session, so its pid is the group id
        deadline = time.monotonic() + self.config.grace_s
        for sig in (signal.SIGTERM, signal.SIGKILL):
            try:
                os.killpg(pgid, sig)
            except ProcessLookupError:
                break
            while time.monotonic() < deadline and (self.process.poll() is None or _group_alive(pgid)):
                time.sleep(0.1)
            self.process.poll()
            if not _group_alive(pgid):
                break
            deadline = time.monotonic() + 10.0  # after SIGKILL, wait for the kernel to tear them down
        self.process.wait()
        self.process = None


@contextmanager
def sigterm_as_exit() -> Iterator[None]:
    """Turn SIGTERM into ``SystemExit(143)`` in the main thread so that ``with`` blocks clean up (as on Ctrl-C)."""

    def handler(signum: int, frame: FrameType | None) -> None:
        raise SystemExit(128 + signum)

    if threading.current_thread() is not threading.main_thread():  # only the main thread may set handlers
        yield
        return
    previous = signal.signal(signal.SIGTERM, handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)
