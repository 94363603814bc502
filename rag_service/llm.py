"""Generators: an OpenAI-compatible endpoint (here), or the extractive answer when none is configured
(rag_service.extractive).

`ChatClient` is the thin client every LLM-using stage shares (answer, rewrite, summary), on the `openai`
SDK's `AsyncOpenAI`; upstream failures are retried with backoff (tenacity, the only retry layer: the SDK's
own retries are off) and then raised as `UpstreamError`. What the upstream says about a reply, its
`finish_reason` and token `usage`, travels with the text (`Completion`, and a stream's closing `Finish`).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any, Protocol

import httpx2
import openai
from openai import AsyncOpenAI, DefaultAioHttpClient, RequestOptions
from tenacity import AsyncRetrying, retry_if_exception, stop_after_attempt, wait_exponential

from rag_core.settings import LLMEndpoint
from rag_service.domain import GenerationInput

ChatMessages = list[dict[str, Any]]
_PATH = "/chat/completions"


class UpstreamError(RuntimeError):
    """The LLM endpoint failed after retries."""


class _TruncatedStream(Exception):
    """The stream ended without a `finish_reason` or a usage chunk: the answer is not complete."""


class _BadReply(Exception):
    """The upstream answered 200 with something that is not a chat completion."""


# What a call can fail with (transport, timeout, HTTP status, an error event in a stream, a reply that is
# not a completion, a cut stream) before it is reported as an `UpstreamError`.
_FAILURES = (openai.APIError, _BadReply, _TruncatedStream)


def _retryable(exc: BaseException) -> bool:
    # As OpenAI's own SDKs: connection trouble, timeouts, rate limits and server errors are worth another
    # try; any other 4xx means the request itself is wrong.
    if isinstance(exc, openai.APIStatusError):
        return exc.status_code == 429 or exc.status_code >= 500
    return isinstance(exc, openai.APIConnectionError | _TruncatedStream)


_RETRY = retry_if_exception(_retryable)


def _describe(exc: BaseException) -> str:
    if isinstance(exc, openai.APIStatusError):
        kind = f"HTTP {exc.status_code}"
    elif isinstance(exc, openai.APIConnectionError):
        # The aiohttp transport reports a refused or unreachable endpoint as a connect timeout; the socket
        # error it was raised from tells the two apart.
        refused = _socket_error(exc)
        if isinstance(exc, openai.APITimeoutError) and refused is None:
            kind = "timeout"
        else:
            kind = f"connection error: {type(refused or exc.__cause__ or exc).__name__}"
    elif isinstance(exc, _TruncatedStream):
        kind = "the stream ended before the answer was complete"
    elif isinstance(exc, _BadReply | openai.APIResponseValidationError):
        kind = "the reply is not a chat completion"
    else:  # an `error` object inside a stream
        kind = "an error event in the stream"
    return f"LLM upstream failed ({kind})"


def _socket_error(exc: BaseException) -> OSError | None:
    """The innermost OS error that is not a timeout (a refused connection, an unknown host) among the
    exceptions `exc` was raised from, if any."""
    found: OSError | None = None
    seen: set[int] = set()
    cause: BaseException | None = exc
    while cause is not None and id(cause) not in seen:
        seen.add(id(cause))
        if isinstance(cause, OSError) and not isinstance(cause, TimeoutError):
            found = cause
        cause = cause.__cause__ or cause.__context__
    return found


@dataclass(frozen=True, slots=True)
class Usage:
    prompt_tokens: int
    completion_tokens: int
    total_tokens: int

    def to_dict(self) -> dict[str, int]:
        return {
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
            "total_tokens": self.total_tokens,
        }


@dataclass(frozen=True, slots=True)
class Finish:
    """How a reply ended, as the upstream reported it (None where it reported nothing)."""

    finish_reason: str | None = None
    usage: Usage | None = None


@dataclass(frozen=True, slots=True)
class Completion:
    text: str
    finish: Finish


def _usage(raw: Any) -> Usage | None:
    if not isinstance(raw, dict):
        return None
    try:
        prompt, completion = int(raw["prompt_tokens"]), int(raw["completion_tokens"])
    except (KeyError, TypeError, ValueError):
        return None
    total = raw.get("total_tokens")
    return Usage(prompt, completion, int(total) if isinstance(total, int) else prompt + completion)


class ChatClient:
    """One `AsyncOpenAI` per endpoint, on an HTTP client (the SDK's aiohttp transport) with the endpoint's
    connection cap and timeouts.

    Requests go through the SDK's `post` (its transport, auth, error classes, SSE decoding and stream
    error events) with replies kept as the JSON the upstream sent (`cast_to=object`), not built into the
    typed models of `chat.completions.create`: building a pydantic model per streamed chunk cost 0.4-0.6 ms
    a chunk on this machine, 25 ms more for a 37-chunk answer than the aiohttp client this replaced, and
    the protocol read here is three fields (`bench/llm_client.py`). Proxies come from `HTTP(S)_PROXY` /
    `NO_PROXY` (the HTTP client's `trust_env`).
    """

    def __init__(self, endpoint: LLMEndpoint) -> None:
        if not endpoint.base_url:
            raise ValueError("an LLM endpoint needs a base_url")
        self.endpoint = endpoint
        self._api: AsyncOpenAI | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._url = _PATH
        # The retry policy's parts hold no state (a call's attempts live in its own `AsyncRetrying`).
        self._stop = stop_after_attempt(endpoint.max_retries + 1)
        self._wait = wait_exponential(multiplier=endpoint.retry_backoff_s, max=endpoint.retry_backoff_s * 8)
        # The CA bundle, loaded once per client (0.1-0.3 s of CPU) when it is made, not by each HTTP client
        # made per event loop inside a call: a summary's whole call must fit its timeout (seconds or less),
        # and the first one of a process otherwise spent much of it here.
        self._tls = httpx2.create_ssl_context(trust_env=True)

    def _client(self) -> AsyncOpenAI:
        # Made on first use: pooled connections belong to the event loop they were opened in, and the
        # services may be built in a worker thread or outlive one `asyncio.run` (the CLI).
        loop = asyncio.get_running_loop()
        if self._api is None or self._loop is not loop:
            e = self.endpoint
            # The SDK's aiohttp transport: per call about 0.3 ms less CPU than its default httpx2 one
            # (bench/llm_client.py), two or three calls a turn (answer, rewrite, summary).
            http = DefaultAioHttpClient(
                limits=httpx2.Limits(max_connections=e.max_connections, max_keepalive_connections=e.max_connections),
                timeout=e.timeout_s,
                verify=self._tls,
                trust_env=True,
            )
            self._api = AsyncOpenAI(
                base_url=e.base_url, api_key=e.api_key, max_retries=0, timeout=e.timeout_s, http_client=http
            )
            # The SDK's own join of its base URL and the path, made once: an absolute URL is taken as it is,
            # where a path is parsed and joined to the base URL again on every request (~40 µs a call).
            self._url = str(self._api._prepare_url(_PATH))
            self._loop = loop
        return self._api

    def _retrying(self) -> AsyncRetrying:
        return AsyncRetrying(stop=self._stop, wait=self._wait, retry=_RETRY, reraise=True)

    def _body(self, messages: ChatMessages, max_tokens: int | None, stream: bool) -> dict[str, Any]:
        body: dict[str, Any] = {
            "model": self.endpoint.model,
            "messages": messages,
            "temperature": self.endpoint.temperature,
            "max_tokens": max_tokens or self.endpoint.max_tokens,
            "stream": stream,
        }
        if stream:
            # A last chunk then carries the token usage (OpenAI, vLLM, Ollama, SiliconFlow send it).
            body["stream_options"] = {"include_usage": True}
        return body

    async def completion(
        self, messages: ChatMessages, *, max_tokens: int | None = None, timeout_s: float | None = None
    ) -> Completion:
        body = self._body(messages, max_tokens, stream=False)
        options: RequestOptions = {"timeout": timeout_s or self.endpoint.timeout_s}
        try:
            async for attempt in self._retrying():
                with attempt:
                    api = self._client()  # sets `_url` for the loop's client
                    reply = await api.post(self._url, cast_to=object, body=body, options=options)
                    if not isinstance(reply, dict):
                        raise _BadReply()
                    data: dict[str, Any] = reply
        except _FAILURES as exc:
            raise UpstreamError(_describe(exc)) from exc
        choice = _first_choice(data)
        message = choice.get("message") or {}
        text = str(message.get("content") or "") if isinstance(message, dict) else ""
        return Completion(text, Finish(_reason(choice), _usage(data.get("usage"))))

    async def complete(
        self, messages: ChatMessages, *, max_tokens: int | None = None, timeout_s: float | None = None
    ) -> str:
        return (await self.completion(messages, max_tokens=max_tokens, timeout_s=timeout_s)).text

    async def stream(self, messages: ChatMessages, *, max_tokens: int | None = None) -> AsyncIterator[str | Finish]:
        """The answer's text pieces, then one `Finish`."""
        body = self._body(messages, max_tokens, stream=True)
        # Each read waits at most timeout_s (the client's timeout); a long answer may take longer in all.
        opened: openai.AsyncStream[object] | None = None
        try:
            # Retry only until the first piece arrives: after that the user has seen text.
            async for attempt in self._retrying():
                with attempt:
                    if opened is not None:
                        await opened.close()
                    api = self._client()
                    opened = await api.post(
                        self._url, cast_to=object, body=body, stream=True, stream_cls=openai.AsyncStream[object]
                    )
                    items = _stream_items(opened)
                    first = await anext(items)
            yield first
            async for item in items:
                yield item
        except _FAILURES as exc:
            raise UpstreamError(_describe(exc)) from exc
        finally:
            if opened is not None:
                await opened.close()

    async def close(self) -> None:
        if self._api is not None and self._loop is asyncio.get_running_loop():
            await self._api.close()
        self._api = None


def _first_choice(event: dict[str, Any]) -> dict[str, Any]:
    choices = event.get("choices")
    first = choices[0] if isinstance(choices, list) and choices else None
    return first if isinstance(first, dict) else {}


def _reason(choice: dict[str, Any]) -> str | None:
    reason = choice.get("finish_reason")
    return str(reason) if reason else None


async def _stream_items(chunks: openai.AsyncStream[object]) -> AsyncIterator[str | Finish]:
    """Text pieces, then the `Finish` made of the choice's `finish_reason` and the usage chunk.

    The SDK ends quietly when the body ends, with or without `[DONE]`; a complete answer has a
    `finish_reason` (every OpenAI-compatible server sends one) or the usage chunk that comes after it, so
    a stream with neither was cut (an upstream or proxy gone mid-answer) and raises `_TruncatedStream`:
    half an answer is never taken for a whole one.
    """
    reason: str | None = None
    usage: Usage | None = None
    async for chunk in chunks:
        if not isinstance(chunk, dict):
            raise _BadReply()
        if chunk.get("usage"):
            usage = _usage(chunk["usage"])
        choice = _first_choice(chunk)
        reason = _reason(choice) or reason
        delta = choice.get("delta")
        content = delta.get("content") if isinstance(delta, dict) else None
        if content:
            yield str(content)
    if reason is None and usage is None:
        raise _TruncatedStream()
    yield Finish(reason, usage)


class Generator(Protocol):
    mode: str

    async def complete(self, messages: ChatMessages, turn: GenerationInput) -> str | Completion: ...

    def stream(self, messages: ChatMessages, turn: GenerationInput) -> AsyncIterator[str | Finish]: ...


class LLMGenerator:
    mode = "llm"

    def __init__(self, client: ChatClient) -> None:
        self.client = client

    async def complete(self, messages: ChatMessages, turn: GenerationInput) -> Completion:
        return await self.client.completion(messages)

    def stream(self, messages: ChatMessages, turn: GenerationInput) -> AsyncIterator[str | Finish]:
        return self.client.stream(messages)
