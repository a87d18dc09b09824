"""`import-pool`: reference-format games validated in the sandbox under the compatibility mode."""

from __future__ import annotations

import json
import os
import shutil
import socket
from pathlib import Path

import pytest

from spade_envs.cli.main import main
from spade_envs.design.import_pool import ImportError_, import_pool
from spade_envs.design.validate import ValidationConfig
from spade_envs.envs.episode import play, solution_policy
from spade_envs.envs.reference_compat import wrap_reference_game
from spade_envs.envs.spec import EnvSpec
from spade_envs.sandbox import RemoteEnv, SandboxConfig, WorkerPool

FIXTURES = Path(__file__).parents[1] / "data" / "reference_pool"

# Tries to leave the sandbox when the module loads (write a host file, run a shell, connect to a host socket), then
# behaves as a valid game whose first observation reports what each attempt got.
ESCAPE = """
_tried = {}
def _attempt(name, fn):
    try:
        fn()
        _tried[name] = "ESCAPED"
    except BaseException as exc:
        _tried[name] = type(exc).__name__

import os
_attempt("write", lambda: open(TARGET, "w").write("out"))
_attempt("shell", lambda: os.system("touch " + TARGET + ".sh") == 0 or 1 / 0)
_attempt("socket", lambda: __import__("socket").create_connection(("127.0.0.1", PORT), timeout=1))

class EscapeEnv:
    max_turns = 4
    def reset(self, seed=None):
        self.secret = random.Random(seed).randint(1000, 9999)
        return "attempts: " + json.dumps(_tried, sort_keys=True), {}
    def step(self, action):
        won = action == "\\\\boxed{" + str(self.secret) + "}"
        return ("yes" if won else "no"), float(won), True, False, {}
    def solution(self):
        return ["\\\\boxed{%d}" % self.secret]
"""


CRASH = """
class CrashEnv:
    max_turns = 3
    def reset(self, seed=None):
        return "go", {}
    def step(self, action):
        return 1 / 0
    def solution(self):
        return "x"
"""


@pytest.fixture(scope="module")
def pool():
    with WorkerPool(SandboxConfig(call_timeout_s=3.0, soft_timeout_s=1.0, pool_size=2)) as p:
        assert p.level != "none"
        yield p


@pytest.fixture
def folder(tmp_path):
    src = tmp_path / "games"
    shutil.copytree(FIXTURES, src)
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(1)
    target = tmp_path / "escaped"
    (src / "game_broken.py").write_text("class BrokenEnv:\n    def reset(self seed=None):\n        return 'x', {}\n")
    (src / "game_escape.py").write_text(f"TARGET = {str(target)!r}\nPORT = {listener.getsockname()[1]}\n{ESCAPE}")
    yield src, target, listener
    listener.close()


CONFIG = ValidationConfig(n_seeds=2, probe_seeds=1, random_episodes=1, budget_s=60.0)


def test_import_pool_admits_reference_games_and_rejects_the_rest(pool, folder, tmp_path):
    src, target, listener = folder
    out = tmp_path / "pool"
    result = import_pool(src, out, pool, config=CONFIG, progress=lambda _line: None)
    verdicts = {g.source_file: g.code or "imported" for g in result.games}
    assert verdicts == {
        "game_broken.py": "syntax_error",
        "game_digits.py": "imported",
        "game_escape.py": "imported",
        "game_hang.py": "timeout",
        "game_no_class.py": "no_env_class",
        "game_vault.py": "imported",
    }
    assert result.imported == 3
    assert result.rejected_by_code() == {"no_env_class": 1, "syntax_error": 1, "timeout": 1}
    # nothing left the sandbox: no host file, no shell, no connection
    assert not target.exists() and not Path(f"{target}.sh").exists()
    listener.settimeout(0.1)
    with pytest.raises(TimeoutError):
        listener.accept()
    # the pool is what the env pool's fixed_env.pool_dir reads: manifest rows + envs/<env_id>.py for valid rows
    rows = [json.loads(line) for line in (out / "manifest.jsonl").read_text().splitlines()]
    assert len(rows) == 6
    valid = {r["env_id"]: r for r in rows if r["valid"]}
    assert sorted(valid) == ["ref_game_digits", "ref_game_escape", "ref_game_vault"]
    assert sorted(p.stem for p in (out / "envs").glob("*.py")) == sorted(valid)
    assert valid["ref_game_vault"]["skill"] == "Logical Deduction" and valid["ref_game_vault"]["doc_id"] == "doc-17"
    assert valid["ref_game_escape"]["skill"] == "unknown"
    assert valid["ref_game_vault"]["max_turns"] == 12 and valid["ref_game_digits"]["max_turns"] == 3
    assert valid["ref_game_vault"]["solution_turns"] == [3, 3]
    specs = [EnvSpec(r["env_id"], "games", r["skill"], (out / "envs" / f"{r['env_id']}.py").read_text(),
                     doc_id=r.get("doc_id")) for r in rows if r.get("valid")]  # fmt: skip
    assert [s.sha256 for s in specs] == [valid[s.env_id]["sha256"] for s in specs]

    # the imported source plays in the sandbox: the escape attempts were all refused inside the worker
    env = RemoteEnv((out / "envs" / "ref_game_escape.py").read_text(), pool)
    try:
        obs, _ = env.reset(3)
        tried = json.loads(obs.removeprefix("attempts: "))
        assert set(tried) == {"write", "shell", "socket"} and "ESCAPED" not in tried.values()
    finally:
        env.close()


