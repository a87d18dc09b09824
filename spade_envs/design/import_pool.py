"""Import a curated pool of reference-format games (``game_*.py``) as a pool that ``spade.fixed_env.pool_dir`` plays.

Each game is wrapped by the compatibility mode (:mod:`spade_envs.envs.reference_compat`) and validated like a designed
environment, in the sandbox (:func:`spade_envs.design.validate.validate_source`): admitted games are written as
``OUT/envs/<env_id>.py`` (the wrapped source) and every game gets a line in ``OUT/manifest.jsonl`` (``valid``,
``skill``, failure ``code`` and ``reason``), the layout ``spade-envs generate`` writes and the env pool reads.

A ``manifest.jsonl`` next to the games is optional; a row naming a game file (key ``file``, ``filename``,
``game_file``, ``path`` or ``game``) lends it its ``skill`` and ``doc_id``. Games without a row get skill
``unknown``.
"""

from __future__ import annotations

import json
import os
import re
import stat
import sys
from collections import Counter
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from spade_envs.design.validate import ValidationConfig, validate_source
from spade_envs.envs.errors import SpadeEnvError
from spade_envs.envs.reference_compat import COMPAT_CODE_PREFIX, wrap_reference_game
from spade_envs.envs.spec import source_sha256
from spade_envs.sandbox.pool import WorkerPool

__all__ = ["IMPORT_CODES", "ImportError_", "ImportResult", "ImportedGame", "import_pool"]

#: Codes of the importer itself, besides validation's (``spade_envs.envs.failures.FAILURE_CODES``).
IMPORT_CODES = {
    "unreadable": "the file is not a regular file (a link, device or FIFO), or not UTF-8 text",
    "too_large": "the file exceeds the importer's size cap",
}
_MAX_BYTES = 512 * 1024
_FILE_KEYS = ("file", "filename", "game_file", "path", "game")
_COMPAT_CODE = re.compile(re.escape(COMPAT_CODE_PREFIX) + r"([a-z_]+):")


class ImportError_(SpadeEnvError):  # noqa: N801  (ImportError is a builtin)
    """The source folder or the output folder cannot be used."""


@dataclass
class ImportedGame:
    """One game file and what became of it (``code`` is ``None`` exactly when ``valid``)."""

    env_id: str
    source_file: str
    skill: str
    valid: bool = False
    code: str | None = None
    reason: str = ""
    doc_id: str | None = None
    max_turns: int = 0
    solution_turns: list[int] = field(default_factory=list)
    scoring: str = "total"
    setting: str = "games"
    sha256: str = ""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class ImportResult:
    """Every game of the folder, in file-name order."""

    games: list[ImportedGame]
    out_dir: Path

    @property
    def imported(self) -> int:
        return sum(g.valid for g in self.games)

    def rejected_by_code(self) -> dict[str, int]:
        return dict(sorted(Counter(g.code for g in self.games if not g.valid and g.code).items()))


def _manifest_rows(src: Path) -> dict[str, dict[str, Any]]:
    path = src / "manifest.jsonl"
    rows: dict[str, dict[str, Any]] = {}
    if not path.is_file():
        return rows
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as exc:
            raise ImportError_(f"{path}:{number}: not JSON ({exc.msg})") from exc
        name = next((row[k] for k in _FILE_KEYS if isinstance(row, dict) and isinstance(row.get(k), str)), None)
        if name:
            rows[Path(name).name] = row
    return rows


def _read_capped(path: Path) -> tuple[bytes | None, tuple[str, str]]:
    """A regular file's bytes, at most ``_MAX_BYTES``; else ``None`` and ``(code, reason)``.

    Stat first (without following a link: a ``game_*.py`` may point at ``/dev/zero`` or a FIFO), then read at most
    the cap from the file opened without following links, and check it is the file that was stat'ed.
    """
    try:
        before = path.lstat()
        if not stat.S_ISREG(before.st_mode):
            return None, ("unreadable", "not a regular file (a link, device, FIFO or folder)")
        if before.st_size > _MAX_BYTES:
            return None, ("too_large", f"{before.st_size} bytes > {_MAX_BYTES}")
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as exc:
        return None, ("unreadable", str(exc)[:200])
    try:
        opened = os.fstat(fd)
        if not stat.S_ISREG(opened.st_mode) or (opened.st_dev, opened.st_ino) != (before.st_dev, before.st_ino):
            return None, ("unreadable", "the file changed while it was opened")
        with os.fdopen(os.dup(fd), "rb") as file:
            data = file.read(_MAX_BYTES + 1)
    finally:
        os.close(fd)
    if len(data) > _MAX_BYTES:  # grew after the stat
        return None, ("too_large", f"more than {_MAX_BYTES} bytes")
    return data, ("", "")


