import ast
import json
import re
from collections import Counter
from dataclasses import replace

import numpy as np
import pytest

from spade_envs.builtin import BUILTINS, builtin_spec
from spade_envs.design.ast_hash import normalized_ast_hash
from spade_envs.design.memory import EnvMemory, MemoryConfig, MemoryFileError, MemoryRecord
from spade_envs.envs.spec import EnvSpec

GAME = '''
import random


class CounterEnv:
    """Count to a hidden target."""

    max_turns = 5

    def reset(self, seed=None):
        # a fresh instance per seed
        rng = random.Random(seed)
        self.target = rng.randint(3, 9)
        total = 0
        for step in range(2):
            total += step
        self.count = total
        return f"count to {self.target}", {}

    def step(self, action):
        amount = int(action) if action.isdigit() else 0
        self.count += amount
        done = self.count >= self.target
        return str(self.count), float(self.count == self.target), done, False, {}

    def solution(self):
        return [str(self.target)]
'''


def spec(i, skill="logical_deduction", setting="games", source=None):
    if source is None:
        source = GAME.replace("randint(3, 9)", f"randint(3, {10 + i})")
    return EnvSpec(env_id=f"env{i}", setting=setting, skill=skill, source=source)


def rec(i, win=0.5, regret=0.1, step=0, **kw):
    return MemoryRecord(spec(i, **kw), win_rate=win, regret=regret, plays=8, last_played_step=step)


def filled(n, capacity=1000, **cfg):
    memory = EnvMemory(MemoryConfig(capacity=capacity, **cfg))
    rng = np.random.default_rng(0)
    for i in range(n):
        memory.add(rec(i, win=float(rng.integers(0, 9)) / 8, regret=float(rng.random()) * 0.4, step=i % 7))
    return memory


# ----- normalized_ast_hash ----------------------------------------------------------------------------------


def test_hash_ignores_docstrings_comments_and_formatting():
    cosmetic = ast.unparse(ast.parse(GAME)).replace("    def step", "    # a comment\n    def step")
    cosmetic = cosmetic.replace('"""Count to a hidden target."""', "'another docstring'\n    'and a comment string'")
    assert normalized_ast_hash(cosmetic) == normalized_ast_hash(GAME)


def test_hash_ignores_renamed_locals_and_arguments():
    renamed = GAME
    for old, new in [("rng", "r"), ("total", "acc"), ("amount", "n"), ("action", "act"), ("self", "me")]:
        renamed = re.sub(rf"\b{old}\b", new, renamed)
    assert "me.count" in renamed and "acc += step" in renamed
    assert normalized_ast_hash(renamed) == normalized_ast_hash(GAME)


@pytest.mark.parametrize(
    ("old", "new"),
    [
        ("randint(3, 9)", "randint(3, 8)"),  # constant
        ("self.target", "self.goal"),  # attribute
        ("class CounterEnv", "class TallyEnv"),  # class name
        ("def solution", "def answer"),  # method name
        ("max_turns = 5", "turns = 5"),  # class-level name
        ("import random", "import random as rnd"),  # imports
    ],
)
def test_hash_keeps_semantic_names_and_constants(old, new):
    assert old in GAME
    assert normalized_ast_hash(GAME.replace(old, new)) != normalized_ast_hash(GAME)


def test_hash_keeps_closures_and_globals_apart():
    closure = "def f(a):\n    def g(b):\n        return a\n    return g\n"
    own_local = "def f(a):\n    def g(b):\n        return b\n    return g\n"
    assert normalized_ast_hash(closure) != normalized_ast_hash(own_local)
    assert normalized_ast_hash(closure) == normalized_ast_hash(closure.replace("a", "x").replace("b", "y"))
    glob = "def f():\n    global counter\n    counter = 1\n"
    assert normalized_ast_hash(glob) != normalized_ast_hash(glob.replace("counter", "other"))
    nonlocal_ = "def f():\n    c = 0\n    def g():\n        nonlocal c\n        c += 1\n    return g\n"
    assert normalized_ast_hash(nonlocal_) == normalized_ast_hash(re.sub(r"\bc\b", "k", nonlocal_))
    assert normalized_ast_hash(nonlocal_) != normalized_ast_hash(nonlocal_.replace("c += 1", "c += 2"))
    lam = "f = lambda x, y=2: x + y\n"
    assert normalized_ast_hash(lam) == normalized_ast_hash("f = lambda p, q=2: p + q\n")
    assert normalized_ast_hash(lam) != normalized_ast_hash("f = lambda p, q=3: p + q\n")


