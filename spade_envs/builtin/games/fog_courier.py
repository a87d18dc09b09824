"""Fog Courier: fetch a parcel and deliver it through a walled warehouse while seeing only the 3x3 cells around you.

The agent knows its own coordinates and those of the parcel and the drop point, but walls are revealed only as it
walks next to them, so it has to plan routes from partial, local views and track its position. The parcel and the
drop point are far apart and both ``pickup`` and ``drop`` must be issued on the right cell, so wandering cannot win.
"""

from __future__ import annotations

import random
from collections import deque
from typing import Any

#: Command -> (row change, column change). Rows grow to the south, columns to the east.
MOVES = {"north": (-1, 0), "south": (1, 0), "east": (0, 1), "west": (0, -1)}
ALIASES = {"n": "north", "s": "south", "e": "east", "w": "west"}
#: Longest allowed shortest route (moves only); with pickup, drop and 10 spare turns it stays within 30 turns.
MAX_ROUTE = 18
SLACK = 10


class FogCourierEnv:
    """Walk to the parcel, pick it up, walk to the drop point and drop it, seeing only the neighbouring cells."""

    max_turns = 30  # the largest budget; reset sets the shortest solution length + 10 for the drawn layout

    def reset(self, seed: int | None = None) -> tuple[str, dict[str, Any]]:
        self.rng = random.Random(seed)
        self.difficulty = self.rng.randint(1, 3)
        self.size = 5 + self.difficulty + self.rng.randint(0, 1)  # 6..9 cells a side
        self._build_layout()
        self.pos = self.start
        self.carrying = False
        self.delivered = False
        self.turn = 0
        self.done = False
        self.max_turns = min(30, len(self.solution()) + SLACK)
        intro = (
            f"FOG COURIER: a {self.size}x{self.size} warehouse is full of shelves (walls), but fog lets you see only\n"
            f"the 3x3 cells around you. Rows are numbered 1..{self.size} from north to south, columns 1..{self.size}\n"
            "from west to east; moving north lowers your row, moving east raises your column.\n"
            "Goal: walk to the parcel, pick it up, carry it to the drop point and drop it there.\n"
            "Commands: north, south, east, west (or n, s, e, w) move one cell; pickup (only on the parcel's cell);\n"
            "drop (only on the drop point while carrying the parcel). Walking into a wall wastes the turn.\n"
            f"You have {self.max_turns} turns.\n"
        )
        return intro + self._view(), {"difficulty": self.difficulty}

    def _build_layout(self) -> None:
        """Scatter walls and place start, parcel and drop on connected cells until the route lengths fit."""
        density = 0.15 + 0.05 * self.difficulty
        min_leg = 5 + self.difficulty  # parcel-to-drop distance: 6, 7 or 8 moves
        cells = [(r, c) for r in range(self.size) for c in range(self.size)]
        while True:
            self.walls = {cell for cell in cells if self.rng.random() < density}
            start = self.rng.choice(cells)
            if start in self.walls:
                continue
            from_start = self._distances(start)
            parcels = [cell for cell, d in from_start.items() if 3 <= d <= MAX_ROUTE - min_leg]
            if not parcels:
                continue
            parcel = self.rng.choice(parcels)
            from_parcel = self._distances(parcel)
            budget = MAX_ROUTE - from_start[parcel]
            drops = [cell for cell, d in from_parcel.items() if min_leg <= d <= budget and cell != start]
            if drops:
                self.start, self.parcel, self.drop_point = start, parcel, self.rng.choice(drops)
                return

    def _open(self, cell: tuple[int, int]) -> bool:
        r, c = cell
        return 0 <= r < self.size and 0 <= c < self.size and cell not in self.walls

    def _distances(self, source: tuple[int, int]) -> dict[tuple[int, int], int]:
        """BFS distance from ``source`` to every reachable open cell."""
        dist = {source: 0}
        queue = deque([source])
        while queue:
            r, c = queue.popleft()
            for dr, dc in MOVES.values():
                nxt = (r + dr, c + dc)
                if self._open(nxt) and nxt not in dist:
                    dist[nxt] = dist[(r, c)] + 1
                    queue.append(nxt)
        return dist

    def _path(self, source: tuple[int, int], target: tuple[int, int]) -> list[str]:
        """Move commands along a shortest path, found by walking back down the BFS distances from ``target``."""
        dist = self._distances(target)
        moves, cell = [], source
        while cell != target:
            for name, (dr, dc) in MOVES.items():
                nxt = (cell[0] + dr, cell[1] + dc)
                if dist.get(nxt, -1) == dist[cell] - 1:
                    moves.append(name)
                    cell = nxt
                    break
        return moves

    def step(self, action: str) -> tuple[str, float, bool, bool, dict[str, Any]]:
        if self.done:
            return "The episode is over.", 0.0, True, False, {}
        self.turn += 1
        message = self._apply(" ".join(str(action).lower().split()))
        terminated = self.delivered
        truncated = not terminated and self.turn >= self.max_turns
        self.done = terminated or truncated
        if terminated:
            return message, 1.0, True, False, {}
        obs = f"{message}\n{self._view()}"
        if truncated:
            obs += "\nOut of turns: the parcel was not delivered."
        return obs, 0.0, False, truncated, {}

    def _apply(self, command: str) -> str:
        """Carry out one normalised command and describe what happened."""
        command = ALIASES.get(command, command)
        if command in MOVES:
            dr, dc = MOVES[command]
            nxt = (self.pos[0] + dr, self.pos[1] + dc)
            if not self._open(nxt):
                return f"Bump! There is a wall to the {command}; you stay where you are."
            self.pos = nxt
            return f"You move {command}."
        if command == "pickup":
            if self.carrying:
                return "You already carry the parcel."
            if self.pos != self.parcel:
                return "There is no parcel here."
            self.carrying = True
            return "You pick up the parcel."
        if command == "drop":
            if not self.carrying:
                return "You are not carrying anything."
            if self.pos != self.drop_point:
                return "This is not the drop point; you keep the parcel."
            self.delivered = True
            return "You drop the parcel on the drop point. Delivered - you win!"
        return "Unknown command. Use north, south, east, west (n, s, e, w), pickup or drop."

    def _view(self) -> str:
        """Position, task status and the 3x3 neighbourhood as a small picture."""
        rows = []
        for dr in (-1, 0, 1):
            row = []
            for dc in (-1, 0, 1):
                cell = (self.pos[0] + dr, self.pos[1] + dc)
                if cell == self.pos:
                    row.append("@")
                elif not self._open(cell):
                    row.append("#")
                elif cell == self.parcel and not self.carrying:
                    row.append("P")
                elif cell == self.drop_point:
                    row.append("D")
                else:
                    row.append(".")
            rows.append("  " + " ".join(row))
        r, c = self.pos
        if self.carrying:
            task = f"You carry the parcel. Drop point: row {self.drop_point[0] + 1}, column {self.drop_point[1] + 1}."
        else:
            task = (
                f"Parcel: row {self.parcel[0] + 1}, column {self.parcel[1] + 1}. "
                f"Drop point: row {self.drop_point[0] + 1}, column {self.drop_point[1] + 1}."
            )
        here = ""
        if self.pos == self.parcel and not self.carrying:
            here = " (the parcel is here)"
        elif self.pos == self.drop_point:
            here = " (this is the drop point)"
        return (
            f"You are at row {r + 1}, column {c + 1}{here}. {task} Turns left: {self.max_turns - self.turn}.\n"
            "Around you (north is up):\n" + "\n".join(rows) + "\n"
            "Legend: @ you, # wall or warehouse edge, . floor, P parcel, D drop point"
        )

    def solution(self) -> list[str]:
        to_parcel = self._path(self.start, self.parcel)
        return to_parcel + ["pickup"] + self._path(self.parcel, self.drop_point) + ["drop"]
