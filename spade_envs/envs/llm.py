"""A minimal client for any OpenAI-compatible chat endpoint (vLLM, SGLang, hosted APIs), on the stdlib only.

Used by the ``spade-envs run`` and ``generate`` commands to let an external model design or play environments
without GPU training. Retries transient failures (connection errors, 429, 5xx) with exponential backoff.
"""

from __future__ import annotations

import json
import re
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from typing import Any

from spade_envs.envs.errors import SpadeEnvError

__all__ = ["ChatClient", "ChatError", "ChatRefused", "ChatResult", "context_room"]

#: vLLM's (and OpenAI's) context-length refusals: the window, and the prompt's tokens in one of two wordings.
_CONTEXT = re.compile(r"maximum context length is (\d+)")
_PROMPT = re.compile(r"(\d+) in the messages|request has (\d+) input tokens|(\d+) input tokens")


class ChatError(SpadeEnvError):
    """The endpoint failed or answered something that is not a chat completion."""


class ChatRefused(ChatError):
    """The endpoint refused this request (HTTP 4xx other than 429): retrying the same request cannot succeed.

    A context-length 400 is the common case: the prompt plus ``max_tokens`` exceed the served window.
    """

    def __init__(self, message: str, status: int, detail: str) -> None:
        super().__init__(message)
        self.status, self.detail = status, detail


def context_room(detail: str) -> int | None:
    """Tokens left for the completion according to a context-length refusal's text, or ``None`` if it says none."""
    window, prompt = _CONTEXT.search(detail), _PROMPT.search(detail)
    if window is None or prompt is None:
        return None
    return int(window.group(1)) - int(next(g for g in prompt.groups() if g is not None))


@dataclass(frozen=True)
class ChatResult:
    """One completion: the text, and native tool calls as ``{"name", "arguments"}`` dicts (arguments parsed)."""

    text: str
    tool_calls: list[dict[str, Any]] = field(default_factory=list)
    finish_reason: str = ""


class ChatClient:
    """``POST {base_url}/chat/completions`` with retries; ``base_url`` usually ends in ``/v1``."""

    def __init__(
        self, base_url: str, model: str, api_key: str | None = None, timeout_s: float = 600.0, max_retries: int = 3
    ) -> None:
        if not base_url.startswith(("http://", "https://")):
            raise ValueError(f"base_url must start with http:// or https://, got {base_url!r}")
        self.url = base_url.rstrip("/") + "/chat/completions"
        self.model, self.api_key, self.timeout_s, self.max_retries = model, api_key, timeout_s, max_retries

    def complete(
        self,
        messages: list[dict[str, Any]],
        *,
        temperature: float = 0.6,
        top_p: float = 0.95,
        max_tokens: int = 4096,
        tools: list[dict[str, Any]] | None = None,
    ) -> ChatResult:
        """One chat completion. Raises :class:`ChatError` once retries are exhausted.

        A context-length refusal that states the room left is retried once with ``max_tokens`` shrunk to that room
        (as BFCL's runner caps a call at ``min(max_tokens, context - prompt)``); any other refusal, or one with no
        room left, raises :class:`ChatRefused`.
        """
        body: dict[str, Any] = {"model": self.model, "messages": messages, "temperature": temperature,
                                "top_p": top_p, "max_tokens": max_tokens}  # fmt: skip
        if tools:
            body["tools"] = tools
        try:
            payload = self._post(body)
        except ChatRefused as exc:
            room = context_room(exc.detail)
            if room is None or not 0 < room < max_tokens:
                raise
            payload = self._post({**body, "max_tokens": room})
        try:
            choice = payload["choices"][0]
            message = choice["message"]
        except (KeyError, IndexError, TypeError) as exc:
            raise ChatError(f"{self.url} answered without choices[0].message: {str(payload)[:300]}") from exc
        calls = []
        for call in message.get("tool_calls") or []:
            fn = call.get("function", {})
            args = fn.get("arguments", {})
            if isinstance(args, str):
                try:
                    args = json.loads(args) if args.strip() else {}
                except json.JSONDecodeError:
                    args = {"__unparseable__": args}
            calls.append({"name": fn.get("name", ""), "arguments": args})
        return ChatResult(message.get("content") or "", calls, choice.get("finish_reason") or "")

    def _post(self, body: dict[str, Any]) -> dict[str, Any]:
        data = json.dumps(body).encode("utf-8")
        headers = {"Content-Type": "application/json"}
        if self.api_key:
            headers["Authorization"] = f"Bearer {self.api_key}"
        last: Exception | None = None
        for attempt in range(self.max_retries + 1):
            request = urllib.request.Request(self.url, data=data, headers=headers, method="POST")
            try:
                with urllib.request.urlopen(request, timeout=self.timeout_s) as response:
                    return json.loads(response.read().decode("utf-8"))
            except urllib.error.HTTPError as exc:
                with exc:  # the error holds the open response; close it either way
                    detail = exc.read().decode("utf-8", "replace")[:1000]
                last = ChatError(f"HTTP {exc.code}: {detail[:300]}")
                if exc.code != 429 and exc.code < 500:
                    message = f"{self.url} refused the request: HTTP {exc.code}: {detail[:300]}"
                    raise ChatRefused(message, exc.code, detail) from exc
            except (urllib.error.URLError, TimeoutError, ConnectionError, json.JSONDecodeError) as exc:
                last = exc
            if attempt < self.max_retries:
                time.sleep(min(8.0, 0.5 * 2**attempt))
        raise ChatError(f"{self.url} failed after {self.max_retries + 1} attempts: {last}")
