"""RLVE's sliding-window difficulty on hand-computed sequences."""

from __future__ import annotations

import json
import random

import pytest

from spade_envs.rlve import SlidingWindow, SlidingWindowConfig


def test_paper_rule_raise_after_128_attempts_at_90_percent():
    window = SlidingWindow(["A", "B"])  # 128 attempts, accuracy 0.9, width 4
    # 7 groups of 16 at h = 0: 112 attempts, no check yet, however good
    for _ in range(7):
        assert not window.record("A", 0, 16, 16)
    # 8th group: 128 attempts, 112 + 3 = 115 successes -> 0.898 < 0.9: no raise, counters restart
    assert not window.record("A", 0, 3, 16)
    assert window.bounds("A") == (0, 0)
    # next 128: 116 successes -> 0.906 >= 0.9: h = 1, l = max(0, 1 - 3) = 0
    for _ in range(7):
        window.record("A", 0, 15, 16)
    assert window.record("A", 0, 11, 16)
    assert window.bounds("A") == (0, 1)
    assert window.bounds("B") == (0, 0)


def test_low_end_follows_at_width_and_lower_levels_do_not_count():
    window = SlidingWindow(["A"], SlidingWindowConfig(window_attempts=4, accuracy=0.75, width=3))
    seen = []
    for _ in range(5):
        high = window.bounds("A")[1]
        if high > 0:
            assert not window.record("A", high - 1, 0, 4)  # below h: ignored (else 0/4 would restart the count)
        assert window.record("A", high, 3, 4)  # 3/4 = 0.75 >= 0.75
        seen.append(window.bounds("A"))
    # h: 1..5; l = max(l, h - 2)
    assert seen == [(0, 1), (0, 2), (1, 3), (2, 4), (3, 5)]


def test_counters_restart_at_each_check():
    window = SlidingWindow(["A"], SlidingWindowConfig(window_attempts=3, accuracy=0.9))
    assert not window.record("A", 0, 0, 3)  # check at 3: 0/3, restart
    assert not window.record("A", 0, 2, 2)  # 2/2 but only 2 attempts since the check
    assert window.record("A", 0, 1, 1)  # 3/3 at the next check
    assert window.state_dict()["windows"]["A"] == {"low": 0, "high": 1, "successes": 0, "attempts": 0}


def test_stale_attempts_after_a_raise_are_ignored():
    window = SlidingWindow(["A"], SlidingWindowConfig(window_attempts=2, accuracy=0.5))
    assert window.record("A", 0, 2, 2)
    assert not window.record("A", 0, 2, 2)  # recorded for the old top: ignored
    assert window.state_dict()["windows"]["A"]["attempts"] == 0
    with pytest.raises(ValueError, match="above the window's top 1"):
        window.record("A", 2, 1, 1)


def test_sample_is_uniform_over_the_window():
    window = SlidingWindow(["A"], SlidingWindowConfig(window_attempts=1, accuracy=1.0, width=3))
    for _ in range(5):
        window.record("A", window.bounds("A")[1], 1, 1)
    assert window.bounds("A") == (3, 5)
    rng = random.Random(0)
    counts = {d: 0 for d in range(7)}
    for _ in range(3000):
        counts[window.sample("A", rng)] += 1
    assert set(d for d, n in counts.items() if n) == {3, 4, 5}
    assert all(900 < counts[d] < 1100 for d in (3, 4, 5))


def test_metrics_state_round_trip_and_mismatch():
    window = SlidingWindow(["A", "B"], SlidingWindowConfig(window_attempts=2, accuracy=0.5))
    window.record("A", 0, 1, 2)
    window.record("B", 0, 1, 1)
    assert window.metrics() == {"rlve/h/A": 1.0, "rlve/l/A": 0.0, "rlve/h/B": 0.0, "rlve/l/B": 0.0, "rlve/h_mean": 0.5}
    state = json.loads(json.dumps(window.state_dict()))
    restored = SlidingWindow(["A", "B"])
    restored.load_state_dict(state)
    assert restored.state_dict() == window.state_dict()
    assert restored.record("B", 0, 1, 1)  # the pending attempt at B survived the round trip
    with pytest.raises(ValueError, match=r"missing \['C'\], unknown \['B'\]"):
        SlidingWindow(["A", "C"]).load_state_dict(state)


def test_bad_input_is_a_clear_error():
    with pytest.raises(ValueError, match="accuracy must be in"):
        SlidingWindowConfig(accuracy=1.5)
    with pytest.raises(ValueError, match="unknown sliding window option"):
        SlidingWindowConfig.from_dict({"window": 3})
    window = SlidingWindow(["A"])
    with pytest.raises(KeyError, match="'Z' is not in this sliding window"):
        window.sample("Z", random.Random(0))
    with pytest.raises(ValueError, match="exceed attempts"):
        window.record("A", 0, 3, 2)