def _env_id(path: Path, taken: set[str]) -> str:
    base = "ref_" + re.sub(r"[^A-Za-z0-9_]", "_", path.stem)[:80]
    env_id, n = base, 1
    while env_id in taken:
        n += 1
        env_id = f"{base}_{n}"
    taken.add(env_id)
    return env_id


def _compat_code(code: str | None, reason: str) -> str | None:
    """The wrapper reports a game's syntax error or missing class as exec_error; give them their own codes."""
    match = _COMPAT_CODE.search(reason)
    return match.group(1) if code == "exec_error" and match else code


def import_pool(
    src_dir: str | Path,
    out_dir: str | Path,
    pool: WorkerPool,
    *,
    scoring: str = "total",
    config: ValidationConfig | None = None,
    jobs: int = 1,
    progress: Callable[[str], None] | None = None,
) -> ImportResult:
    """Validate every ``game_*.py`` of ``src_dir`` under the compatibility mode; write the admitted ones to ``out_dir``.

    ``config.max_turns`` is the run's turn cap (reference: 25). ``jobs`` games validate at once (size ``pool``'s
    ``max_workers`` for it). ``out_dir`` must not hold a pool already.
    """
    src, out = Path(src_dir), Path(out_dir)
    config = config or ValidationConfig()
    say = progress or (lambda line: print(line, file=sys.stderr, flush=True))
    if not src.is_dir():
        raise ImportError_(f"{src} is not a folder")
    files = sorted(src.glob("game_*.py"))
    if not files:
        raise ImportError_(f"{src} holds no game_*.py")
    if (out / "manifest.jsonl").exists():
        raise ImportError_(f"{out} already holds a pool (manifest.jsonl); choose an empty folder")
    rows, taken = _manifest_rows(src), set()
    games = []
    for path in files:
        row = rows.get(path.name, {})
        skill = row.get("skill") if isinstance(row.get("skill"), str) else "unknown"
        doc_id = row.get("doc_id") if isinstance(row.get("doc_id"), str) else None
        games.append(ImportedGame(_env_id(path, taken), path.name, skill, doc_id=doc_id, scoring=scoring))

    def run(job: tuple[Path, ImportedGame]) -> tuple[ImportedGame, str | None]:
        path, game = job
        data, why = _read_capped(path)
        if data is None:
            game.code, game.reason = why
            return game, None
        try:
            source = wrap_reference_game(data.decode("utf-8"), path.name, scoring=scoring, turn_cap=config.max_turns)
        except UnicodeDecodeError as exc:
            game.code, game.reason = "unreadable", str(exc)[:200]
            return game, None
        report = validate_source(source, pool, config, setting="games", key=path.name)
        game.valid, game.max_turns, game.solution_turns = report.ok, report.max_turns, report.solution_turns
        game.code, game.reason = _compat_code(report.code, report.reason), report.reason
        game.sha256 = source_sha256(source)
        return game, source if report.ok else None

    (out / "envs").mkdir(parents=True, exist_ok=True)
    with ThreadPoolExecutor(max_workers=max(1, jobs)) as executor, (out / "manifest.jsonl").open("w") as manifest:
        for n, (game, source) in enumerate(executor.map(run, zip(files, games)), 1):
            if source is not None:
                (out / "envs" / f"{game.env_id}.py").write_text(source, encoding="utf-8")
            manifest.write(json.dumps(game.to_dict()) + "\n")
            manifest.flush()
            say(f"[{n}/{len(games)}] {game.source_file}: {'imported' if game.valid else game.code}")
    return ImportResult(games, out)
