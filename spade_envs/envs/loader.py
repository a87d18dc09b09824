"""Turn environment source text into an environment class.

This executes the source: call it only on trusted code (built-ins, tests) or inside the sandbox worker, never on
generated code in the trainer's own process.
"""

from __future__ import annotations

import itertools
import sys
import types

from spade_envs.envs.errors import InvalidEnvSource

__all__ = ["REQUIRED_METHODS", "find_env_class", "load_env_class"]

REQUIRED_METHODS = ("reset", "step", "solution")
_counter = itertools.count()


def find_env_class(module: types.ModuleType) -> type:
    """Return the one class *defined in* ``module`` whose name ends in ``Env`` (imported ones do not count)."""
    found = [
        obj
        for name, obj in vars(module).items()
        if isinstance(obj, type) and name.endswith("Env") and obj.__module__ == module.__name__
    ]
    if not found:
        raise InvalidEnvSource("no_env_class", "the source defines no class whose name ends in 'Env'")
    if len(found) > 1:
        names = ", ".join(sorted(c.__name__ for c in found))
        raise InvalidEnvSource("several_env_classes", f"the source defines several *Env classes: {names}")
    cls = found[0]
    missing = [m for m in REQUIRED_METHODS if not callable(getattr(cls, m, None))]
    if missing:
        raise InvalidEnvSource("missing_method", f"{cls.__name__} lacks {', '.join(missing)}")
    return cls


def load_env_class(source: str, filename: str = "<env>") -> type:
    """Compile and execute ``source`` as a fresh module and return its environment class.

    Raises :class:`InvalidEnvSource` with code ``syntax_error``, ``exec_error``, ``no_env_class``,
    ``several_env_classes`` or ``missing_method``. The module is registered in ``sys.modules`` under a unique
    name so that dataclasses, pickling and ``typing.get_type_hints`` work inside it.
    """
    try:
        code = compile(source, filename, "exec")
    except SyntaxError as exc:
        raise InvalidEnvSource("syntax_error", f"line {exc.lineno}: {exc.msg}") from exc
    module = types.ModuleType(f"spade_env_{next(_counter)}")
    module.__file__ = filename
    sys.modules[module.__name__] = module
    try:
        exec(code, module.__dict__)
    except Exception as exc:
        del sys.modules[module.__name__]
        raise InvalidEnvSource("exec_error", f"{type(exc).__name__}: {exc}") from exc
    return find_env_class(module)
