"""The interface every benchmark implements, and the helpers most of them share.

A suite knows its protocol (default :class:`~spade_envs.evaluation.records.Sampling`), how to load its items
(offline: procedural generators, an installed package's data, or files under ``--data-dir``), how to play and
score one sample against a chat endpoint, and how to turn scored samples into its headline metric.
"""

from __future__ import annotations

import hashlib
from abc import ABC, abstractmethod
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from spade_envs.envs.errors import SpadeEnvError
from spade_envs.envs.llm import ChatClient
from spade_envs.evaluation.records import Item, SampleRecord, Sampling

__all__ = ["MissingDependency", "MissingEvalData", "Suite", "sha256_file"]

#: Longest response text kept in a result line (the score never depends on what is cut).
RESPONSE_CAP = 8000


class MissingEvalData(SpadeEnvError):
    """A file-based benchmark's data file is absent; the message names the file and where to get it."""


class MissingDependency(SpadeEnvError):
    """A suite needs an optional package that is not installed; the message gives the install line."""


def sha256_file(path: Path) -> str:
    """Hex SHA-256 of a file, streamed (data files can be large)."""
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


class Suite(ABC):
    """One benchmark (or one reported group of it, such as RG-Math).

    Subclasses set the class attributes and implement :meth:`load` and :meth:`run_sample`. ``run_sample`` is
    called from many threads at once and must not share mutable state between calls.
    """

    #: Registry name (``--suite`` value) and row label in the results table.
    name: str = ""
    #: ``games`` or ``tool_use``: which ``--suite`` group runs it.
    setting: str = "games"
    #: How the headline number is computed, shown in the table (``mean@64``, ``pass@1``, ...).
    metric: str = "mean"
    #: Keys of :meth:`aggregate` shown in the table beside the headline score (ACEBench's ``process``).
    shown_metrics: tuple[str, ...] = ()
    #: The benchmark's protocol.
    default_sampling: Sampling = Sampling()

    def __init__(self) -> None:
        self.data_files: list[Path] = []
        self.provenance: dict[str, Any] = {}

    @abstractmethod
    def load(self, data_dir: Path | None) -> list[Item]:
        """Return the items in a fixed order; record every file read in ``self.data_files``."""

    @abstractmethod
    def run_sample(self, client: ChatClient, item: Item, sample: int, sampling: Sampling) -> SampleRecord:
        """Play sample ``sample`` of ``item`` against ``client`` and score it in [0, 1].

        Raise :class:`~spade_envs.envs.llm.ChatError` if the endpoint fails: the sample is then not recorded and a
        rerun retries it. Any answer of the model, however malformed, must be scored, not raised.
        """

    def aggregate(self, records: Sequence[SampleRecord]) -> dict[str, float]:
        """Headline ``score`` (plus any sub-scores) in [0, 1]; by default the mean over every sample."""
        return {"score": sum(r.score for r in records) / len(records)} if records else {}

    def close(self) -> None:  # noqa: B027 (optional hook, deliberately empty by default)
        """Release what :meth:`run_sample` started (sandbox pools); the runner calls it when the suite is done."""

    def checksums(self) -> dict[str, str]:
        """SHA-256 of every data file :meth:`load` read, for ``results.json``."""
        return {str(path): sha256_file(path) for path in self.data_files}

    def refused_record(self, item: Item, sample: int, why: str) -> SampleRecord:
        """A sample the endpoint refused to answer (a context-length 400): a wrong answer, as BFCL scores it.

        The reason goes in ``detail.inference_error``; the item's category is kept for the aggregate.
        """
        keep = {k: item.meta[k] for k in ("category", "kind", "task") if k in item.meta}
        return self.record(item, sample, 0.0, "", "", inference_error=why[:500], **keep)

    def record(self, item: Item, sample: int, score: float, pred: str, response: str, **detail: Any) -> SampleRecord:
        """Build a :class:`SampleRecord` with the response capped to :data:`RESPONSE_CAP` characters."""
        return SampleRecord(self.name, item.id, sample, float(score), pred, response[-RESPONSE_CAP:], detail)