def test_hash_of_builtin_sources_survives_reformatting():
    for entry in BUILTINS:
        source = builtin_spec(entry.name).source
        assert normalized_ast_hash(ast.unparse(ast.parse(source))) == normalized_ast_hash(source), entry.name


def test_unparseable_source_hashes_its_stripped_text():
    broken = "class BrokenEnv(:\n    x = 1\n"
    assert normalized_ast_hash(broken) == normalized_ast_hash("\n  class BrokenEnv(:  \n\n      x = 1")
    assert normalized_ast_hash(broken) != normalized_ast_hash(broken.replace("1", "2"))
    assert normalized_ast_hash("x = 1\x00") != normalized_ast_hash("x = 1")


# ----- records and config -----------------------------------------------------------------------------------


def test_record_derives_hash_and_created_step():
    r = MemoryRecord(replace(spec(0), created_step=4), win_rate=0.25, last_played_step=7)
    assert r.ast_hash == normalized_ast_hash(r.spec.source)
    assert r.created_step == 4 and r.env_id == "env0" and r.skill == "logical_deduction" and r.setting == "games"
    assert r.learnability == pytest.approx(0.1875) and r.playable
    assert MemoryRecord(spec(0), win_rate=0.5, last_played_step=7).created_step == 7
    assert not MemoryRecord(spec(0), win_rate=0.0, status="timeout").playable
    assert MemoryRecord(spec(0), win_rate=0.0, status="hint_leak").playable
    assert MemoryRecord.from_dict(json.loads(json.dumps(r.to_dict()))) == r


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"win_rate": 1.5}, r"env0: win_rate must be in \[0, 1\], got 1.5"),
        ({"win_rate": float("nan")}, "win_rate must be in"),
        ({"win_rate": 0.5, "regret": 2.0}, r"regret must be in \[-1, 1\]"),
        ({"win_rate": 0.5, "plays": -1}, "plays must be an int >= 0"),
        ({"win_rate": 0.5, "status": "weird"}, "status must be 'ok' or a failure code, got 'weird'"),
        ({"win_rate": 0.5, "created_step": -2}, "created_step must be an int >= 0"),
    ],
)
def test_bad_record_is_rejected(kwargs, message):
    with pytest.raises(ValueError, match=message):
        MemoryRecord(spec(0), **kwargs)


def test_memory_config_validation():
    with pytest.raises(ValueError, match=re.escape("unknown memory option(s) ['capacty']; known: [")):
        MemoryConfig.from_dict({"capacty": 5})
    with pytest.raises(ValueError, match="never overlap"):
        MemoryConfig(too_easy=0.8)
    with pytest.raises(ValueError, match="capacity must be an int >= 1"):
        MemoryConfig(capacity=0)
    with pytest.raises(ValueError, match="temperature must be a positive"):
        MemoryConfig(temperature=0.0)
    assert MemoryConfig.from_dict(MemoryConfig(capacity=7).to_dict()) == MemoryConfig(capacity=7)


# ----- add, dedup, eviction, re-scoring ---------------------------------------------------------------------


