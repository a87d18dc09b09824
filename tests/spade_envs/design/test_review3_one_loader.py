"""One loader path (issue 37, review 3, finding 8): validation looks like training from inside the env's process.

Validation ran env code under ``<generated env>``, ``import_pool`` under the game's own file name, training and
measurement under ``<env>``: an env that checks its ``__file__`` (or ``co_filename``, or a traceback) could play
honestly in validation only, and the first-episode check, loading under validation's name, could not see it. Here
one env records what its own process shows it (``__file__``, ``__name__``, ``co_filename``, a traceback's file
name, its sorted globals, ``sys.argv``, ``sys.orig_argv``, the order of its first calls) in every context that
loads env code, through the real sandbox; all must be identical. Timing cannot be made identical (docs/sandbox.md).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from spade_envs.design.import_pool import import_pool
from spade_envs.design.measure import vet_hint_on_seeds
from spade_envs.design.validate import ValidationConfig, validate_source
from spade_envs.envs.loader import load_env_class
from spade_envs.sandbox import AsyncSandboxEnv, SandboxConfig, WorkerPool
from spade_envs.sandbox.process import PendingCall, Worker

OBSERVER = """
import sys
import traceback


def _traceback_file():
    try:
        raise RuntimeError("where am I?")
    except RuntimeError as exc:
        return traceback.extract_tb(exc.__traceback__)[-1].filename


LOADED = {
    "__file__": globals().get("__file__"),
    "__name__": __name__,
    "co_filename": sys._getframe().f_code.co_filename,
    "traceback": _traceback_file(),
    "globals": sorted(globals()),
    "argv": list(sys.argv),
    "orig_argv": list(getattr(sys, "orig_argv", [])),
}
CALLS = []


class ObserverEnv:
    max_turns = 3

    def __init__(self):
        CALLS.append("__init__")

    def reset(self, seed=None):
        CALLS.append("reset")
        self.code = str((seed or 0) * 7919 % 1000003).zfill(6)
        return "Find the six-digit code.", {"loaded": LOADED, "calls": list(CALLS)}

    def step(self, action):
        CALLS.append("step")
        won = action.strip() == self.code
        return ("right" if won else "wrong"), float(won), won, False, {"calls": list(CALLS)}

    def solution(self):
        CALLS.append("solution")
        return [self.code]
"""

#: A reference-format game for ``import_pool``: its wrapper (the module the loader made) is the caller of reset.
REFERENCE_GAME = """
import hashlib, json, sys

class ObserverEnv:
    max_turns = 3

    def reset(self, seed=None):
        caller = sys._getframe(1)  # the compatibility wrapper's reset, in the module the loader made
        seen = {"__file__": caller.f_globals.get("__file__"), "__name__": caller.f_globals.get("__name__"),
                "co_filename": caller.f_code.co_filename, "globals": sorted(caller.f_globals),
                "argv": list(sys.argv), "orig_argv": list(getattr(sys, "orig_argv", []))}
        self.code = str((seed or 0) * 7919 % 1000003).zfill(6)
        info = {"file": str(seen["__file__"]), "name": str(seen["__name__"]),
                "digest": hashlib.sha256(json.dumps(seen, sort_keys=True).encode()).hexdigest()}
        return "Find the six-digit code.", info

    def step(self, action):
        won = action == "\\\\boxed{" + self.code + "}"
        return ("right" if won else "wrong"), float(won), won, False, {}

    def solution(self):
        return ["\\\\boxed{" + self.code + "}"]
"""

CONFIG = ValidationConfig(n_seeds=1, probe_seeds=0, random_episodes=1, max_turns=3, first_episode_seeds=1)


class Observed:
    """What each worker's env reported, by worker, in the order the workers were first called, with the context."""

    def __init__(self) -> None:
        self.context = ""
        self.workers: dict[Worker, dict[str, Any]] = {}

    def record(self, worker: Worker, op: str, result: Any) -> None:
        seen = self.workers.setdefault(worker, {"context": self.context, "ops": []})
        seen["ops"].append(op)
        if op == "reset" and "loaded" not in seen:
            seen["loaded"] = result[1]
        if op == "step" and "calls" not in seen:
            seen["calls"] = result[4].get("calls")

    def of(self, context: str) -> list[dict[str, Any]]:
        return [seen for seen in self.workers.values() if seen["context"] == context]


