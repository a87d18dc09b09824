"""Survey Route: survey hidden road distances, then drive the shortest round trip through every stop."""

from __future__ import annotations

import itertools
import random
from typing import Any

DEPOT = "Depot"
STOP_NAMES = (
    "Alder", "Birch", "Cedar", "Dunmore", "Elmwood", "Fairview", "Glenrock", "Hollow",
    "Ironbridge", "Juniper", "Kestrel", "Larkspur", "Millbrook", "Northgate", "Oakridge", "Pinecrest",
)  # fmt: skip
MIN_DIST, MAX_DIST = 3, 30


def _tour_length(dist: list[list[int]], order: tuple[int, ...]) -> int:
    """Length of depot -> order -> depot; place 0 is the depot."""
    path = (0, *order, 0)
    return sum(dist[a][b] for a, b in zip(path, path[1:]))


class SurveyRouteEnv:
    """A van must visit k stops and return to the depot; distances are hidden until a place is surveyed."""

    max_turns = 15  # the largest episode (k = 6); reset sets 2k + 3 for the drawn size

    def reset(self, seed: int | None = None) -> tuple[str, dict[str, Any]]:
        self.rng = random.Random(seed)
        self.difficulty = self.rng.randint(1, 3)
        self.k = self.difficulty + 3  # 4, 5 or 6 stops
        self.max_turns = 2 * self.k + 3  # survey every place, drive every stop, and a little slack
        self.places = [DEPOT, *self.rng.sample(STOP_NAMES, self.k)]
        self._draw_distances()
        self.surveyed: set[int] = set()
        self.current = 0
        self.visited: list[int] = []
        self.driven = 0
        self.turn = 0
        self.done = False
        intro = (
            f"SURVEY ROUTE (difficulty {self.difficulty})\n"
            f"Your delivery van is at the {DEPOT}. It must visit each of these {self.k} stops exactly once and then\n"
            f"return to the {DEPOT}: {', '.join(self.places[1:])}.\n"
            "Goal: make the total driven distance as short as possible. Only the shortest possible round trip\n"
            "wins; a longer one gets partial credit. Road distances are symmetric whole numbers but unknown at\n"
            "first, and they need not obey the triangle inequality.\n"
            "Commands:\n"
            "  survey <place>  reveal the road distances from that place to every other place (the van stays)\n"
            "  go <stop>       drive from the van's place to that stop (each stop once). After the last stop the\n"
            f"                  van drives back to the {DEPOT} by itself and the episode ends.\n"
            f"You have {self.max_turns} turns.\n"
        )
        return intro + self._status(), {"difficulty": self.difficulty}

    def _draw_distances(self) -> None:
        """Draw random symmetric distances until the shortest tour is unique (up to direction) and clearly best."""
        n = self.k + 1
        while True:
            dist = [[0] * n for _ in range(n)]
            for a, b in itertools.combinations(range(n), 2):
                dist[a][b] = dist[b][a] = self.rng.randint(MIN_DIST, MAX_DIST)
            # Each tour and its reverse have the same length: keep one direction (first stop < last stop).
            tours = sorted(
                (_tour_length(dist, order), order)
                for order in itertools.permutations(range(1, n))
                if order[0] < order[-1]
            )
            lengths = [length for length, _ in tours]
            if lengths[0] < lengths[1] and lengths[0] * 5 <= sum(lengths) / len(lengths) * 4:
                self.dist, self.best_order, self.optimum = dist, tours[0][1], lengths[0]
                return

    def _status(self) -> str:
        """The distance table as known so far, the van's position and what is left to visit."""
        width = max(len(p) for p in self.places) + 1
        header = " " * width + "".join(p.rjust(width) for p in self.places)
        lines = ["Known distances (? = survey a place to learn its row):", header]
        for a, name in enumerate(self.places):
            cells = []
            for b in range(len(self.places)):
                known = a in self.surveyed or b in self.surveyed
                cells.append("-" if a == b else str(self.dist[a][b]) if known else "?")
            lines.append(name.ljust(width) + "".join(c.rjust(width) for c in cells))
        left = [self.places[i] for i in range(1, self.k + 1) if i not in self.visited]
        lines.append(
            f"Van at: {self.places[self.current]}. Distance driven: {self.driven}. "
            f"Stops left: {', '.join(left)}. Turns left: {self.max_turns - self.turn}."
        )
        return "\n".join(lines)

    def _place(self, name: str) -> int | None:
        lowered = [p.lower() for p in self.places]
        return lowered.index(name) if name in lowered else None

    def step(self, action: str) -> tuple[str, float, bool, bool, dict[str, Any]]:
        info: dict[str, Any] = {"difficulty": self.difficulty}
        if self.done:
            return "The episode is over.", 0.0, True, False, info
        self.turn += 1
        words = action.lower().split()
        verb, target = (words[0], self._place(words[1])) if len(words) == 2 else ("", None)
        reward, terminated = 0.0, False
        if verb not in ("survey", "go"):
            obs = "Unknown command. Use 'survey <place>' or 'go <stop>' with a place name from the table."
        elif target is None:
            obs = f"There is no place called that. Places: {', '.join(self.places)}."
        elif verb == "survey":
            self.surveyed.add(target)
            obs = f"Surveyed {self.places[target]}: its row of distances is now known."
        elif target == 0:
            obs = f"The van returns to the {DEPOT} by itself after the last stop; go to a stop instead."
        elif target in self.visited:
            obs = f"{self.places[target]} was already visited; each stop is visited once."
        else:
            leg = self.dist[self.current][target]
            self.driven += leg
            self.visited.append(target)
            obs = f"Drove {self.places[self.current]} -> {self.places[target]}: {leg}."
            self.current = target
            if len(self.visited) == self.k:
                back = self.dist[target][0]
                self.driven += back
                terminated = True
                obs += f" Returned to the {DEPOT}: {back}. Total distance: {self.driven}."
                if self.driven == self.optimum:
                    reward = 1.0
                    obs += " That is the shortest possible round trip: you win!"
                else:
                    reward = self.optimum / self.driven * 0.8
                    obs += f" The shortest round trip was {self.optimum}. Partial credit only."
        self.done = terminated
        truncated = not terminated and self.turn >= self.max_turns
        if not terminated:
            obs += "\n" + self._status() + ("\nOut of turns." if truncated else "")
        return obs, reward, terminated, truncated, info

    def solution(self) -> list[str]:
        """Survey the depot and every stop, then drive the unique shortest tour."""
        surveys = [f"survey {p}" for p in self.places]
        return surveys + [f"go {self.places[i]}" for i in self.best_order]