def test_cosmetic_duplicate_updates_stats_instead_of_adding():
    memory = EnvMemory()
    assert memory.add(rec(0, win=0.25, step=1))
    copy = EnvSpec("copy", "games", "logical_deduction", "# copied\n" + spec(0).source.replace("amount", "k"))
    assert not memory.add(MemoryRecord(copy, win_rate=0.75, regret=0.3, plays=4, last_played_step=5))
    assert len(memory) == 1 and "copy" not in memory
    kept = memory.get("env0")
    assert (kept.win_rate, kept.regret, kept.plays, kept.last_played_step) == (0.75, 0.3, 12, 5)
    with pytest.raises(ValueError, match="env 'env0' is already in memory"):
        memory.add(rec(0))


def test_eviction_removes_unplayable_then_lowest_score_then_least_recently_played():
    memory = EnvMemory(MemoryConfig(capacity=4))
    memory.add(rec(0, win=0.5, regret=0.5, step=0))  # best score
    memory.add(rec(1, win=1.0, regret=0.0, step=1))  # score 0, played at 1
    memory.add(rec(2, win=0.0, regret=0.0, step=2))  # score 0, played at 2
    memory.add(replace(rec(3, step=3), status="timeout"))
    memory.add(rec(4, step=4))
    assert sorted(r.env_id for r in memory) == ["env0", "env1", "env2", "env4"]
    memory.add(rec(5, step=5))
    assert sorted(r.env_id for r in memory) == ["env0", "env2", "env4", "env5"]
    memory.add(rec(6, step=6))
    assert sorted(r.env_id for r in memory) == ["env0", "env4", "env5", "env6"]
    assert len(memory) == 4


def test_eviction_never_removes_a_kept_env():
    """The env pool keeps its live envs and the designs about to go live (review 2, finding 1)."""
    memory = EnvMemory(MemoryConfig(capacity=3))
    memory.add(rec(0, win=0.5, regret=0.5))  # best score
    memory.add(rec(1, win=0.0, regret=0.0))  # score 0: the usual victim, but live
    memory.add(rec(2, win=0.5, regret=0.2))
    assert memory.add(rec(3, win=0.5, regret=0.3), keep={"env1"})
    assert sorted(r.env_id for r in memory) == ["env0", "env1", "env3"]  # the lowest score not kept went
    with pytest.raises(ValueError, match="every record is kept"):
        memory.add(rec(4), keep={"env0", "env1", "env3"})
    assert sorted(r.env_id for r in memory) == ["env0", "env1", "env3"]


def test_update_stats_rescores_on_replay():
    memory = filled(3)
    old = memory.get("env1")
    new = memory.update_stats("env1", win_rate=0.9, regret=None, plays=4, step=10)
    assert new.win_rate == 0.9 and new.plays == 12 and new.last_played_step == 10
    assert new.regret == old.regret  # a replay without hints measures no regret
    assert memory.get("env1") == new
    assert memory.update_stats("env1", 0.5, 0.2, 1, 11, status="crashed").status == "crashed"
    with pytest.raises(ValueError, match="env1: step 3 is before its last play at step 11"):
        memory.update_stats("env1", 0.5, 0.0, 1, 3)
    with pytest.raises(KeyError, match="env 'nope' is not in memory"):
        memory.update_stats("nope", 0.5, 0.0, 1, 3)


# ----- sampling ---------------------------------------------------------------------------------------------


def test_replay_follows_rank_prioritisation():
    memory = EnvMemory(MemoryConfig(temperature=1.0, staleness_weight=0.0, regret_weight=1.0))
    for i, regret in enumerate([0.1, 0.4, 0.3, 0.2]):
        memory.add(rec(i, regret=regret))
    memory.add(replace(rec(9, regret=0.9), status="nondeterministic"))  # never sampled
    rng = np.random.default_rng(1)
    counts = Counter(memory.sample_replay(1, 0, rng)[0].env_id for _ in range(6000))
    # ranks by regret: env1, env2, env3, env0 -> P proportional to 1, 1/2, 1/3, 1/4
    expected = np.array([1, 1 / 2, 1 / 3, 1 / 4]) / sum([1, 1 / 2, 1 / 3, 1 / 4])
    observed = np.array([counts[e] for e in ["env1", "env2", "env3", "env0"]]) / 6000
    assert np.abs(observed - expected).max() < 0.03
    assert "env9" not in counts


