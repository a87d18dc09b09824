"""A stand-in for ``vllm serve CKPT --host H --port P``: serves the test oracle on /v1/models and /v1/chat/completions.

Like vLLM it keeps a helper process in its process group. Test flags: ``--pid-file F`` (write the pids),
``--never-ready`` (load forever), ``--ignore-term`` (survive SIGTERM, so only SIGKILL stops it).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("checkpoint")
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--pid-file", type=Path)
    p.add_argument("--never-ready", action="store_true")
    p.add_argument("--ignore-term", action="store_true")
    args = p.parse_args()
    if args.ignore_term:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    helper = subprocess.Popen([sys.executable, "-c", "import signal, time; signal.signal(signal.SIGTERM, "
                               f"signal.{'SIG_IGN' if args.ignore_term else 'SIG_DFL'}); time.sleep(600)"])  # fmt: skip
    if args.pid_file:
        args.pid_file.write_text(json.dumps({"server": os.getpid(), "helper": helper.pid}))
    print(f"loading model {args.checkpoint}", flush=True)
    if args.never_ready:
        time.sleep(600)
    sys.path.insert(0, str(Path(__file__).parent))
    from eval_oracle import Oracle

    oracle = Oracle()

    class Handler(BaseHTTPRequestHandler):
        def _send(self, payload: dict[str, Any]) -> None:
            data = json.dumps(payload).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self) -> None:  # noqa: N802
            self._send({"object": "list", "data": [{"id": args.checkpoint, "object": "model"}]})

        def do_POST(self) -> None:  # noqa: N802
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            message = {"role": "assistant", **oracle(body)}
            self._send({"choices": [{"index": 0, "message": message, "finish_reason": "stop"}]})

        def log_message(self, *_args: Any) -> None:
            return

    print("ready", flush=True)
    ThreadingHTTPServer((args.host, args.port), Handler).serve_forever()


if __name__ == "__main__":
    main()
