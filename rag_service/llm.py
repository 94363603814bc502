"""Generators: an OpenAI-compatible endpoint (here), or the extractive answer when none is configured
(rag_service.extractive).

`ChatClient` is the thin client every LLM-using stage shares (answer, rewrite, summary); upstream
failures are retried with backoff (tenacity) and then raised as `UpstreamError`.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any, Protocol

import aiohttp
from tenacity import AsyncRetrying, retry_if_exception, stop_after_attempt, wait_exponential

from rag_core.settings import LLMEndpoint
from rag_service.domain import GenerationInput

ChatMessages = list[dict[str, Any]]


class UpstreamError(RuntimeError):
    """The LLM endpoint failed after retries."""


class _StatusError(Exception):
    def __init__(self, status: int) -> None:
        super().__init__(f"HTTP {status}")
        self.status = status


class _TruncatedStream(Exception):
    """The stream ended without `[DONE]` or a choice's `finish_reason`: the answer is not complete."""


# What a call can fail with (transport, timeout, HTTP status, a reply that is not JSON, a cut stream)
# before it is reported as an `UpstreamError`.
_FAILURES = (aiohttp.ClientError, TimeoutError, _StatusError, ValueError, _TruncatedStream)


def _check_status(resp: aiohttp.ClientResponse) -> None:
    if resp.status >= 400:
        raise _StatusError(resp.status)


def _retryable(exc: BaseException) -> bool:
    # As OpenAI's own SDKs: connection trouble, timeouts, rate limits and server errors are worth another
    # try; any other 4xx means the request itself is wrong.
    if isinstance(exc, _StatusError):
        return exc.status == 429 or exc.status >= 500
    return isinstance(exc, aiohttp.ClientError | TimeoutError | _TruncatedStream)


def _describe(exc: BaseException) -> str:
    if isinstance(exc, _StatusError):
        kind = str(exc)
    elif isinstance(exc, TimeoutError):
        kind = "timeout"
    elif isinstance(exc, aiohttp.ClientError):
        kind = f"connection error: {type(exc).__name__}"
    elif isinstance(exc, _TruncatedStream):
        kind = "the stream ended before the answer was complete"
    else:
        kind = type(exc).__name__
    return f"LLM upstream failed ({kind})"


@dataclass(frozen=True, slots=True)
class Generation:
    text: str
    mode: str