def test_replay_staleness_term_and_batches():
    memory = EnvMemory(MemoryConfig(staleness_weight=1.0))
    for i, step in enumerate([0, 3, 5, 5]):
        memory.add(rec(i, step=step))
    rng = np.random.default_rng(2)
    counts = Counter(r.env_id for _ in range(3000) for r in memory.sample_replay(1, 5, rng))
    assert set(counts) == {"env0", "env1"}  # played at step 5: not stale at all
    assert counts["env0"] / counts["env1"] == pytest.approx(5 / 2, rel=0.15)
    batch = memory.sample_replay(10, 6, rng)
    assert len(batch) == 4 and len({r.env_id for r in batch}) == 4
    assert memory.sample_replay(0, 6, rng) == []
    with pytest.raises(ValueError, match="step 4 is before the last play of a record"):
        memory.sample_replay(1, 4, rng)


def test_replay_without_stale_records_uses_the_score_alone():
    memory = EnvMemory(MemoryConfig(staleness_weight=0.5, temperature=0.05))
    memory.add(rec(0, regret=0.9, step=2))
    memory.add(rec(1, regret=0.0, step=2))
    rng = np.random.default_rng(0)
    assert {memory.sample_replay(1, 2, rng)[0].env_id for _ in range(200)} == {"env0"}
    assert EnvMemory().sample_replay(3, 0, rng) == []


def test_exemplars_pick_learnable_high_regret_positives_and_labelled_negatives():
    memory = EnvMemory()
    for i in range(20):  # learnable, regret grows with i
        memory.add(rec(i, win=0.5, regret=i / 100))
    memory.add(rec(100, win=0.95))
    memory.add(rec(101, win=0.0))
    memory.add(rec(102, win=0.5, regret=0.9, skill="optimization"))
    memory.add(replace(rec(103, win=0.5, regret=0.99), status="exec_error"))
    rng = np.random.default_rng(0)
    seen = Counter()
    for _ in range(300):
        ex = memory.exemplars("logical_deduction", "games", rng, n_pos=2, n_neg=1)
        assert len(ex.positives) == 2 and len(ex.negatives) == 1
        assert ex.positives[0].record.regret >= ex.positives[1].record.regret
        seen.update(p.record.env_id for p in ex.positives)
        neg = ex.negatives[0]
        assert neg.reason in ("too easy: win rate 0.95", "too hard: win rate 0.00")
        assert neg.record.env_id == ("env100" if neg.reason.startswith("too easy") else "env101")
    assert set(seen) == {f"env{i}" for i in range(10, 20)}  # top max(3 * 2, 10) by regret
    assert ex.positives[0].reason.startswith("learnable: win rate 0.50, regret 0.")
    assert memory.exemplars("unknown_skill", "games", rng).positives == []
    with pytest.raises(ValueError, match="setting must be one of"):
        memory.exemplars("logical_deduction", "board_games", rng)


# ----- persistence ------------------------------------------------------------------------------------------


def test_save_and_load_restore_exactly(tmp_path):
    memory = filled(300, capacity=250, temperature=0.3)
    memory.add(replace(rec(900, skill="optimization"), status="hint_failed"))
    memory.add(MemoryRecord(builtin_spec(BUILTINS[-1].name), win_rate=0.3, regret=-0.1, plays=2))
    memory.update_stats("env299", 0.125, 0.05, 8, 12)
    path = tmp_path / "deep" / "memory.jsonl"
    memory.save(path)
    restored = EnvMemory.load(path)
    assert restored.config == memory.config
    assert list(restored) == list(memory)
    assert restored.stats() == memory.stats()
    a, b = np.random.default_rng(7), np.random.default_rng(7)
    for step in (12, 13, 20):
        assert restored.sample_replay(16, step, a) == memory.sample_replay(16, step, b)
        assert restored.exemplars("logical_deduction", "games", a) == memory.exemplars("logical_deduction", "games", b)
    restored.add(rec(1000, step=30))
    memory.add(rec(1000, step=30))
    assert list(restored) == list(memory)
    assert [p.name for p in path.parent.iterdir()] == ["memory.jsonl"]


