# ruff: noqa: F821  (reference games use the names its loader pre-seeds, without importing them)
# A helper *Env base class defined first (it must not be picked), math without an import, reset returning only a
# string, and a solution() that is a bare answer string.


class BaseEnv:
    def reset(self, seed=None):
        raise NotImplementedError

    def step(self, action):
        raise NotImplementedError


class DigitSquaresEnv(BaseEnv):
    def __init__(self):
        self.max_turns = 3

    def reset(self, seed=None):
        self.n = random.Random(seed).randint(10**5, 10**6)
        self.turns = 0
        return (
            f"Sum the squares of the digits of {self.n}, then multiply by {math.factorial(3)}. Answer in \\boxed{{}}."
        )

    def _answer(self):
        return 6 * sum(int(d) ** 2 for d in str(self.n))

    def step(self, action):
        self.turns += 1
        boxes = re.findall(r"\\boxed\{([^{}]*)\}", action)
        answer = boxes[-1].strip() if boxes else action.strip()
        if answer == str(self._answer()):
            return "Correct!", 1.0, True, False, {}
        return "Incorrect.", 0.0, self.turns >= self.max_turns, False, {}

    def solution(self):
        return str(self._answer())
