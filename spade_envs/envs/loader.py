"""Turn environment source text into an environment class: the one path by which every env is loaded.

This executes the source: call it only on trusted code (built-ins, tests) or inside the sandbox worker, never on
generated code in the trainer's own process.

Every load, in every context (validation and its first-episode check, hint vetting, measurement and training plays,
``import_pool``, in-process loads of built-ins), compiles the source under one file name, :data:`ENV_FILENAME`, as
one module, :data:`ENV_MODULE`, with the same globals: env code cannot tell from its ``__file__``, ``__name__``,
``co_filename``, a traceback or its globals whether it is being validated or trained (docs/sandbox.md).
"""

from __future__ import annotations

import sys
import types

from spade_envs.envs.errors import InvalidEnvSource

__all__ = ["ENV_FILENAME", "ENV_MODULE", "REQUIRED_METHODS", "find_env_class", "load_env_class"]

REQUIRED_METHODS = ("reset", "step", "solution")
#: The file name every env's code is compiled under (its ``__file__``, ``co_filename`` and traceback entries).
ENV_FILENAME = "<env>"
#: The module every env's code runs in (its ``__name__``, and its classes' ``__module__``).
ENV_MODULE = "spade_env"


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


def load_env_class(source: str) -> type:
    """Compile and execute ``source`` as a fresh module and return its environment class.

    Raises :class:`InvalidEnvSource` with code ``syntax_error``, ``exec_error``, ``no_env_class``,
    ``several_env_classes`` or ``missing_method``. The module is registered in ``sys.modules`` as
    :data:`ENV_MODULE` so that dataclasses, pickling and ``typing.get_type_hints`` work inside it. A sandbox worker
    loads exactly one env; in a process that loads several (trusted code only), each load is a new module that
    replaces the previous one there, so only the newest env's classes can be pickled by reference.
    """
    try:
        code = compile(source, ENV_FILENAME, "exec")
    except SyntaxError as exc:
        raise InvalidEnvSource("syntax_error", f"line {exc.lineno}: {exc.msg}") from exc
    module = types.ModuleType(ENV_MODULE)
    module.__file__ = ENV_FILENAME
    previous = sys.modules.get(ENV_MODULE)
    sys.modules[ENV_MODULE] = module
    try:
        exec(code, module.__dict__)
    except Exception as exc:
        if sys.modules.get(ENV_MODULE) is module:  # a failed load leaves the previous module registered
            del sys.modules[ENV_MODULE]
            if previous is not None:
                sys.modules[ENV_MODULE] = previous
        raise InvalidEnvSource("exec_error", f"{type(exc).__name__}: {exc}") from exc
    return find_env_class(module)
