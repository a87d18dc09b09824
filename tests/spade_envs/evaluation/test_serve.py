"""``--serve-checkpoint``: a fake vLLM started, waited for, evaluated through and always stopped, group and all."""

from __future__ import annotations

import io
import json
import shlex
import socket
import sys
from pathlib import Path

import pytest
from eval_oracle import DATA

from spade_envs.evaluation.cli import main
from spade_envs.evaluation.serve import ModelServer, ServeConfig, ServeError

FAKE = f"{shlex.quote(sys.executable)} {shlex.quote(str(Path(__file__).with_name('fake_vllm.py')))}"


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state != "Z"  # a zombie is dead, only waiting for its reaper


def _pids(path: Path) -> list[int]:
    return list(json.loads(path.read_text()).values())


def _argv(tmp_path: Path, *extra: str) -> list[str]:
    return ["--serve-checkpoint", str(tmp_path / "ckpt"), "--serve-command", FAKE, "--suite", "aime25", "--data-dir",
            str(DATA), "--samples", "1", "--out", str(tmp_path / "out"), "--quiet", *extra]  # fmt: skip


def test_serves_evaluates_through_it_and_stops_the_whole_group(tmp_path, capsys):
    pid_file = tmp_path / "pids.json"
    assert main(_argv(tmp_path, "--serve-args", f"--pid-file {pid_file}")) == 0
    assert "| aime25 " in capsys.readouterr().out
    assert pid_file.exists() and not any(map(_alive, _pids(pid_file)))
    settings = json.loads((tmp_path / "out" / "results.json").read_text())["settings"]
    assert settings["model"] == str(tmp_path / "ckpt") and settings["base_url"].startswith("http://127.0.0.1:")
    assert settings["served"]["argv"][-2:] == ["--pid-file", str(pid_file)]
    assert (tmp_path / "out" / "serve.log").read_text().startswith(f"loading model {tmp_path / 'ckpt'}\nready")


def test_a_server_never_ready_is_killed_after_the_timeout(tmp_path, capsys):
    pid_file = tmp_path / "pids.json"
    argv = _argv(tmp_path, "--serve-args", f"--pid-file {pid_file} --never-ready", "--serve-timeout-s", "3")
    assert main(argv) == 1
    err = capsys.readouterr().err
    assert "was not ready after 3 s (--serve-timeout-s); stopped it" in err and "loading model" in err
    assert not any(map(_alive, _pids(pid_file)))
    assert not (tmp_path / "out" / "results.json").exists()


def test_a_server_that_exits_at_once_shows_its_log(tmp_path, capsys):
    crash = f"{shlex.quote(sys.executable)} -c 'import sys; print(\"CUDA out of memory\"); sys.exit(3)'"
    assert main(_argv(tmp_path, "--serve-command", crash)) == 1
    err = capsys.readouterr().err
    assert "exited with code 3 before it was ready" in err and "CUDA out of memory" in err


def test_interrupt_stops_a_server_that_ignores_sigterm(tmp_path):
    pid_file, progress = tmp_path / "pids.json", io.StringIO()
    config = ServeConfig(tmp_path / "ckpt", tmp_path / "serve.log", FAKE, f"--pid-file {pid_file} --ignore-term",
                         grace_s=0.5, poll_s=0.1)  # fmt: skip
    with pytest.raises(KeyboardInterrupt), ModelServer(config, progress=progress) as server:
        assert server.model == str(tmp_path / "ckpt") and all(map(_alive, _pids(pid_file)))
        raise KeyboardInterrupt
    assert not any(map(_alive, _pids(pid_file)))
    assert "waiting for the server" in progress.getvalue() and "server ready on port" in progress.getvalue()
    server.stop()  # safe twice


def test_a_taken_port_is_refused(tmp_path):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        config = ServeConfig(tmp_path / "ckpt", tmp_path / "serve.log", FAKE, port=taken.getsockname()[1])
        with pytest.raises(ServeError, match="is already in use; pick another with --serve-port"):
            ModelServer(config).__enter__()