class ChatClient:
    """POSTs to `{base_url}/chat/completions` with aiohttp.

    Not the `openai` SDK: per call it deep-copies the request options and builds its request and response
    machinery on httpx, 2.4 ms a call against 1.0 ms for aiohttp on this machine (same body, same
    upstream), and a follow-up turn makes two or three calls. The protocol used here is small: a JSON body,
    a JSON reply, or server-sent `data:` events for a stream.
    """

    def __init__(self, endpoint: LLMEndpoint) -> None:
        if not endpoint.base_url:
            raise ValueError("an LLM endpoint needs a base_url")
        self.endpoint = endpoint
        self._url = endpoint.base_url.rstrip("/") + "/chat/completions"
        self._headers = {"Content-Type": "application/json", "Authorization": f"Bearer {endpoint.api_key}"}
        self._session: aiohttp.ClientSession | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    def _http(self) -> aiohttp.ClientSession:
        # Made on first use: a session belongs to the event loop it was created in, and the services may be
        # built in a worker thread or outlive one `asyncio.run` (the CLI).
        loop = asyncio.get_running_loop()
        if self._session is None or self._session.closed or self._loop is not loop:
            # trust_env: HTTP(S)_PROXY / NO_PROXY from the environment apply, as they did with the SDK.
            connector = aiohttp.TCPConnector(limit=self.endpoint.max_connections)
            self._session = aiohttp.ClientSession(headers=self._headers, connector=connector, trust_env=True)
            self._loop = loop
        return self._session

    def _retrying(self) -> AsyncRetrying:
        return AsyncRetrying(
            stop=stop_after_attempt(self.endpoint.max_retries + 1),
            wait=wait_exponential(multiplier=self.endpoint.retry_backoff_s, max=self.endpoint.retry_backoff_s * 8),
            retry=retry_if_exception(_retryable),
            reraise=True,
        )

    async def complete(
        self, messages: ChatMessages, *, max_tokens: int | None = None, timeout_s: float | None = None
    ) -> str:
        body = self._body(messages, max_tokens, stream=False)
        timeout = aiohttp.ClientTimeout(total=timeout_s or self.endpoint.timeout_s)
        try:
            async for attempt in self._retrying():
                with attempt:
                    async with self._http().post(self._url, data=body, timeout=timeout) as resp:
                        _check_status(resp)
                        data = await resp.json(content_type=None)
        except _FAILURES as exc:
            raise UpstreamError(_describe(exc)) from exc
        choices = (data.get("choices") or []) if isinstance(data, dict) else []
        return str((choices[0].get("message") or {}).get("content") or "") if choices else ""

    def _body(self, messages: ChatMessages, max_tokens: int | None, stream: bool) -> bytes:
        body = {
            "model": self.endpoint.model,
            "messages": messages,
            "temperature": self.endpoint.temperature,
            "max_tokens": max_tokens or self.endpoint.max_tokens,
            "stream": stream,
        }
        return json.dumps(body, ensure_ascii=False).encode()

    async def stream(self, messages: ChatMessages, *, max_tokens: int | None = None) -> AsyncIterator[str]:
        body = self._body(messages, max_tokens, stream=True)
        # Each read waits at most timeout_s; a long answer may take longer than that in all.
        timeout = aiohttp.ClientTimeout(
            total=None, sock_connect=self.endpoint.timeout_s, sock_read=self.endpoint.timeout_s
        )
        resp: aiohttp.ClientResponse | None = None
        try:
            # Retry only until the first piece arrives: after that the user has seen text.
            async for attempt in self._retrying():
                with attempt:
                    if resp is not None:
                        resp.release()
                    resp = await self._http().post(self._url, data=body, timeout=timeout)
                    _check_status(resp)
                    pieces = _sse_pieces(resp)
                    first = await anext(pieces, None)
            if first is None:
                return
            yield first
            async for piece in pieces:
                yield piece
        except _FAILURES as exc:
            raise UpstreamError(_describe(exc)) from exc
        finally:
            if resp is not None:
                resp.release()

    async def close(self) -> None:
        if self._session is not None and not self._session.closed:
            await self._session.close()


async def _sse_pieces(resp: aiohttp.ClientResponse) -> AsyncIterator[str]:
    """The text pieces of an OpenAI chat-completion stream (server-sent events, `data: {json}`).

    A complete stream ends with `[DONE]`, or at least has a choice with a `finish_reason`; one that just
    stops (an upstream or proxy cut mid-answer) raises `_TruncatedStream`, so that half an answer is never
    taken for a whole one.
    """
    data: list[str] = []
    finished = False
    async for raw in _lines_then_end(resp):
        line = raw.decode("utf-8").rstrip("\r\n")
        if line.startswith("data:"):
            data.append(line[5:].removeprefix(" "))
            continue
        if line or not data:
            continue  # comments, other fields, keep-alive blank lines
        payload, data = "\n".join(data), []
        if payload == "[DONE]":
            return
        event = json.loads(payload)
        if isinstance(event, dict) and event.get("error"):
            raise UpstreamError("LLM upstream failed (an error event in the stream)")
        choices = event.get("choices") or [] if isinstance(event, dict) else []
        if choices and choices[0].get("finish_reason"):
            finished = True
        content = (choices[0].get("delta") or {}).get("content") if choices else None
        if content:
            yield str(content)
    if not finished:
        raise _TruncatedStream()


async def _lines_then_end(resp: aiohttp.ClientResponse) -> AsyncIterator[bytes]:
    """The body's lines, then one blank line, so that a last event not followed by one still counts."""
    async for raw in resp.content:
        yield raw
    yield b""


class Generator(Protocol):
    mode: str

    async def complete(self, messages: ChatMessages, turn: GenerationInput) -> str: ...

    def stream(self, messages: ChatMessages, turn: GenerationInput) -> AsyncIterator[str]: ...


class LLMGenerator:
    mode = "llm"

    def __init__(self, client: ChatClient) -> None:
        self.client = client

    async def complete(self, messages: ChatMessages, turn: GenerationInput) -> str:
        return await self.client.complete(messages)

    def stream(self, messages: ChatMessages, turn: GenerationInput) -> AsyncIterator[str]:
        return self.client.stream(messages)
