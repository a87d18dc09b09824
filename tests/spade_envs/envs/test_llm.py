import pytest

from spade_envs.envs.llm import ChatClient, ChatError


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
