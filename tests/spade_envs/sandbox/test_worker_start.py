"""How workers start: one fixed string-hash seed for all (paired measurements), with the isolation of ``-I`` intact.

``python -I`` ignores ``PYTHONHASHSEED``, so every worker used to hash strings with its own random seed and an env
that iterates a set of strings built a different instance for the same seed in each worker (issue 19, item 1).
Workers now start with ``-S -P`` and an environment holding only the seed; these tests pin both halves.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

from spade_envs.sandbox import RemoteEnv, SandboxConfig, WorkerPool
from spade_envs.sandbox.launch import read_only_paths
from spade_envs.sandbox.worker import WORKER_ENV_KEYS

LEVELS = ("bwrap", "landlock")

SET_ENV = """
import random

WORDS = {"apple", "banana", "cherry", "damson", "elder", "fig", "grape", "honeydew", "kiwi", "lemon"}


class SetEnv:
    max_turns = 3

    def reset(self, seed=None):
        pool = list(WORDS)  # set order follows the string hashes
        self.secret = random.Random(seed).choice(pool)
        return "guess the fruit; first listed: " + pool[0], {"hash": hash("spade")}

    def step(self, action):
        won = action == self.secret
        return "yes" if won else "no", float(won), won, False, {}

    def solution(self):
        return [self.secret]
"""

PROBE_ENV = """
import json
import os
import sys


class ProbeEnv:
    max_turns = 1

    def reset(self, seed=None):
        def readable(path):
            try:
                with open(path) as f:
                    return f.read()
            except OSError as exc:
                return f"blocked {type(exc).__name__}"

        probe = {
            "flags": {"no_site": sys.flags.no_site, "no_user_site": sys.flags.no_user_site,
                      "safe_path": getattr(sys.flags, "safe_path", None),
                      "hash_randomization": sys.flags.hash_randomization},
            "environ": sorted(os.environ),
            "path": sys.path,
            "modules": sorted(m for m in sys.modules if "editable" in m or m == "spade_pythonpath_probe"),
            "secret": readable(@SECRET@),
        }
        try:
            import spade_pythonpath_probe  # noqa: F401
            probe["import"] = "SUCCEEDED"
        except ImportError:
            probe["import"] = "blocked"
        return json.dumps(probe), {}

    def step(self, action):
        return "", 0.0, True, False, {}

    def solution(self):
        return ["x"]
"""


@pytest.fixture(scope="module", params=LEVELS)
def pool(request):
    with WorkerPool(SandboxConfig(isolation=request.param, pool_size=1, preload_numpy=False)) as pool:
        assert pool.level == request.param
        yield pool


def test_an_env_that_iterates_a_set_of_strings_builds_the_same_instance_in_five_workers(pool):
    seen = []
    for _ in range(5):
        env = RemoteEnv(SET_ENV, pool)
        try:
            episodes = []
            for seed in range(4):
                obs, info = env.reset(seed)
                episodes.append((obs, info["hash"], env.solution()))
            seen.append(episodes)
        finally:
            env.close()
    assert all(episodes == seen[0] for episodes in seen), seen
    assert len({episode[2][0] for episode in seen[0]}) > 1  # the seeds do pick different secrets


def test_the_hash_seed_keeps_the_isolation_of_python_minus_i(pool, tmp_path, monkeypatch):
    """No site (hence no user site, no .pth code), no script dir, no host environment, no sys.path dir of the
    host bound in (a PYTHONPATH entry or the driver script's dir may hold anything)."""
    outside = tmp_path / "on_the_host_sys_path"
    outside.mkdir()
    (outside / "spade_pythonpath_probe.py").write_text("VALUE = 1\n")
    secret = outside / "secret.txt"
    secret.write_text("host secret")
    monkeypatch.setenv("PYTHONPATH", str(outside))
    monkeypatch.setenv("PYTHONSTARTUP", str(outside / "spade_pythonpath_probe.py"))
    monkeypatch.setattr(sys, "path", [*sys.path, str(outside)])
    assert str(outside) not in read_only_paths()
    env = RemoteEnv(PROBE_ENV.replace("@SECRET@", repr(str(secret))), pool)
    try:
        probe = json.loads(env.reset(0)[0])
    finally:
        env.close()
    assert probe["flags"]["no_site"] == 1 and probe["flags"]["hash_randomization"] == 0
    if sys.version_info >= (3, 11):
        assert probe["flags"]["safe_path"] is True
    assert set(probe["environ"]) <= WORKER_ENV_KEYS  # PYTHONHASHSEED, PYTHONPATH etc. are gone
    worker_dir = str(Path(os.path.dirname(os.path.abspath(__file__))).parents[2] / "spade_envs" / "sandbox")
    assert worker_dir not in probe["path"] and str(outside) not in probe["path"]
    assert not any(p.endswith("site-packages") and "/.local/" in p for p in probe["path"])
    assert probe["modules"] == []  # neither .pth hooks (editable installs) nor the PYTHONPATH module ran
    assert probe["import"] == "blocked"
    assert probe["secret"].startswith("blocked")


def test_a_worker_that_cannot_harden_itself_is_a_machine_fault() -> None:
    """A start-up failure happens before any env code (here: a file limit above the host's own hard limit, which
    the worker may not raise; on a non-root host also threads exhausted under the trainer's RLIMIT_NPROC by another
    env): it was an ``EnvRaised``, scored ``construct_failed`` against whichever design asked for the worker."""
    import resource

    from spade_envs.envs.failures import fault_code
    from spade_envs.sandbox.errors import SandboxUnavailable
    from spade_envs.sandbox.process import Worker

    hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    if hard == resource.RLIM_INFINITY or hard >= 1 << 30:
        pytest.skip("no finite hard file limit to exceed")
    config = SandboxConfig(pool_size=0, preload_numpy=False, open_files=hard + 1)
    with pytest.raises(SandboxUnavailable, match="could not start") as caught:
        Worker(config, "landlock")
    assert fault_code(caught.value, "load") == "machine_fault"
