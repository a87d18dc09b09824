class HangEnv:
    max_turns = 5

    def reset(self, seed=None):
        while True:
            pass

    def step(self, action):
        return "", 0.0, True, False, {}

    def solution(self):
        return "\\boxed{1}"
