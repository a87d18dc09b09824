"""Checks of a run's ``spade:`` block that need no framework: shared by ``spade-envs doctor`` and ``main_spade``.

A typo in a corpus path or a skill name should stop a run in a second with one clear line, not after minutes of Ray
start-up (or after a 30B model has loaded) with the error repeated by every agent-loop worker.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from spade_envs.design.corpus import TEXT_KEYS
from spade_envs.design.rewards import VARIANTS
from spade_envs.envs.errors import SpadeEnvError
from spade_envs.envs.skills import SKILLS

__all__ = [
    "STATUSES",
    "Check",
    "SpadeConfigError",
    "check_spade_block",
    "exit_on_bad_spade_block",
    "require_spade_block",
    "rlve_timeouts_check",
]

#: A check's verdict: ``ok``; ``warn`` (the run can go on, something deserves a look); ``fail`` (it cannot).
STATUSES = ("ok", "warn", "fail")
#: Lines of a JSONL corpus read by the check (the loader reads them all; a bad head is what typos produce).
HEAD_LINES = 5


class SpadeConfigError(SpadeEnvError, ValueError):
    """The ``spade:`` block names something that does not exist or cannot be read."""


@dataclass(frozen=True)
class Check:
    """One preflight verdict: what was checked, what was found, and what to do when it is not ``ok``."""

    name: str
    status: str
    detail: str
    fix: str = ""

    def __post_init__(self) -> None:
        if self.status not in STATUSES:
            raise ValueError(f"status must be one of {STATUSES}, got {self.status!r}")

    def line(self) -> str:
        """``ok   name: detail`` (and ``-> fix`` unless ok): one console line."""
        fix = f" -> {self.fix}" if self.fix and self.status != "ok" else ""
        return f"{self.status:<4} {self.name}: {self.detail}{fix}"


def _get(block: Mapping[str, Any], dotted: str, default: Any = None) -> Any:
    node: Any = block
    for part in dotted.split("."):
        if not isinstance(node, Mapping) or part not in node:
            return default
        node = node[part]
    return node


def _corpus_paths(corpus: Any) -> list[Path]:
    if isinstance(corpus, (str, Path)):
        return [Path(corpus)]
    return [Path(p) for p in corpus]


def _head_verdict(path: Path) -> tuple[int, int]:
    """``(valid, read)`` over the first non-blank lines of a JSONL file: valid = an object with a non-empty text."""
    valid = read = 0
    with path.open("rb") as f:
        for raw in f:
            if not raw.strip():
                continue
            read += 1
            try:
                record = json.loads(raw)
            except (ValueError, RecursionError):
                record = None
            if isinstance(record, dict) and any(
                isinstance(record.get(k), str) and record[k].strip() for k in TEXT_KEYS
            ):
                valid += 1
            if read >= HEAD_LINES:
                break
    return valid, read


def _corpus_check(corpus: Any, required: bool) -> Check:
    fix = (
        "set spade.corpus (launchers: CORPUS=...) to a JSONL/Parquet file or folder, "
        "e.g. examples/data/sample_corpus.jsonl"
    )
    if not corpus:
        if required:
            return Check("corpus", "fail", "spade.corpus is not set, and games are designed from documents",
                         fix + ", or spade.designer.grounding=concepts")  # fmt: skip
        return Check("corpus", "ok", "not needed (no designer documents in this setting)")
    found = []
    for path in _corpus_paths(corpus):
        if not path.exists():
            return Check("corpus", "fail", f"{path} does not exist (cwd {Path.cwd()})", fix)
        if path.is_dir():
            entries = [p.name for p in path.iterdir()]
            if not any(n.endswith((".jsonl", ".parquet")) or n in ("dataset_info.json", "state.json",
                                                                    "dataset_dict.json") for n in entries):  # fmt: skip
                return Check("corpus", "fail", f"folder {path} holds no *.jsonl, *.parquet or saved dataset", fix)
            found.append(f"{path} (folder)")
            continue
        if path.suffix not in (".jsonl", ".parquet"):
            return Check("corpus", "fail", f"{path} is neither .jsonl nor .parquet", fix)
        if path.suffix == ".parquet":
            found.append(f"{path} (parquet, not parsed here)")
            continue
        try:
            valid, read = _head_verdict(path)
        except OSError as exc:
            return Check("corpus", "fail", f"{path} cannot be read: {exc}", "check the file's permissions")
        if valid == 0:
            keys = " or ".join(repr(k) for k in TEXT_KEYS)
            return Check("corpus", "fail",
                         f"{path}: none of its first {read} lines is a JSON object with a non-empty {keys}",
                         "give each line a JSON object with the document under 'text' (or 'orig_doc')")  # fmt: skip
        found.append(f"{path} (first {read} lines: {valid} documents)")
    return Check("corpus", "ok", "; ".join(found))


def _fixed_pool_check(pool_dir: Any) -> Check:
    if not pool_dir:
        return Check("fixed pool", "ok", "the built-in environments of the setting")
    folder = Path(str(pool_dir))
    fix = "point spade.fixed_env.pool_dir at a `spade-envs generate` or `spade-envs import-pool` output folder"
    if not folder.is_dir():
        return Check("fixed pool", "fail", f"{folder} is not a folder", fix)
    manifest = folder / "manifest.jsonl"
    if not manifest.is_file():
        return Check("fixed pool", "fail", f"{folder} has no manifest.jsonl", fix)
    valid = missing = 0
    for number, line in enumerate(manifest.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except ValueError:
            return Check("fixed pool", "fail", f"{manifest} line {number} is not JSON", fix)
        if isinstance(row, dict) and row.get("valid"):
            valid += 1
            missing += not (folder / "envs" / f"{row.get('env_id')}.py").is_file()
    if not valid:
        return Check("fixed pool", "fail", f"{manifest} lists no valid environment", fix)
    if missing:
        return Check("fixed pool", "fail", f"{missing} of {valid} valid envs have no envs/<env_id>.py in {folder}", fix)
    return Check("fixed pool", "ok", f"{folder}: {valid} envs")


def check_spade_block(spade: Mapping[str, Any], variant: str | None = None) -> list[Check]:
    """Checks of a resolved ``spade:`` block (and the designer reward ``variant``): names, corpus, fixed pool."""
    checks = []
    setting = spade.get("setting")
    if setting not in SKILLS:
        checks.append(Check("setting", "fail", f"spade.setting is {setting!r}", f"use one of {', '.join(SKILLS)}"))
        return checks
    names = list(_get(spade, "skills.names") or ())
    unknown = [n for n in names if n not in SKILLS[setting]]
    if unknown:
        checks.append(Check("names", "fail", f"spade.skills.names: unknown {setting} skills {unknown}",
                            f"use names from {', '.join(SKILLS[setting])}"))  # fmt: skip
    grounding = _get(spade, "designer.grounding", "corpus")
    if grounding not in ("corpus", "concepts"):
        checks.append(Check("names", "fail", f"spade.designer.grounding is {grounding!r}", "use corpus or concepts"))
    if variant is not None and variant not in VARIANTS:
        checks.append(Check("names", "fail", f"reward.reward_kwargs.designer.variant is {variant!r}",
                            f"use one of {', '.join(VARIANTS)}"))  # fmt: skip
    if not any(c.name == "names" for c in checks):
        shown = f"{len(names)} skills" if names else "all skills"
        checks.append(Check("names", "ok", f"setting {setting}, {shown}, grounding {grounding}"
                                           + (f", reward {variant}" if variant else "")))  # fmt: skip
    fixed = bool(_get(spade, "fixed_env.enable", False))
    plays = spade.get("plays_per_arm", 1)
    if not fixed and (not isinstance(plays, int) or isinstance(plays, bool) or plays < 1):
        checks.append(Check("plays", "fail", f"spade.plays_per_arm is {plays!r}: a design's measurement arms would be "
                            "empty (no win rate, no regret)", "set spade.plays_per_arm to 1 or more"))  # fmt: skip
    required = setting == "games" and not fixed and grounding == "corpus"
    checks.append(_corpus_check(spade.get("corpus"), required))
    if fixed:
        checks.append(_fixed_pool_check(_get(spade, "fixed_env.pool_dir")))
    if fixed and _get(spade, "fixed_env.rlve.enable", False):
        checks.append(rlve_timeouts_check(spade))
    return checks


def rlve_timeouts_check(spade: Mapping[str, Any]) -> Check:
    """docs/baselines.md's rule: RLVE's generator timeout < the sandbox's soft timeout < its call timeout.

    RLVE's generator swallows every exception, the in-worker alarm included: with the soft timeout below the
    generator's, a slow (legitimate) generation is cut, retried and then killed, so it never reaches the window.
    """
    generate = _get(spade, "fixed_env.rlve.generate_timeout_s", 10)
    soft = _get(spade, "sandbox.soft_timeout_s", 5.0)
    call = _get(spade, "sandbox.call_timeout_s", 10.0)
    detail = f"rlve generate_timeout_s {generate} s, sandbox soft_timeout_s {soft} s, call_timeout_s {call} s"
    if not (isinstance(generate, (int, float)) and isinstance(soft, (int, float)) and isinstance(call, (int, float))):
        return Check("rlve", "fail", detail, "set the three timeouts to numbers")
    if not generate < soft < call:
        fix = f"e.g. spade.sandbox.soft_timeout_s={generate + 2} spade.sandbox.call_timeout_s={generate + 5}"
        return Check("rlve", "fail", detail + ": RLVE needs generate < soft < call (docs/baselines.md)", fix)
    return Check("rlve", "ok", detail)


def require_spade_block(spade: Mapping[str, Any], variant: str | None = None) -> None:
    """Raise :class:`SpadeConfigError` (one line per failed check) when the ``spade:`` block cannot run."""
    failed = [c for c in check_spade_block(spade, variant) if c.status == "fail"]
    if failed:
        raise SpadeConfigError("\n".join(f"{c.detail} -> {c.fix}" for c in failed))


def exit_on_bad_spade_block(spade: Mapping[str, Any], variant: str | None = None, out: Any = None) -> None:
    """Stop the process with one line per failed check (exit status 1): an entry point's message, no traceback."""
    try:
        require_spade_block(spade, variant)
    except SpadeConfigError as exc:
        print("\n".join(f"spade: bad config: {line}" for line in str(exc).splitlines()), file=out or sys.stderr)
        raise SystemExit(1) from None
