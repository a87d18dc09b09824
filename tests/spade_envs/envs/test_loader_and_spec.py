import pytest

from spade_envs.builtin import BUILTINS, builtin, builtin_source, builtin_spec, load_builtin
from spade_envs.envs.errors import InvalidEnvSource
from spade_envs.envs.loader import ENV_MODULE, load_env_class
from spade_envs.envs.spec import EnvSpec, source_sha256

GOOD = """
import random

class TinyEnv:
    max_turns = 3
    def reset(self, seed=None):
        self.rng = random.Random(seed)
        return "go", {}
    def step(self, action):
        return "ok", 1.0, True, False, {}
    def solution(self):
        return ["a"]
"""


@pytest.mark.parametrize(
    ("source", "code", "message"),
    [
        ("class BrokenEnv(:\n", "syntax_error", "line 1"),
        ("x = 1\n", "no_env_class", "no class"),
        (GOOD + "\nclass OtherEnv(TinyEnv):\n    pass\n", "several_env_classes", "OtherEnv, TinyEnv"),
        ("raise RuntimeError('boom')\n", "exec_error", "RuntimeError: boom"),
        (
            "class HalfEnv:\n    def reset(self, seed=None):\n        return 'x', {}\n",
            "missing_method",
            "step, solution",
        ),
    ],
)
def test_loader_reports_one_code_per_failure(source, code, message):
    with pytest.raises(InvalidEnvSource, match=message) as info:
        load_env_class(source)
    assert info.value.code == code


def test_loader_ignores_imported_env_classes():
    source = "from spade_envs.envs.tooluse import ToolUseEnv\n" + GOOD
    assert load_env_class(source).__name__ == "TinyEnv"


def test_loaded_modules_are_independent():
    a, b = load_env_class(GOOD), load_env_class(GOOD)
    assert a is not b and a.reset.__globals__ is not b.reset.__globals__
    assert a.__module__ == b.__module__ == ENV_MODULE  # one name for every load (tests/.../test_review3_one_loader.py)


def test_unknown_builtin_names_the_known_ones():
    with pytest.raises(KeyError, match="VaultCodeEnv"):
        builtin("NopeEnv")


def test_builtin_loads_from_its_shipped_source():
    for entry in BUILTINS:
        assert load_builtin(entry.name).__name__ in builtin_source(entry.name)


def test_spec_hash_and_round_trip():
    spec = builtin_spec("VaultCodeEnv")
    assert spec.sha256 == source_sha256(spec.source) and spec.env_id == "builtin/VaultCodeEnv"
    assert EnvSpec.from_dict(spec.to_dict()) == spec
    tampered = spec.to_dict() | {"source": spec.source + "\n# edited"}
    with pytest.raises(ValueError, match="does not match"):
        EnvSpec.from_dict(tampered)


def test_spec_rejects_unknown_setting():
    with pytest.raises(ValueError, match="setting must be one of"):
        EnvSpec(env_id="x", setting="chess", skill="s", source="")
