"""The scorer process of :mod:`spade_envs.evaluation.scorer_pool`: read ``(fn, args)`` frames, answer ``(ok, value)``.

Started as ``python -m spade_envs.evaluation.scorer_worker <module>...``: it imports the named modules first (so
the first call does not pay for importing sympy), moves the protocol off fd 1 (scorer code that prints cannot
corrupt it), says ``ready`` and serves calls one at a time in its main thread, where signal-based timeouts such as
math-verify's own work. The host kills it when a call overruns.
"""

from __future__ import annotations

import importlib
import logging
import os
import pickle
import signal
import sys

from spade_envs.evaluation.scorer_pool import read_frame, write_frame


def _serve(preload: list[str]) -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the host decides; it exits on EOF when the host is gone
    out_fd = os.dup(1)
    os.dup2(2, 1)  # stray prints go to stderr, never into the protocol pipe
    in_fd = sys.stdin.fileno()
    logging.disable(logging.WARNING)  # scorers' own warnings would flood the run's stderr
    for name in preload:
        try:
            importlib.import_module(name)
        except ImportError:
            pass  # the caller's import of the same module reports it
    write_frame(out_fd, b"ready")
    while True:
        try:
            request = read_frame(in_fd)
        except EOFError:
            return
        try:
            fn, args = pickle.loads(request)
            reply = (True, fn(*args))
        except Exception as exc:  # noqa: BLE001 (the caller re-raises it)
            reply = (False, exc)
        try:
            data = pickle.dumps(reply)
        except Exception as exc:  # noqa: BLE001 (an unpicklable result or exception)
            data = pickle.dumps((False, f"{type(exc).__name__}: {exc}; the scorer's reply was {reply[1]!r}"[:2000]))
        write_frame(out_fd, data)


if __name__ == "__main__":
    _serve(sys.argv[1:])
