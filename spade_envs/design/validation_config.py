"""What validation tries (:class:`ValidationConfig`) and what it found (:class:`ValidationReport`).

Kept apart from :mod:`spade_envs.design.validate`, which runs the checks, so that configs and reports can be built,
stored and read without the sandbox.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from spade_envs.design.seed_secret import check_secret

__all__ = ["DEFAULT_PROBES", "ValidationConfig", "ValidationReport"]

#: Actions every environment must survive: empty, numbers, words, a box, tool-use markup, junk.
DEFAULT_PROBES = (
    "",
    "1",
    "42",
    "test",
    "look",
    "\\boxed{7}",
    '<tool_call>{"name": "x"}</tool_call>',
    "<answer>x</answer>",
)


@dataclass(frozen=True)
class ValidationConfig:
    """What validation tries. More seeds catch more broken generators but cost more worker calls.

    Attributes:
        seeds: fixed solution seeds; ``None`` (default) draws ``n_seeds`` per validation (:func:`draw_seeds`).
        n_seeds: solution seeds drawn per validation when ``seeds`` is ``None``.
        probe_seeds: extra unseen seeds on which only the do-nothing and random agents play.
        random_episodes: random-agent episodes per seed (a random win rejects the env).
        probe_actions: actions sent after ``reset`` that must not raise or return wrong types.
        max_turns: the training turn cap; episodes last ``min(env.max_turns, max_turns)`` turns.
        budget_s: wall-clock budget of one validation (both workers, every check).
        seed: the run's seed, from which the per-validation seeds are drawn.
        secret: the run's seed secret (:mod:`spade_envs.design.seed_secret`), the key of that draw; ``None`` (default)
            draws a fresh one per validation, so the seeds are unpredictable but not reproducible.
        cross_worker: replay every seed in a second worker and require identical transcripts.
        first_episode_seeds: on this many of the solution seeds, play the solution, do-nothing and first random
            episode also as the first episode of a fresh worker in training's call order, and require the transcript
            of its replay in validation's worker (0: off). Each costs three worker starts.
    """

    seeds: tuple[int, ...] | None = None
    n_seeds: int = 3
    probe_seeds: int = 2
    random_episodes: int = 2
    probe_actions: tuple[str, ...] = DEFAULT_PROBES
    max_turns: int = 25
    budget_s: float = 120.0
    seed: int = 0
    cross_worker: bool = True
    first_episode_seeds: int = 1
    secret: bytes | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        if self.seeds is not None and not self.seeds:
            raise ValueError("validation needs at least one seed")
        for name in ("n_seeds", "max_turns"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ValueError(f"{name} must be an int >= 1, got {value!r}")
        for name in ("probe_seeds", "random_episodes", "first_episode_seeds"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 0:
                raise ValueError(f"{name} must be an int >= 0, got {value!r}")
        if not (isinstance(self.budget_s, (int, float)) and self.budget_s > 0):
            raise ValueError(f"budget_s must be a positive number, got {self.budget_s!r}")
        if self.secret is not None:
            check_secret(self.secret)

    @classmethod
    def from_dict(cls, data: dict[str, Any] | None) -> ValidationConfig:
        data = dict(data or {})
        known = {f for f in cls.__dataclass_fields__}
        if set(data) - known:
            raise ValueError(f"unknown validation option(s) {sorted(set(data) - known)}; known: {sorted(known)}")
        for key in ("seeds", "probe_actions"):
            if data.get(key) is not None:
                data[key] = tuple(data[key])
        return cls(**data)


@dataclass
class ValidationReport:
    """Outcome of validation. ``code`` is ``None`` exactly when ``ok``; ``reason`` is one line for people.

    ``max_turns`` is the turn limit training will use (``min(declared, cap)``); ``declared_max_turns`` what the
    env claims. ``seeds`` and ``probe_seeds`` are the seeds played, drawn from ``run_seed`` and ``key``.
    """

    ok: bool
    code: str | None = None
    reason: str = ""
    class_name: str = ""
    setting: str = ""
    max_turns: int = 0
    declared_max_turns: int | float = 0
    solution_turns: list[int] = field(default_factory=list)
    checks: list[str] = field(default_factory=list)
    duration_s: float = 0.0
    seeds: list[int] = field(default_factory=list)
    probe_seeds: list[int] = field(default_factory=list)
    run_seed: int = 0
    key: str = ""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)
