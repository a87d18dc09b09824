"""A correct answer for any generated Reasoning-Gym entry, to check that every task of the split can be won.

Most entries carry their answer. Four check a solution procedurally and carry none in ``answer``: ``graph_color``
(a colouring in ``metadata.possible_answer``), ``rubiks_cube`` (``metadata.example_correct_answer`` for 3x3 cubes,
else the inverse of ``metadata.scramble_moves``),
``propositional_logic`` (``metadata.example_answer``) and ``rush_hour`` (no example: a breadth-first search over
the board finds a shortest move list). ``jugs`` carries one, but its solver pours between the first three jugs only,
so with four jugs it can say "No solution" to a solvable puzzle; a search over all jugs replaces it. Tests and
oracle runs use this; scoring never does.
"""

from __future__ import annotations

import json
import pickle
import re
from collections import deque
from typing import Any

__all__ = ["gold_answer", "self_score", "solve_jugs", "solve_rush_hour", "suite_self_score", "undo_scramble"]

_SIDE = 6
_TARGET_ROW = 2


def gold_answer(task: str, entry: dict[str, Any]) -> str:
    """An answer that ``score_answer`` of ``task`` should score 1.0 on ``entry``."""
    meta = entry.get("metadata", {})
    if task == "graph_color":
        return json.dumps(meta["possible_answer"])
    if task == "rubiks_cube":  # the example exists for 3x3 cubes only; undoing the scramble solves any size
        return str(meta["example_correct_answer"]) or undo_scramble(meta["scramble_moves"])
    if task == "propositional_logic":
        return str(meta["example_answer"])
    if task == "rush_hour":
        return solve_rush_hour(_relabel(meta["board_config"]))
    if task == "jugs":  # its own solver uses the first three jugs only: with four it can answer "No solution"
        return json.dumps(solve_jugs(meta["puzzle"]["jug_capacities"], meta["puzzle"]["target"]))
    if entry.get("answer") is None:
        raise ValueError(f"Reasoning-Gym task {task}: the entry has no answer and no known source of one")
    return str(entry["answer"])


def undo_scramble(scramble: str) -> str:
    """The inverse of a cube scramble, in moves that ``score_answer`` reads (no layer-number prefix).

    ``score_answer`` drops a move with a leading layer number (``2B``, ``1Rw``), so layered moves are rewritten:
    ``1Xw`` is ``X``, and the second slice ``2X`` is ``Xw X'``. Scrambles of these configs use layers 1 and 2 only.
    """
    forward: list[str] = []
    for move in scramble.split():
        hit = re.fullmatch(r"(\d*)([A-Z])(w?)('?)", move)
        if hit is None:
            raise ValueError(f"unknown cube move {move!r}")
        layer_text, face, wide, reverse = hit.groups()
        layer = int(layer_text) if layer_text else (2 if wide else 1)
        if layer == 1:
            seq = [face]
        elif layer == 2:
            seq = [face + "w"] if wide else [face + "w", face + "'"]
        else:
            raise ValueError(f"cube move {move!r} turns layer {layer}; only layers 1 and 2 are rewritten")
        forward += _invert(seq) if reverse else seq
    return " ".join(_invert(forward))


def _invert(moves: list[str]) -> list[str]:
    return [m[:-1] if m.endswith("'") else m + "'" for m in reversed(moves)]


def _relabel(board: str) -> str:
    """Reasoning-Gym numbers pieces by their sorted labels (``A`` is the first): rename them ``A``, ``B``, ... so."""
    labels = sorted({c for c in board if c not in "ox"})
    names = {label: chr(ord("A") + i) for i, label in enumerate(labels)}
    return "".join(names.get(c, c) for c in board)


