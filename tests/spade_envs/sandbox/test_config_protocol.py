import math

import numpy as np
import pytest

from spade_envs.sandbox.config import SandboxConfig
from spade_envs.sandbox.protocol import check_step_result, decode, encode, scrub


def test_defaults_are_valid_and_round_trip():
    config = SandboxConfig()
    assert config.isolation == "auto" and config.soft_timeout_s < config.call_timeout_s
    assert SandboxConfig.from_dict(config.to_dict()) == config


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"isolation": "docker"}, "isolation must be one of auto, bwrap, landlock, rlimits, none"),
        ({"memory_mb": 0}, "memory_mb must be positive"),
        ({"memory_mb": 96}, "memory_mb must be at least 128 with preload_numpy"),
        ({"soft_timeout_s": 20.0}, "soft_timeout_s (20.0) must be below call_timeout_s (10.0)"),
        ({"pool_size": -1}, "pool_size must be >= 0"),
        ({"timeout": 3}, "unknown sandbox option(s) ['timeout']"),
    ],
)
def test_bad_config_is_a_clear_error(data, message):
    with pytest.raises(ValueError) as info:
        SandboxConfig.from_dict(data)
    assert message in str(info.value)


def test_scrub_makes_plain_json():
    value = {"a": np.int64(3), "b": np.array([1.5, 2.5]), "c": math.nan, 4: (1, {2}), "d": object()}
    out = scrub(value, max_chars=100)
    assert out["a"] == 3 and out["b"] == [1.5, 2.5] and out["c"] is None and out["4"] == [1, [2]]
    assert out["d"].startswith("<object object")
    assert decode(encode(out)) == out


def test_scrub_caps_strings_and_depth():
    with pytest.raises(OverflowError, match="exceeds the cap of 10"):
        scrub({"x": "y" * 11}, max_chars=10)
    deep: list = []
    for _ in range(30):
        deep = [deep]
    with pytest.raises(OverflowError, match="nested deeper"):
        scrub(deep, max_chars=10)


def test_encode_refuses_non_finite_and_decode_refuses_constants():
    with pytest.raises(ValueError):
        encode({"r": math.inf})
    with pytest.raises(ValueError, match="non-finite"):
        decode(b'{"r": NaN}')
    with pytest.raises(ValueError, match="JSON object"):
        decode(b"[1]")


@pytest.mark.parametrize(
    ("result", "message"),
    [
        (["o", 1.0, True, False], "list of 5"),
        (["o", None, True, False, {}], "finite number"),
        (["o", True, True, False, {}], "finite number"),
        (["o", 1e5, True, False, {}], "beyond"),
        (["o", 1.0, 1, False, {}], "booleans"),
        ([1, 1.0, True, False, {}], "observation"),
        (["o", 1.0, True, False, []], "info"),
    ],
)
def test_host_rechecks_step_results(result, message):
    with pytest.raises(ValueError, match=message):
        check_step_result(result)
    assert check_step_result(["o", 1, True, False, {}]) == ("o", 1.0, True, False, {})