def test_failed_save_keeps_the_old_file_and_leaves_no_temp_file(tmp_path):
    path = tmp_path / "memory.jsonl"
    memory = filled(5)
    memory.save(path)
    before = path.read_bytes()
    memory.add(MemoryRecord(replace(spec(50), metadata={"bad": object()}), win_rate=0.5))
    with pytest.raises(TypeError, match="not JSON serializable"):
        memory.save(path)
    assert path.read_bytes() == before
    assert [p.name for p in tmp_path.iterdir()] == ["memory.jsonl"]


def test_resave_after_changes_writes_the_changes(tmp_path):
    # saved lines are cached per record: changes, evictions (which move records between slots) and a load must
    # all leave the cache consistent with the records
    path = tmp_path / "memory.jsonl"
    memory = filled(50, capacity=50)
    memory.save(path)
    memory = EnvMemory.load(path)
    memory.update_stats("env7", 0.875, -0.5, 3, 20, status="hint_leak")
    for i in range(60, 70):
        memory.add(rec(i, win=0.5, regret=0.5, step=21))
    memory.save(path)
    memory.update_stats("env60", 0.0, None, 1, 22)
    memory.save(path)
    restored = EnvMemory.load(path)
    assert list(restored) == list(memory)
    assert restored.get("env7").status == "hint_leak" and restored.get("env60").win_rate == 0.0


@pytest.fixture
def saved(tmp_path):
    path = tmp_path / "memory.jsonl"
    filled(4).save(path)
    return path, path.read_text().splitlines()


def write(path, lines):
    path.write_text("\n".join(lines) + "\n")


def test_corrupt_json_line_is_named(saved):
    path, lines = saved
    lines[2] = lines[2][:40]
    write(path, lines)
    with pytest.raises(MemoryFileError, match=re.escape(f"{path}:3: not valid JSON")):
        EnvMemory.load(path)
    path.write_bytes(b"\n".join([lines[0].encode(), lines[1].encode(), b"\xff\xfe"]))
    with pytest.raises(MemoryFileError, match=re.escape(f"{path}:3: not UTF-8")):
        EnvMemory.load(path)


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (lambda d: d | {"win_rate": 2.0}, r":2: bad record: env0: win_rate must be in \[0, 1\]"),
        (lambda d: d | {"extra": 1}, r":2: bad record: .*unexpected keyword argument 'extra'"),
        (lambda d: {k: v for k, v in d.items() if k != "spec"}, r":2: bad record: 'spec'"),
        (lambda d: d | {"spec": d["spec"] | {"source": "tampered"}}, r":2: bad record: sha256 .* does not match"),
    ],
)
def test_bad_record_line_is_named(saved, edit, message):
    path, lines = saved
    lines[1] = json.dumps(edit(json.loads(lines[1])))
    write(path, lines)
    with pytest.raises(MemoryFileError, match=re.escape(str(path)) + message):
        EnvMemory.load(path)


def test_header_count_and_duplicates_are_checked(saved):
    path, lines = saved
    write(path, lines[:-1])
    with pytest.raises(MemoryFileError, match="header announces 4 records, found 3"):
        EnvMemory.load(path)
    write(path, [*lines[:-1], lines[1]])
    with pytest.raises(MemoryFileError, match=re.escape(f"{path}:5: duplicate env_id (env 'env0')")):
        EnvMemory.load(path)
    header = json.loads(lines[0])
    write(path, [json.dumps(header | {"version": 99}), *lines[1:]])
    with pytest.raises(MemoryFileError, match=":1: not a spade_envs.memory file of version 1"):
        EnvMemory.load(path)
    write(path, [json.dumps(header | {"config": {"capacity": 2}}), *lines[1:]])
    with pytest.raises(MemoryFileError, match=":4: more records than capacity 2"):
        EnvMemory.load(path)
    path.write_text("")
    with pytest.raises(MemoryFileError, match=":1: not valid JSON"):
        EnvMemory.load(path)


