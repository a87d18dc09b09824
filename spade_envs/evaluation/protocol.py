"""A suite run's protocol (model, sampling, limits, data checksums, protocol provenance) and its fingerprint.

Every scored sample carries the fingerprint of the protocol it was made under, so a rerun into the same ``--out``
reuses only samples of the same protocol (the others are set aside, not mixed in), and ``compare`` can check the
samples themselves, not only the ``results.json`` that claims a protocol for them.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from spade_envs.evaluation.records import Sampling
from spade_envs.evaluation.suite import Suite

__all__ = ["MODEL_KEY", "RUN_KEYS", "VERSION_KEYS", "fingerprint", "suite_protocol"]

#: Provenance keys that vary between runs of one protocol (filled while samples run, or a local path).
RUN_KEYS = frozenset({"failed_tasks", "redrawn", "acebench_root", "user_simulator_endpoint"})
#: Provenance keys that are package versions or pins: part of a run's protocol, only noted between two runs.
VERSION_KEYS = frozenset({"reasoning_gym", "bfcl_eval", "acebench_commit"})
#: The key naming the model under test: the one protocol part that two compared runs are meant to differ in.
MODEL_KEY = "model"


def suite_protocol(suite: Suite, sampling: Sampling, model: str) -> dict[str, Any]:
    """What decides a sample's score besides the model's luck; call it after ``suite.load``."""
    provenance = {k: v for k, v in suite.provenance.items() if k not in RUN_KEYS}
    return {MODEL_KEY: model, "sampling": sampling.to_dict(), "data_sha256": sorted(suite.checksums().values()),
            "provenance": json.loads(json.dumps(provenance, default=str))}  # fmt: skip


def fingerprint(protocol: dict[str, Any]) -> str:
    """Short SHA-256 of the protocol's canonical JSON: the stamp each sample carries."""
    canonical = json.dumps(protocol, sort_keys=True, default=str, separators=(",", ":"))
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()[:16]