@pytest.fixture(scope="module")
def pool() -> Iterator[WorkerPool]:
    with WorkerPool(SandboxConfig(pool_size=0, preload_numpy=False)) as pool:
        assert pool.level != "none"
        yield pool


@pytest.fixture
def observed(monkeypatch: pytest.MonkeyPatch) -> Observed:
    """Records every reply of every real worker call (the call itself is untouched).

    ``Worker.finish`` reads every reply: of ``Worker.call`` and of the asyncio client's I/O thread alike.
    """
    seen, finish = Observed(), Worker.finish

    def recording(self: Worker, pending: PendingCall) -> Any:
        result = finish(self, pending)
        seen.record(self, pending.op, result)
        return result

    monkeypatch.setattr(Worker, "finish", recording)
    return seen


async def _training_play(source: str, pool: WorkerPool, seed: int, action: str) -> None:
    """A training (or measurement) play as ``recipe/spade/play.py`` runs one: create, reset, (tools), steps."""
    env = await AsyncSandboxEnv.create(source, pool)
    try:
        await env.reset(seed)
        if env.setting == "tool_use":
            await env.tools()
        await env.step(action)
    finally:
        await env.close()


def test_env_sees_the_same_process_in_validation_first_episode_check_and_training(pool, observed) -> None:
    observed.context = "validation"
    report = validate_source(OBSERVER, pool, CONFIG, key="observer")
    assert report.ok, report
    observed.context = "hint vetting"
    vet_hint_on_seeds(OBSERVER, "Try every code in order.", pool, "games", report.seeds)
    observed.context = "training"
    asyncio.run(_training_play(OBSERVER, pool, report.seeds[0], "123456"))

    validation = observed.of("validation")
    main, second, first_episodes = validation[0], validation[1], validation[2:]
    assert len(first_episodes) == 3 and all(w["ops"][:3] == ["init", "reset", "step"] for w in first_episodes)
    everywhere = [*validation, *observed.of("hint vetting"), *observed.of("training")]
    loaded = {json.dumps(w["loaded"], sort_keys=True) for w in everywhere}
    assert len(loaded) == 1, "env code can tell these loads apart:\n" + "\n".join(sorted(loaded))
    # the calls before the first step: training's order, and the first-episode check's
    training = observed.of("training")[0]["calls"]
    assert training == ["__init__", "reset", "step"]
    assert [w["calls"] for w in first_episodes] == [training] * 3
    assert second["calls"] == training  # the cross-worker replay starts with its probes: reset, then steps
    # validation's first worker asks for solution() before any step, by design: the first-episode check exists for it
    assert "solution" in main["calls"]

    # an in-process load of trusted code (built-ins, tests, tools) takes the same path: same names, same globals
    in_process = dict(load_env_class(OBSERVER).reset.__globals__["LOADED"])
    in_worker = json.loads(loaded.pop())["loaded"]
    assert {k: v for k, v in in_process.items() if "argv" not in k} == {
        k: v for k, v in in_worker.items() if "argv" not in k
    }


def test_imported_game_sees_the_same_process_in_import_pool_and_training(pool, observed, tmp_path: Path) -> None:
    games = tmp_path / "games"
    games.mkdir()
    (games / "game_observer.py").write_text(REFERENCE_GAME)
    observed.context = "import_pool"
    result = import_pool(games, tmp_path / "pool", pool, config=CONFIG, progress=lambda line: None)
    (game,) = result.games
    assert game.valid, game
    observed.context = "training"
    source = (tmp_path / "pool" / "envs" / f"{game.env_id}.py").read_text()
    asyncio.run(_training_play(source, pool, 12345, "123456"))

    seen = {json.dumps(w["loaded"], sort_keys=True) for w in [*observed.of("import_pool"), *observed.of("training")]}
    assert len(seen) == 1, "env code can tell import_pool's validation from training:\n" + "\n".join(sorted(seen))
