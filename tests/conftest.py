"""Shared fixtures. Note: never ``import tests`` (the verl wheel installs a top-level package of that name)."""

from __future__ import annotations

import json
import logging
import signal
import sys
import threading
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

#: Python's own handlers: the evaluation's Ctrl-C and SIGTERM tests need them. One CI run on xdist saw SIGINT do
#: nothing in a worker, after some earlier test or in-process library in that worker had replaced the handler.
_DEFAULT_HANDLERS = {signal.SIGINT: signal.default_int_handler, signal.SIGTERM: signal.SIG_DFL}


def _reset_signal_handlers(when: str, nodeid: str) -> None:
    for sig, default in _DEFAULT_HANDLERS.items():
        handler = signal.getsignal(sig)
        if handler is not default:
            logging.getLogger("tests").warning("%s was handled by %r %s %s; reset", sig.name, handler, when, nodeid)
            signal.signal(sig, default)


@pytest.fixture(autouse=True)
def _default_signal_handlers(request: pytest.FixtureRequest) -> Iterator[None]:
    """Every test starts and ends with Python's SIGINT/SIGTERM handlers; a change is logged (warnings fail)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    _reset_signal_handlers("before", request.node.nodeid)
    yield
    _reset_signal_handlers("after", request.node.nodeid)


Responder = Callable[[dict[str, Any]], dict[str, Any] | tuple[int, str]]


class StubOpenAI:
    """An OpenAI-compatible chat endpoint on 127.0.0.1 that answers with a scripted responder.

    The responder gets the request body and returns an assistant message dict (``{"content": ..., "tool_calls":
    [...]}``) or ``(http_status, body)`` to simulate a failure. Every request body is kept in ``requests``.
    """

    def __init__(self, responder: Responder) -> None:
        self.responder = responder
        self.requests: list[dict[str, Any]] = []
        stub = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                stub.requests.append(body)
                answer = stub.responder(body)
                if isinstance(answer, tuple):
                    status, text = answer
                    payload = text.encode()
                else:
                    status = 200
                    message = {"role": "assistant", "content": answer.get("content"), **answer}
                    payload = json.dumps(
                        {"choices": [{"index": 0, "message": message, "finish_reason": "stop"}]}
                    ).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

            def log_message(self, *_args: Any) -> None:
                return

        class Server(ThreadingHTTPServer):
            # tests run up to 16 clients at once; socketserver's default listen backlog (5) can overflow on a loaded
            # machine, and a connection lost there is a transport failure no test means to exercise
            request_queue_size = 128

            def handle_error(self, request: Any, client_address: Any) -> None:
                # a client that gave up on its request (a run interrupted on purpose) is not an error of the stub
                if not isinstance(sys.exc_info()[1], (BrokenPipeError, ConnectionResetError)):
                    super().handle_error(request, client_address)

        self.server = Server(("127.0.0.1", 0), Handler)
        self.base_url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def stub_openai() -> Iterator[Callable[[Responder], StubOpenAI]]:
    """Start stub servers with ``stub_openai(responder)``; all are shut down after the test."""
    servers: list[StubOpenAI] = []

    def start(responder: Responder) -> StubOpenAI:
        servers.append(StubOpenAI(responder))
        return servers[-1]

    yield start
    for server in servers:
        server.close()


@pytest.fixture(scope="module", autouse=True)
def _no_sandbox_workers_outlive_a_module() -> Iterator[None]:
    """Agent loops driven in-process keep one sandbox pool per config for the process (as in a Ray worker); shut
    them down after each module so later modules start without their pre-started workers."""
    yield
    loops = sys.modules.get("recipe.spade.agent_loops")
    if loops is not None:
        loops.shutdown_sandboxes()
