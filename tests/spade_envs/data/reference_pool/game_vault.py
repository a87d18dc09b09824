# ruff: noqa: F821  (reference games use the names its loader pre-seeds, without importing them)
# A reference-style game: no imports (random, re, deque and np are pre-seeded by the reference's loader), partial
# rewards per step that total 1.0 on success, and a solution() string of \boxed{} lines.


class VaultEnv:
    def __init__(self, max_turns=12):
        self.max_turns = max_turns

    def reset(self, seed=None):
        rng = random.Random(seed)
        self.codes = deque(rng.randint(100, 999) for _ in range(3))
        self.opened = 0
        self.turn = 0
        checksum = int(np.array([c % 7 for c in self.codes]).sum())
        return f"Three dials hold 3-digit codes (checksum {checksum}). Guess the current dial's code.", {"dials": 3}

    def step(self, action):
        self.turn += 1
        found = re.search(r"\\boxed\{(\d+)\}", action)
        if not found:
            return "Send a code as \\boxed{NNN}.", 0.0, False, self.turn >= self.max_turns, {}
        guess, target = int(found.group(1)), self.codes[0]
        if guess == target:
            self.codes.popleft()
            self.opened += 1
            if not self.codes:
                return "All dials open!", 0.4, True, False, {"opened": 3}
            return f"Dial {self.opened} opens.", 0.3, False, False, {"opened": self.opened}
        direction = "higher" if guess < target else "lower"
        return f"Wrong: go {direction}.", 0.0, False, self.turn >= self.max_turns, {"hint": direction}

    def solution(self):
        return "\n".join(f"\\boxed{{{code}}}" for code in self.codes)