def test_scoring_rules_on_partial_rewards(pool):
    """The vault pays 0.3 + 0.3 + 0.4: a win under "total", an outcome of 0.4 under the reference scorer's "final"."""
    source = (FIXTURES / "game_vault.py").read_text()
    outcomes = {}
    for scoring in ("total", "final"):
        env = RemoteEnv(wrap_reference_game(source, "game_vault.py", scoring=scoring), pool)
        try:
            assert env.class_name == "ReferenceGameEnv" and env.max_turns == 12
            env.reset(5)
            actions = env.solution()
            assert len(actions) == 3 and all(a.isdigit() for a in actions)  # \boxed{} lines unwrapped
            outcomes[scoring] = play(env, solution_policy(actions, "games"), 5, setting="games").outcome
        finally:
            env.close()
    assert outcomes == {"total": 1.0, "final": 0.4}


def test_step_faults_end_the_episode_with_a_loss(pool):
    source = CRASH
    env = RemoteEnv(wrap_reference_game(source, "game_crash.py"), pool)
    try:
        env.reset(0)
        _obs, reward, terminated, truncated, info = env.step("anything")
        assert (reward, terminated, truncated, info) == (-1.0, True, False, {"compat_error": 1})
    finally:
        env.close()


def test_cli_prints_the_table_and_refuses_an_existing_pool(folder, tmp_path, capsys):
    src, _target, _listener = folder
    for name in ("game_hang.py", "game_escape.py"):
        (src / name).unlink()
    out = tmp_path / "cli_pool"
    argv = ["import-pool", str(src), "--out", str(out), "--seeds", "1", "--timeout-s", "1"]
    assert main(argv) == 0
    printed = capsys.readouterr().out
    counts = {line.split()[0]: line.split()[1] for line in printed.splitlines()[2:] if len(line.split()) > 1}
    assert {k: counts.get(k) for k in ("imported", "syntax_error", "no_env_class")} == {
        "imported": "2",
        "syntax_error": "1",
        "no_env_class": "1",
    }
    assert "2/4 games imported" in printed
    assert main(argv) == 2
    assert "already holds a pool" in capsys.readouterr().err
    with pytest.raises(ImportError_, match="holds no game_"):
        import_pool(tmp_path, tmp_path / "x", None)  # type: ignore[arg-type]


def test_import_pool_stats_before_it_reads(tmp_path):
    """Issue 24, finding 10: read_bytes() ran before the size check; a link to /dev/zero ended in MemoryError."""
    src = tmp_path / "games"
    src.mkdir()
    (src / "game_zero.py").symlink_to("/dev/zero")
    os.mkfifo(src / "game_fifo.py")  # reading it would block forever
    with open(src / "game_huge.py", "wb") as huge:
        huge.truncate(1 << 40)  # sparse: a terabyte that must never be read
    result = import_pool(src, tmp_path / "pool", None, config=CONFIG, progress=lambda _line: None)  # type: ignore[arg-type]
    verdicts = {g.source_file: g.code for g in result.games}
    assert verdicts == {"game_fifo.py": "unreadable", "game_huge.py": "too_large", "game_zero.py": "unreadable"}
