"""Review 3: behaviour-identical copies with dead code hash as the env they copy; live code still tells envs apart.

The normal form drops module-level constants nothing references and methods nothing references by name
(:mod:`spade_envs.design.ast_hash`), keeping every entry point (``reset``, ``step``, ``solution``, ``tools``, the
``ToolUseEnv`` hooks, ``tool_*`` and dunder methods) and pruning nothing where the code looks names up dynamically.
"""

from __future__ import annotations

import pytest

from spade_envs.builtin import builtin_source
from spade_envs.design.ast_hash import normalized_ast_hash

VAULT = builtin_source("VaultCodeEnv")
GAME = """
import random

LIMIT = 9
_SPARE = (1, 2, 3)


class CountEnv:
    max_turns = 5

    def reset(self, seed=None):
        self.target = random.Random(seed).randint(3, LIMIT)
        self.count = 0
        return f"count to {self.target}", {}

    def _add(self, n):
        self.count += n

    def step(self, action):
        self._add(int(action) if action.isdigit() else 0)
        done = self.count >= self.target
        return str(self.count), float(self.count == self.target), done, False, {}

    def solution(self):
        return [str(self.target)]
"""
TOOLS = '''
from spade_envs.envs.tooluse import Instruction, ToolUseEnv, tool_call


class LampEnv(ToolUseEnv):
    max_turns = 4

    def setup(self):
        self.on = False
        return Instruction(text="Turn the lamp on.", state=lambda: self.on)

    def tool_switch(self) -> str:
        """Flip the lamp's switch."""
        self.on = not self.on
        return "Click."

    def _judge(self, answer):
        return super()._judge(answer)

    def solution(self):
        return [tool_call("switch"), "<answer>On.</answer>"]
'''


DEAD_METHOD = "    def _never_called(self):\n        return None\n\n"
DEAD_CHAIN = (
    "    def _a(self):\n        return self._b()\n\n    def _b(self):\n        return 1\n\n"
    "    @staticmethod\n    def _c():\n        return 2\n\n"
)


@pytest.mark.parametrize(
    "copy",
    [VAULT + "\n_UNUSED = 12345\n", VAULT + "\nNAMES = ['a', 'b']\nALIAS = NAMES\n",
     VAULT.replace("    def solution(self", DEAD_METHOD + "    def solution(self", 1),
     VAULT.replace("    def solution(self", DEAD_CHAIN + "    def solution(self", 1)],
    ids=["dead_constant", "dead_constants_that_reference_each_other", "dead_method", "dead_methods_calling_each_other"],
)  # fmt: skip
def test_a_copy_with_dead_code_hashes_as_the_env_it_copies(copy):
    assert copy != VAULT and normalized_ast_hash(copy) == normalized_ast_hash(VAULT)


@pytest.mark.parametrize(
    ("old", "new"),
    [("LIMIT = 9", "LIMIT = 8"),  # a constant the env reads
     ("self.count += n", "self.count += 2 * n"),  # a method the env calls
     ("def _add(self, n)", "def _plus(self, n)")],  # a called method renamed: the call now fails
)  # fmt: skip
def test_live_constants_and_methods_still_count(old, new):
    assert old in GAME and normalized_ast_hash(GAME.replace(old, new)) != normalized_ast_hash(GAME)
    assert normalized_ast_hash(GAME.replace("_SPARE = (1, 2, 3)", "_SPARE = (4,)")) == normalized_ast_hash(GAME)


@pytest.mark.parametrize(
    ("edit", "constants_too"),
    [(lambda s: s.replace("self._add(int(action)", "getattr(self, '_' + 'add')(int(action)"), True),  # computed name
     (lambda s: s.replace("_SPARE = (1, 2, 3)", "_SPARE = (1, 2, 3)\nTABLE = globals()"), True),  # module reflection
     (lambda s: s.replace("class CountEnv:", "class CountEnv(dict):"), False)],  # an unknown base may call any method
    ids=["getattr_by_computed_name", "globals", "unknown_base_class"],
)  # fmt: skip
def test_nothing_is_dropped_where_names_may_be_looked_up_dynamically(edit, constants_too):
    source = edit(GAME)
    dead = source.replace(
        "    def solution(self", "    def _spare(self):\n        return 1\n\n    def solution(self", 1
    )
    assert normalized_ast_hash(dead) != normalized_ast_hash(source)
    spare = normalized_ast_hash(source.replace("(1, 2, 3)", "(4,)")) != normalized_ast_hash(source)
    assert spare == constants_too


def test_entry_points_and_hooks_are_never_dropped():
    # ToolUseEnv calls _judge, tools() reads tool_* methods, the runtime calls reset/step/solution: all stay
    assert normalized_ast_hash(TOOLS.replace("return super()._judge(answer)", "return 1.0, True, 'ok'")) != (
        normalized_ast_hash(TOOLS)
    )
    assert normalized_ast_hash(TOOLS.replace('"Click."', '"Clack."')) != normalized_ast_hash(TOOLS)
    dunder = GAME.replace(
        "    def solution(self", "    def __repr__(self):\n        return 'x'\n\n    def solution(self"
    )
    assert normalized_ast_hash(dunder) != normalized_ast_hash(GAME)
    spare = "    @functools.cache\n    def _spare(self):\n        return 1\n\n"
    decorated = GAME.replace("    def _add(self, n)", spare + "    def _add(self, n)")
    assert normalized_ast_hash(decorated) != normalized_ast_hash(GAME)  # an unknown decorator may register it
