"""The user's ACEBench checkout: its files, its scenario classes run as ACEBench runs them, and our own checker.

ACEBench (MIT) is not on PyPI and the project vendors none of it: the user clones it (``ACEBENCH_ROOT``) and this
module reads the agent data, the possible answers and the English scenario classes from that checkout. The classes
are imported from their files (the checkout's root goes on ``sys.path`` only while importing, because they import
each other as ``model_inference.…``) and run in-process, as the BFCL suite runs BFCL's backends. The checks below
are our implementation of ACEBench's two agent metrics, keeping its documented behaviour and its quirks (see
``docs/evaluation.md``) so that the numbers stay comparable.
"""

from __future__ import annotations

import ast
import copy
import importlib
import inspect
import json
import re
import subprocess
import sys
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from spade_envs.envs.ast_parse import parse_source
from spade_envs.evaluation.suite import MissingEvalData

__all__ = [
    "CLONE",
    "KINDS",
    "PIN",
    "Scenario",
    "check_checkout",
    "check_end_to_end",
    "checkout_commit",
    "load_classes",
    "process_accuracy",
    "read_constant",
    "render_call",
    "required_paths",
]

PIN = "e6db74b"
CLONE = f"git clone https://github.com/ACEBench/ACEBench && git -C ACEBench checkout {PIN}"
KINDS = ("multi_step", "multi_turn")
_IMPORT_LOCK = threading.Lock()
_PACKAGE = "model_inference"


def required_paths(root: Path) -> list[Path]:
    """What the suite reads from a checkout: the agent data and answers, the scenario folders, the prompt files."""
    data = root / "data_all" / "data_en"
    paths = [data / f"data_agent_{kind}.json" for kind in KINDS]
    paths += [data / "possible_answer" / f"data_agent_{kind}.json" for kind in KINDS]
    paths += [root / _PACKAGE / kind / "scenariosen" for kind in KINDS]
    return paths + [root / _PACKAGE / "prompt_en.py", root / _PACKAGE / "multi_turn" / "APIModel_user.py"]


def check_checkout(root: Path | None) -> Path:
    """``root`` as a complete checkout, or :class:`MissingEvalData` naming what is missing and how to get it."""
    how = f"Get it with `{CLONE}` and pass --acebench-root (or set ACEBENCH_ROOT). See docs/evaluation.md."
    if root is None:
        raise MissingEvalData(f"suite acebench_agent needs an ACEBench checkout and none was given. {how}")
    missing = [str(p) for p in required_paths(Path(root)) if not p.exists()]
    if missing:
        raise MissingEvalData(f"suite acebench_agent: the ACEBench checkout {root} lacks {', '.join(missing)}. {how}")
    return Path(root)


