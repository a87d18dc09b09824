"""docs/designer.md lists every failure code with the penalty the code really charges."""

from pathlib import Path

from spade_envs.design.rewards import DEFAULT_PENALTIES
from spade_envs.envs.failures import FAILURE_CODES, HINT_FAILURE_CODES

DOC = (Path(__file__).resolve().parents[1] / "docs" / "designer.md").read_text()


def test_every_failure_code_is_documented_with_its_penalty():
    for code, meaning in (FAILURE_CODES | HINT_FAILURE_CODES).items():
        assert f"| `{code}` | {meaning} | {DEFAULT_PENALTIES[code]:+.2f} |" in DOC, code
