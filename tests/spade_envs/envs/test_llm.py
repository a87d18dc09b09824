import email.utils
import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from spade_envs.envs.llm import ChatClient, ChatError, ChatMisconfigured, ChatRefused


def test_completion_with_text_and_tool_calls(stub_openai):
    server = stub_openai(
        lambda body: {
            "content": f"echo {body['messages'][-1]['content']}",
            "tool_calls": [{"id": "1", "type": "function", "function": {"name": "f", "arguments": '{"x": 1}'}}],
        }
    )
    client = ChatClient(server.base_url, "tiny", api_key="k")
    result = client.complete([{"role": "user", "content": "hi"}], temperature=0.1, tools=[{"type": "function"}])
    assert result.text == "echo hi" and result.tool_calls == [{"name": "f", "arguments": {"x": 1}}]
    assert server.requests[0]["model"] == "tiny" and server.requests[0]["temperature"] == 0.1
    assert server.requests[0]["tools"] == [{"type": "function"}]


def test_transient_failures_are_retried(stub_openai):
    answers = iter([(503, "busy"), (429, "slow down"), {"content": "ok"}])
    server = stub_openai(lambda _body: next(answers))
    client = ChatClient(server.base_url, "m", max_retries=2)
    client_sleep = []
    import spade_envs.envs.llm as llm

    original = llm.time.sleep
    llm.time.sleep = client_sleep.append
    try:
        assert client.complete([{"role": "user", "content": "x"}]).text == "ok"
    finally:
        llm.time.sleep = original
    assert client_sleep == [0.5, 1.0] and len(server.requests) == 3


def test_client_errors_are_not_retried(stub_openai):
    server = stub_openai(lambda _body: (400, '{"error": "bad model"}'))
    with pytest.raises(ChatError, match="HTTP 400"):
        ChatClient(server.base_url, "m").complete([{"role": "user", "content": "x"}])
    assert len(server.requests) == 1


def test_bad_base_url_is_a_clear_error():
    with pytest.raises(ValueError, match="must start with http"):
        ChatClient("localhost:8000/v1", "m")


OVERFLOW = ("This model's maximum context length is 100 tokens. However, you requested 164 tokens (100 in the "
            "messages, 64 in the completion). Please reduce the length of the messages or completion.")  # fmt: skip


class _Scripted:
    """A chat endpoint that answers each request with the next ``(status, body, headers)`` of its script."""

    def __init__(self, script):
        self.script, self.requests = iter(script), 0
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):  # noqa: N802
                self.rfile.read(int(self.headers["Content-Length"]))
                outer.requests += 1
                status, body, headers = next(outer.script)
                payload = body.encode()
                self.send_response(status)
                for key, value in {"Content-Type": "application/json", **headers}.items():
                    self.send_header(key, value)
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

            def log_message(self, *_args):
                return

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.base_url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"
        threading.Thread(target=self.server.serve_forever, args=(0.05,), daemon=True).start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()


OK = (200, json.dumps({"choices": [{"message": {"role": "assistant", "content": "ok"}, "finish_reason": "stop"}]}), {})


@pytest.fixture
def scripted():
    servers = []

    def start(script):
        servers.append(_Scripted(script))
        return servers[-1]

    yield start
    for server in servers:
        server.close()


@pytest.fixture
def sleeps(monkeypatch):
    import spade_envs.envs.llm as llm

    waited = []
    monkeypatch.setattr(llm.time, "sleep", waited.append)
    return waited


def test_a_408_is_retried_like_a_5xx(scripted, sleeps):
    server = scripted([(408, "request timeout", {}), OK])
    assert ChatClient(server.base_url, "m", max_retries=1).complete([{"role": "user", "content": "x"}]).text == "ok"
    assert server.requests == 2 and sleeps == [0.5]


@pytest.mark.parametrize("status", [401, 403, 404])
def test_a_wrong_url_model_or_key_is_misconfigured_and_not_retried(scripted, sleeps, status):
    server = scripted([(status, '{"error": {"message": "The model `m` does not exist."}}', {}), OK])
    with pytest.raises(ChatMisconfigured, match=f"HTTP {status}") as caught:
        ChatClient(server.base_url, "m", max_retries=3).complete([{"role": "user", "content": "x"}])
    assert isinstance(caught.value, ChatRefused) and caught.value.status == status
    assert server.requests == 1 and sleeps == []


@pytest.mark.parametrize(("status", "body", "over_context"), [
    (400, json.dumps({"message": OVERFLOW}), True),
    (400, json.dumps({"error": {"message": "The decoder prompt (length 5000) is longer than the maximum model length "
                                           "of 4096."}}), True),
    (400, json.dumps({"error": {"code": "context_length_exceeded", "message": "Too long."}}), True),
    (400, json.dumps({"error": {"message": "The response was filtered due to the prompt triggering content "
                                           "management policy."}}), False),
    (413, "Request Entity Too Large", False),
    (422, json.dumps({"detail": "unprocessable"}), False),
])  # fmt: skip
def test_only_a_context_length_400_reads_as_a_context_refusal(scripted, sleeps, status, body, over_context):
    server = scripted([(status, body, {}), OK])
    with pytest.raises(ChatRefused) as caught:
        ChatClient(server.base_url, "m", max_retries=3).complete([{"role": "user", "content": "x"}], max_tokens=8)
    assert caught.value.over_context is over_context and not isinstance(caught.value, ChatMisconfigured)
    assert server.requests == 1 and sleeps == []


def test_retry_after_is_waited_for_and_capped(scripted, sleeps):
    server = scripted([(429, "slow down", {"Retry-After": "7"}), (503, "busy", {"Retry-After": "3600"}),
                       (503, "busy", {"Retry-After": "not a number"}), OK])  # fmt: skip
    client = ChatClient(server.base_url, "m", max_retries=3, max_retry_wait_s=20.0)
    assert client.complete([{"role": "user", "content": "x"}]).text == "ok"
    assert sleeps == [7.0, 20.0, 2.0]  # the header, the cap, then the usual backoff (0.5 * 2**2)


def test_retry_after_as_an_http_date(scripted, sleeps):
    when = email.utils.formatdate(time.time() + 30, usegmt=True)
    server = scripted([(429, "slow down", {"Retry-After": when}), OK])
    assert ChatClient(server.base_url, "m", max_retries=1).complete([{"role": "user", "content": "x"}]).text == "ok"
    assert len(sleeps) == 1 and 25 <= sleeps[0] <= 31


def test_a_negative_retry_wait_cap_is_refused():
    with pytest.raises(ValueError, match="max_retry_wait_s"):
        ChatClient("http://localhost:1/v1", "m", max_retry_wait_s=-1)