def solve_jugs(capacities: list[int], target: int) -> list[str]:
    """A shortest move list (``fill A``, ``empty B``, ``pour A->B``) leaving ``target`` litres in some jug."""
    start = tuple(0 for _ in capacities)
    seen: dict[tuple[int, ...], tuple[tuple[int, ...], str] | None] = {start: None}
    queue = deque([start])
    while queue:
        state = queue.popleft()
        if target in state:
            moves: list[str] = []
            while seen[state] is not None:
                state, move = seen[state]  # type: ignore[misc]
                moves.append(move)
            return moves[::-1]
        for i, name in enumerate(map(chr, range(65, 65 + len(capacities)))):
            steps = [(f"fill {name}", {i: capacities[i]}), (f"empty {name}", {i: 0})]
            for j in range(len(capacities)):
                amount = min(state[i], capacities[j] - state[j])
                if j != i and amount:
                    steps.append((f"pour {name}->{chr(65 + j)}", {i: state[i] - amount, j: state[j] + amount}))
            for move, change in steps:
                nxt = tuple(change.get(k, v) for k, v in enumerate(state))
                if nxt not in seen:
                    seen[nxt] = (state, move)
                    queue.append(nxt)
    raise ValueError(f"no way to measure {target} with jugs {capacities}")


def _pieces(board: str) -> dict[str, list[int]]:
    cells: dict[str, list[int]] = {}
    for i, label in enumerate(board):
        if label not in "ox":
            cells.setdefault(label, []).append(i)
    return cells


def solve_rush_hour(board: str) -> str:
    """A shortest solution (``"A+1 B-2 ..."``) for a 6x6 board string: ``o`` empty, ``x`` wall, letters pieces.

    Piece ``A`` (the red car, on row 2) must reach the right edge. Raises ``ValueError`` when the board is unsolvable.
    """
    if len(board) != _SIDE * _SIDE:
        raise ValueError(f"a rush-hour board has {_SIDE * _SIDE} cells, got {len(board)}")
    seen = {board: ("", "")}
    queue = deque([board])
    while queue:
        state = queue.popleft()
        if _solved(state):
            moves = []
            while seen[state][0]:
                state, move = seen[state]
                moves.append(move)
            return " ".join(reversed(moves))
        for move, nxt in _moves(state):
            if nxt not in seen:
                seen[nxt] = (state, move)
                queue.append(nxt)
    raise ValueError("the rush-hour board has no solution")


def _solved(state: str) -> bool:
    cells = _pieces(state)["A"]
    return cells[-1] == _TARGET_ROW * _SIDE + _SIDE - 1


def _moves(state: str) -> list[tuple[str, str]]:
    out = []
    for label, cells in _pieces(state).items():
        stride = cells[1] - cells[0]
        for sign in (-1, 1):
            grid = list(state)
            head = cells[0] if sign < 0 else cells[-1]
            for steps in range(1, _SIDE):
                nxt = head + sign * stride * steps
                if stride == 1 and nxt // _SIDE != head // _SIDE or not 0 <= nxt < _SIDE * _SIDE or state[nxt] != "o":
                    break
                tail = cells[-1] if sign < 0 else cells[0]
                leaving = tail + sign * stride * (steps - 1)
                grid[nxt], grid[leaving] = label, "o"
                out.append((f"{label}{'+' if sign > 0 else '-'}{steps}", "".join(grid)))
    return out


def self_score(task: str, config_blob: bytes, index: int) -> tuple[float, str]:
    """Runs in a scorer process: build ``task`` from its pickled config and score entry ``index``'s gold answer."""
    import reasoning_gym.factory as factory

    dataset = factory.DATASETS[task][0](pickle.loads(config_blob))
    entry = dataset[index]
    answer = gold_answer(task, entry)
    return float(dataset.score_answer(answer, entry)), answer[:200]


def suite_self_score(group: str, task: str, sample: int) -> tuple[float, float, str, dict[str, Any]]:
    r"""Runs in a scorer process: episode ``sample`` of ``task`` as the default suite plays it, scored on its gold.

    Returns ``score_answer`` on the gold answer as it is and as the suite reads it from ``\boxed{gold}``, the
    answer (cut to 200 characters) and the suite's provenance (its redraws, if any).
    """
    from spade_envs.envs.contract import extract_command
    from spade_envs.evaluation.suites.reasoning_gym import ReasoningGymSuite

    suite = ReasoningGymSuite(group, tasks=[task])
    dataset, entry = suite.instance(suite.load(None)[0], sample, sample + 1)
    answer = gold_answer(task, entry)
    boxed = extract_command(f"The final answer is \\boxed{{{answer}}}")
    return (
        float(dataset.score_answer(answer, entry)),
        float(dataset.score_answer(boxed, entry)),
        answer[:200],
        suite.provenance,
    )