def checkout_commit(root: Path) -> str | None:
    """The checkout's HEAD commit, for ``results.json`` (``None`` when it is not a git work tree)."""
    try:
        done = subprocess.run(["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return None
    commit = done.stdout.strip() if done.returncode == 0 else ""
    return commit or None


def read_constant(path: Path, name: str) -> str:
    """A module-level string constant of ``path``, read without running the file (it may import what we lack)."""
    for node in parse_source(path.read_text(encoding="utf-8")).body:
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == name for t in node.targets):
            value = ast.literal_eval(node.value)
            if isinstance(value, str):
                return value
    raise MissingEvalData(f"{path} defines no string {name}; is the ACEBench checkout at commit {PIN}?")


def _purge_other_checkout(root: Path) -> None:
    """Forget ``model_inference`` modules imported from another checkout (tests use more than one)."""
    loaded = sys.modules.get(_PACKAGE)
    if loaded is not None and str(root / _PACKAGE) not in list(getattr(loaded, "__path__", [])):
        for key in [k for k in sys.modules if k == _PACKAGE or k.startswith(_PACKAGE + ".")]:
            del sys.modules[key]
        importlib.invalidate_caches()


def load_classes(root: Path, kind: str, names: Sequence[str]) -> dict[str, type]:
    """The scenario classes ``names`` of ``model_inference/<kind>/scenariosen``, found by their ``class`` lines."""
    folder = root / _PACKAGE / kind / "scenariosen"
    where: dict[str, Path] = {}
    for path in sorted(folder.rglob("*.py")):
        for node in parse_source(path.read_text(encoding="utf-8")).body:
            if isinstance(node, ast.ClassDef):
                where.setdefault(node.name, path)
    missing = sorted(set(names) - set(where))
    if missing:
        raise MissingEvalData(f"no scenario class {missing} under {folder}; is the checkout at commit {PIN}?")
    classes: dict[str, type] = {}
    with _IMPORT_LOCK:
        _purge_other_checkout(root)
        sys.path.insert(0, str(root))
        try:
            for name in names:
                module = ".".join(where[name].relative_to(root).with_suffix("").parts)
                classes[name] = getattr(importlib.import_module(module), name)
        finally:
            sys.path.remove(str(root))
    return classes


def _jsonable(value: Any) -> Any:
    """What ACEBench compares: the state after its trip through the JSON result file (int keys become strings)."""
    return json.loads(json.dumps(value, default=str))


class Scenario:
    """Fresh instances of one item's classes, set up from ``initial_config`` and called the way ACEBench calls them.

    Each class loads its own config and then the ``BaseApi`` one (the phone classes inherit the Wi-Fi and login
    flags). A call runs on every instance that has a public method of that name, so ``turn_on_wifi`` switches on
    every phone class; the last result is returned.
    """

    def __init__(self, classes: dict[str, type], involved: Sequence[str], initial_config: dict[str, Any]) -> None:
        self.instances: dict[str, Any] = {}
        self.called = False
        for name in involved:
            instance = classes[name]()
            if hasattr(instance, "_load_scenario"):
                for config in (initial_config.get(name, {}), initial_config.get("BaseApi", {})):
                    instance._load_scenario(copy.deepcopy(config), long_context=False)
            self.instances[name] = instance

    def _call(self, name: str, arguments: Any) -> tuple[str, bool]:
        """Run one call: ``(result text, succeeded)``; errors are text for the model (a bad call is its problem)."""
        methods = [getattr(i, name, None) for i in self.instances.values()] if not name.startswith("_") else []
        methods = [m for m in methods if inspect.ismethod(m)]
        if not methods:
            return f"Error: there is no function named {name!r}", False
        if not isinstance(arguments, dict):
            return "Error: the arguments must be a JSON object", False
        try:
            for method in methods:
                result = method(**arguments)
        except Exception as exc:  # noqa: BLE001 (scenario code reports bad arguments by raising)
            return f"Error during execution: {type(exc).__name__}: {exc}", False
        return (result if isinstance(result, str) else json.dumps(result, default=str)), True

    def call(self, name: str, arguments: Any) -> str:
        """Run one call on its own (multi-step rules: it counts as a call even when it fails)."""
        return self.run_step([(name, arguments)], multi_turn=False)[0]

    def run_step(self, calls: Sequence[tuple[str, Any]], multi_turn: bool) -> list[str]:
        """Run one reply's calls the way ACEBench's runner of that kind does; one result text per call.

        Multi-step: every call runs, failures included, and any call made counts ("the state was recorded").
        Multi-turn: the calls run in order until one fails; the rest are not run, and the step counts only when
        every call succeeded, because ACEBench keeps the state only after a successful execution. So an episode
        whose calls all fail has no state and fails, whatever the ground truth says.
        """
        outputs: list[str] = []
        ok = True
        for name, arguments in calls:
            if multi_turn and not ok:
                outputs.append("Error: not run, because an earlier call of this step failed")
                continue
            text, succeeded = self._call(name, arguments)
            outputs.append(text)
            ok = ok and succeeded
        if calls and (ok or not multi_turn):
            self.called = True
        return outputs

    def states(self) -> dict[str, dict[str, Any]] | None:
        """Every class's public attributes as JSON would hold them, or ``None`` if no step counted (see run_step)."""
        if not self.called:
            return None
        return {name: _jsonable({k: v for k, v in vars(i).items() if not k.startswith("_")})
                for name, i in self.instances.items()}  # fmt: skip


def check_end_to_end(states: dict[str, dict[str, Any]] | None, ground_truth: Any) -> tuple[bool, list[str], list[str]]:
    """ACEBench's end-to-end check: ``(passed, errors, ground-truth classes left unchecked)``.

    As in ACEBench: no counted call at all fails (``states`` is ``None``); the class count must match; each
    attribute named in the ground truth must equal the final one, except that a dict attribute is compared only on
    the ground truth's keys (an extra message or reminder goes unnoticed). A ground-truth class whose name matches
    no involved class is not checked (the data misspells some, e.g. ``ReminderAPI``, ``BaseAPI``); those are
    returned so the record can show them.
    """
    expected = ground_truth if isinstance(ground_truth, list) else [ground_truth]
    if states is None:
        return False, ["no function was called"], []
    if len(expected) != len(states):
        return False, [f"ground truth has {len(expected)} classes, the item involves {len(states)}"], []
    errors: list[str] = []
    unchecked: list[str] = []
    for entry in expected:
        for cls, attributes in entry.items():
            if cls not in states:
                unchecked.append(cls)
                continue
            for attr, want in attributes.items():
                got = states[cls].get(attr, "<missing>")
                if isinstance(want, dict) and isinstance(got, dict):
                    errors += [f"{cls}.{attr}[{k!r}]: expected {v!r}, got {got.get(k, '<missing>')!r}"
                               for k, v in want.items() if got.get(k, "<missing>") != v]  # fmt: skip
                elif got != want:
                    errors.append(f"{cls}.{attr}: expected {want!r}, got {got!r}")
    return not errors, errors, unchecked


def _literal(value: Any) -> str:
    """ACEBench's call notation, quoting strings naively as its milestones do (``'Domino's'``)."""
    if isinstance(value, str):
        return f"'{value}'"
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(map(_literal, value)) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{_literal(k)}: {_literal(v)}" for k, v in value.items()) + "}"
    return repr(value)


