"""Framework-free core of SPADE: the executable-environment contract, built-in environments and tooling.

Nothing here imports verl; the verl recipe (``recipe.spade``) builds on this package, never the reverse.
"""

from spade_envs.envs import public_names as _public_names
from spade_envs.envs.contract import ExecutableEnv, extract_command, is_win, outcome_reward
from spade_envs.envs.errors import ContractViolation, InvalidEnvSource, SpadeEnvError, ToolError
from spade_envs.envs.spec import EnvSpec
from spade_envs.envs.tooluse import Instruction, ToolUseEnv, tool_call

__version__ = "0.1.0"

__all__ = [
    "ContractViolation",
    "EnvSpec",
    "ExecutableEnv",
    "Instruction",
    "InvalidEnvSource",
    "SpadeEnvError",
    "ToolError",
    "ToolUseEnv",
    "extract_command",
    "is_win",
    "outcome_reward",
    "tool_call",
]

# ``from spade_envs.tooluse import ...`` (generated envs, built-ins) keeps working: spade_envs/envs/public_names.py.
_public_names.install()

from spade_envs.builtin import register_builtins  # noqa: E402  (registration needs the names above)

register_builtins()