# ----- stats ------------------------------------------------------------------------------------------------


def test_stats_counts_and_histogram():
    memory = EnvMemory()
    memory.add(rec(0, win=0.05))
    memory.add(rec(1, win=0.55, skill="optimization"))
    memory.add(rec(2, win=1.0, skill="api_orchestration", setting="tool_use"))
    memory.add(replace(rec(3), status="syntax_error"))
    stats = memory.stats()
    assert stats["records"] == 4 and stats["playable"] == 3 and stats["capacity"] == 1000
    assert stats["by_setting"] == {"games": 3, "tool_use": 1}
    assert stats["by_skill"] == {"games/logical_deduction": 2, "games/optimization": 1, "tool_use/api_orchestration": 1}
    assert stats["by_status"] == {"ok": 3, "syntax_error": 1}
    assert stats["win_rate_histogram"]["counts"] == [1, 0, 0, 0, 0, 1, 0, 0, 0, 1]
    assert stats["win_rate_histogram"]["edges"][:3] == [0.0, 0.1, 0.2]
    json.dumps(stats)


def test_incremental_rank_order_matches_a_rebuild(tmp_path):
    """White-box: the incrementally maintained order must equal the one a load rebuilds from scratch."""
    memory = filled(400, capacity=300, regret_weight=0.7)
    rng = np.random.default_rng(3)
    for step in range(10, 40):
        for _ in range(int(rng.integers(1, 6))):  # few changes per sample: the incremental path
            ids = [r.env_id for r in memory]
            env_id = ids[int(rng.integers(len(ids)))]
            status = "crashed" if rng.random() < 0.1 else "hint_failed" if rng.random() < 0.1 else "ok"
            memory.update_stats(env_id, float(rng.integers(0, 9)) / 8, float(rng.random()) / 2, 8, step, status)
        memory.add(rec(1000 + step, win=float(rng.random()), step=step))  # evicts one
        batch = memory.sample_replay(8, step, rng)
        assert len({r.env_id for r in batch}) == len(batch) == 8
    order = memory._ranked()
    scores = memory._arrays["score"][order]
    assert np.all(np.diff(scores) <= 0)
    assert sorted(order.tolist()) == [i for i, r in enumerate(memory) if r.playable]
    memory.save(tmp_path / "m.jsonl")
    restored = EnvMemory.load(tmp_path / "m.jsonl")
    assert np.array_equal(restored._ranked(), order)
    assert np.array_equal(restored._h, memory._h)


# ----- regressions: dedup that merged different envs, failed duplicates, eviction order, snippets ------------


def test_hash_keeps_argument_names_that_calls_bind_by_keyword():
    a = "class PayEnv:\n    def pay(self, a, b):\n        return a - b\n    def solution(self):\n" \
        "        return [str(self.pay(a=5, b=3))]\n"  # fmt: skip
    swapped = a.replace("def pay(self, a, b):\n        return a - b", "def pay(self, b, a):\n        return b - a")
    assert normalized_ast_hash(a) != normalized_ast_hash(swapped)
    tool = "class T:\n    def tool_get(self, order_id: str) -> str:\n        return order_id\n"
    assert normalized_ast_hash(tool) != normalized_ast_hash(tool.replace("order_id", "oid"))