def render_call(name: str, arguments: Any) -> str:
    """``name(key='value', ...)``: one call in ACEBench's notation (keyword order kept, as ACEBench compares text)."""
    if not isinstance(arguments, dict):
        return f"{name}({_literal(arguments)})"
    return f"{name}({', '.join(f'{k}={_literal(v)}' for k, v in arguments.items())})"


def _key(text: str) -> str:
    return re.sub(r"\s+", "", text)


def _milestone_key(milestone: str) -> str:
    """A milestone as a comparison key: parsed and re-rendered when it is valid Python, else its own text."""
    try:
        node = parse_source(milestone.strip(), mode="eval").body
        calls = node.elts if isinstance(node, ast.List) else [node]
        rendered = []
        for call in calls:
            if not isinstance(call, ast.Call) or not isinstance(call.func, ast.Name) or call.args:
                return _key(milestone)
            rendered.append(render_call(call.func.id, {k.arg: ast.literal_eval(k.value) for k in call.keywords}))
    except (SyntaxError, ValueError, TypeError):  # e.g. 'Domino's': compare the text as written
        return _key(milestone)
    return _key("[" + ", ".join(rendered) + "]")


def process_accuracy(steps: Sequence[str], milestones: Sequence[Any], passed: bool) -> float:
    """ACEBench's process accuracy: the share of milestones found in order among the model's call steps.

    ``steps`` are the model's call steps as ``[call, ...]`` strings (one per reply that made calls). A passed item
    scores 1; ``milestones`` may be a list of alternative lists (the best one counts); an empty list scores 1.
    Steps and milestones are compared as text with whitespace removed, after rendering both in one notation.
    """
    if passed:
        return 1.0
    alternatives = milestones if milestones and isinstance(milestones[0], list) else [milestones]
    keys = [_key(s) for s in steps]
    best = 0.0
    for alternative in alternatives:
        if not alternative:
            return 1.0
        found, position = 0, 0
        for milestone in map(_milestone_key, alternative):
            while position < len(keys) and keys[position] != milestone:
                position += 1
            if position < len(keys):
                found, position = found + 1, position + 1
        best = max(best, found / len(alternative))
    return best
