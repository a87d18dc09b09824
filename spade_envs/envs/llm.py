"""A minimal client for any OpenAI-compatible chat endpoint (vLLM, SGLang, hosted APIs), on the stdlib only.

Used by the ``spade-envs run`` and ``generate`` commands to let an external model design or play environments
without GPU training, and by ``spade-eval``. Retries transient failures (connection errors, 408, 429, 5xx) with
exponential backoff, or after the wait a ``Retry-After`` header asks for (capped). What no retry can fix is raised at
once, typed by what the caller should do: :class:`ChatMisconfigured` (401/403/404/405: every request will fail the
same way; stop), or :class:`ChatRefused` (any other 4xx: this request; ``over_context`` says whether it is a prompt
over the context length, which no rerun changes).
"""

from __future__ import annotations

import email.utils
import json
import re
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from typing import Any

from spade_envs.envs.errors import SpadeEnvError

__all__ = ["ChatClient", "ChatError", "ChatMisconfigured", "ChatRefused", "ChatResult", "context_room",
           "is_context_refusal"]  # fmt: skip

#: vLLM's (and OpenAI's) context-length refusals: the window, and the prompt's tokens in one of two wordings.
_CONTEXT = re.compile(r"maximum context length is (\d+)")
_PROMPT = re.compile(r"(\d+) in the messages|request has (\d+) input tokens|(\d+) input tokens")
#: How servers word a prompt (plus ``max_tokens``) over the context window: vLLM's two wordings, OpenAI's error
#: code, SGLang's, and Anthropic's OpenAI-compatible endpoint.
_OVER_CONTEXT = re.compile(r"maximum context length|maximum model length|context_length_exceeded|"
                           r"model's context length|prompt is too long", re.IGNORECASE)  # fmt: skip
#: Statuses a retry can fix: a proxy's request timeout, rate limits, and every 5xx.
_TRANSIENT = frozenset({408, 429})
#: Statuses that say every request to this endpoint will fail the same way, with what to check.
_MISCONFIGURED = {
    401: "the API key was rejected",
    403: "the API key has no access to this model or endpoint",
    404: "no such path or model: check the base URL (it usually ends in /v1) and the model name",
    405: "the URL does not serve chat completions: check the base URL (it usually ends in /v1)",
}


def is_context_refusal(status: int, detail: str) -> bool:
    """Whether an HTTP error is a 400 saying that the prompt plus ``max_tokens`` exceed the served window."""
    return status == 400 and _OVER_CONTEXT.search(detail) is not None


class ChatError(SpadeEnvError):
    """The endpoint failed or answered something that is not a chat completion."""


class ChatRefused(ChatError):
    """The endpoint refused this request (an HTTP 4xx other than 408 and 429): retrying it cannot succeed.

    ``over_context`` is true for a context-length 400 (the prompt plus ``max_tokens`` exceed the served window):
    the one refusal that is about the request's length, so the same on every rerun. Any other refusal (a content
    filter, a malformed body, 413, 422) may be the server's or a proxy's doing.
    """

    def __init__(self, message: str, status: int, detail: str) -> None:
        super().__init__(message)
        self.status, self.detail = status, detail

    @property
    def over_context(self) -> bool:
        """Whether this is a context-length refusal (:func:`is_context_refusal`)."""
        return is_context_refusal(self.status, self.detail)


class ChatMisconfigured(ChatRefused):
    """HTTP 401, 403, 404 or 405: a wrong key, URL or model name, so every request will be refused the same way."""


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
    """``POST {base_url}/chat/completions`` with retries; ``base_url`` usually ends in ``/v1``.

    A transient failure is retried up to ``max_retries`` times, after 0.5, 1, 2, ... s (at most 8), or after what
    the response's ``Retry-After`` header asks for (seconds or an HTTP date), at most ``max_retry_wait_s``.
    """

    def __init__(
        self,
        base_url: str,
        model: str,
        api_key: str | None = None,
        timeout_s: float = 600.0,
        max_retries: int = 3,
        max_retry_wait_s: float = 60.0,
    ) -> None:
        if not base_url.startswith(("http://", "https://")):
            raise ValueError(f"base_url must start with http:// or https://, got {base_url!r}")
        if max_retry_wait_s < 0:
            raise ValueError(f"max_retry_wait_s must be >= 0, got {max_retry_wait_s}")
        self.url = base_url.rstrip("/") + "/chat/completions"
        self.model, self.api_key, self.timeout_s, self.max_retries = model, api_key, timeout_s, max_retries
        self.max_retry_wait_s = max_retry_wait_s

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
        room left, raises :class:`ChatRefused` (:class:`ChatMisconfigured` for a wrong key, URL or model).
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
            wait = min(8.0, 0.5 * 2**attempt)
            try:
                with urllib.request.urlopen(request, timeout=self.timeout_s) as response:
                    return json.loads(response.read().decode("utf-8"))
            except urllib.error.HTTPError as exc:
                with exc:  # the error holds the open response; close it either way
                    detail = exc.read().decode("utf-8", "replace")[:1000]
                last = ChatError(f"HTTP {exc.code}: {detail[:300]}")
                if exc.code not in _TRANSIENT and exc.code < 500:
                    if exc.code in _MISCONFIGURED:
                        message = f"HTTP {exc.code}: {_MISCONFIGURED[exc.code]}. {self.url} said: {detail[:300]}"
                        raise ChatMisconfigured(message, exc.code, detail) from exc
                    message = f"{self.url} refused the request: HTTP {exc.code}: {detail[:300]}"
                    raise ChatRefused(message, exc.code, detail) from exc
                asked = _retry_after(exc.headers.get("Retry-After") if exc.headers else None)
                wait = wait if asked is None else min(asked, self.max_retry_wait_s)
            except (urllib.error.URLError, TimeoutError, ConnectionError, json.JSONDecodeError) as exc:
                last = exc
            if attempt < self.max_retries:
                time.sleep(wait)
        raise ChatError(f"{self.url} failed after {self.max_retries + 1} attempts: {last}")


def _retry_after(value: str | None) -> float | None:
    """Seconds a ``Retry-After`` header asks to wait (seconds or an HTTP date); ``None`` if absent or unreadable."""
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - time.time())