def test_hash_keeps_docstrings_the_code_reads():
    reads = 'class RulesEnv:\n    """Reach 10 to win."""\n    def reset(self, seed=None):\n'
    reads += "        return self.__doc__, {}\n"
    assert normalized_ast_hash(reads) != normalized_ast_hash(reads.replace("Reach 10", "Reach 99"))
    ignores = reads.replace("self.__doc__", "'rules'")
    assert normalized_ast_hash(ignores) == normalized_ast_hash(ignores.replace("Reach 10", "Reach 99"))


def test_hash_keeps_tool_docstrings_the_agent_reads():
    """ToolUseEnv.tools() describes each tool to the agent from its docstring: tools that differ there differ."""
    move = ('class BankEnv(ToolUseEnv):\n    """A bank."""\n    def tool_transfer(self, account: str) -> str:\n'
            '        """Move money to another account."""\n        # do it\n        return "done"\n')  # fmt: skip
    delete = move.replace("Move money to another account.", "Delete the account permanently.")
    assert normalized_ast_hash(move) != normalized_ast_hash(delete)
    assert normalized_ast_hash(move) == normalized_ast_hash(move.replace("A bank.", "Another bank."))  # not a tool
    assert normalized_ast_hash(move) == normalized_ast_hash(move.replace("# do it", "# differently"))


def test_a_failed_duplicate_never_overwrites_a_playable_record():
    memory = EnvMemory()
    memory.add(rec(0, win=0.5, regret=0.4, step=1))
    copy = EnvSpec("copy", "games", "logical_deduction", "# re-emitted\n" + spec(0).source)
    failed = MemoryRecord(copy, win_rate=0.0, regret=0.0, plays=0, last_played_step=2, status="timeout")
    assert not memory.add(failed)
    kept = memory.get("env0")
    assert (kept.win_rate, kept.regret, kept.status, kept.playable) == (0.5, 0.4, "ok", True)
    assert len(memory.sample_replay(1, 3, np.random.default_rng(0))) == 1


def test_an_unplayable_record_never_evicts_a_playable_one():
    memory = EnvMemory(MemoryConfig(capacity=2))
    memory.add(rec(0, win=0.5, regret=0.3))
    memory.add(rec(1, win=0.5, regret=0.1))
    assert not memory.add(replace(rec(2, win=0.0, regret=0.0), status="crashed"))
    assert sorted(r.env_id for r in memory) == ["env0", "env1"]
    assert memory.add(rec(3, win=0.5, regret=0.9))  # a better one still replaces the worst
    assert sorted(r.env_id for r in memory) == ["env0", "env3"]


def test_exemplar_snippet_is_bounded_without_line_breaks():
    from spade_envs.design.designer import exemplar_snippet

    one_line = "WORDS = [" + ", ".join(f'"w{i}"' for i in range(3000)) + "]\n" + "class WordEnv:\n    pass\n"
    assert len(exemplar_snippet(one_line)) == 2000
    lines = "x = 1\n" * 1000
    assert exemplar_snippet(lines).endswith("x = 1") and len(exemplar_snippet(lines)) < 2000
    assert exemplar_snippet("short") == "short"


def test_records_never_played_are_neither_positive_nor_negative_exemplars():
    """Issue 26: built-ins seeded with plays=0 were shown as "worked well (win rate 0.50)" with nothing measured."""
    memory = EnvMemory()
    memory.add(MemoryRecord(spec(0), win_rate=0.5, regret=0.0, plays=0, last_played_step=0))
    memory.add(MemoryRecord(spec(1), win_rate=0.95, regret=0.0, plays=0, last_played_step=0))
    shown = memory.exemplars(spec(0).skill, "games", np.random.default_rng(0))
    assert shown.positives == [] and shown.negatives == []
    memory.update_stats("env0", 0.5, 0.3, 4, 1)
    memory.update_stats("env1", 0.95, 0.0, 4, 1)
    shown = memory.exemplars(spec(0).skill, "games", np.random.default_rng(0))
    assert [e.record.env_id for e in shown.positives] == ["env0"] and len(shown.negatives) == 1
