"""Generators: an OpenAI-compatible endpoint, or an extractive answer when none is configured.

`ChatClient` is the thin client every LLM-using stage shares (answer, rewrite, summary); upstream
failures are retried with backoff (tenacity) and then raised as `UpstreamError`.
"""

from __future__ import annotations

import json
import math
import re
from collections import Counter
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import openai
from openai import AsyncOpenAI, AsyncStream
from openai.types.chat import ChatCompletionChunk
from tenacity import AsyncRetrying, retry_if_exception_type, stop_after_attempt, wait_exponential

from rag_service.domain import Chunk
from rag_service.lexical import terms
from rag_service.settings import LLMEndpoint

ChatMessages = list[dict[str, Any]]
_JSON = {"Content-Type": "application/json"}

_RETRYABLE = (openai.APIConnectionError, openai.APITimeoutError, openai.InternalServerError, openai.RateLimitError)
_SENTENCE_END = re.compile(r"(?<=[。！？；!?;])|(?<=[.])\s+|\n+")


class UpstreamError(RuntimeError):
    """The LLM endpoint failed after retries."""


@dataclass(frozen=True, slots=True)
class Generation:
    text: str
    mode: str


class ChatClient:
    def __init__(self, endpoint: LLMEndpoint) -> None:
        if not endpoint.base_url:
            raise ValueError("an LLM endpoint needs a base_url")
        self.endpoint = endpoint
        # Retries are ours (tenacity), so the SDK's own are off.
        self._client = AsyncOpenAI(
            base_url=endpoint.base_url, api_key=endpoint.api_key, timeout=endpoint.timeout_s, max_retries=0
        )

    def _retrying(self) -> AsyncRetrying:
        return AsyncRetrying(
            stop=stop_after_attempt(self.endpoint.max_retries + 1),
            wait=wait_exponential(multiplier=self.endpoint.retry_backoff_s, max=self.endpoint.retry_backoff_s * 8),
            retry=retry_if_exception_type(_RETRYABLE),
            reraise=True,
        )

    async def complete(
        self, messages: ChatMessages, *, max_tokens: int | None = None, timeout_s: float | None = None
    ) -> str:
        try:
            async for attempt in self._retrying():
                with attempt:
                    # cast_to=object: the client hands back the decoded JSON, no model building.
                    data = await self._client.post(
                        "/chat/completions",
                        content=self._body(messages, max_tokens, stream=False),
                        cast_to=object,
                        options={"timeout": timeout_s or self.endpoint.timeout_s, "headers": _JSON},
                    )
        except openai.OpenAIError as exc:
            raise UpstreamError(_describe(exc)) from exc
        choices = (data.get("choices") or []) if isinstance(data, dict) else []
        return str((choices[0].get("message") or {}).get("content") or "") if choices else ""

    def _body(self, messages: ChatMessages, max_tokens: int | None, stream: bool) -> bytes:
        # Sent as ready JSON through the client's generic `post`: `chat.completions.create` re-validates
        # and deep-copies the whole message list on every call (~5 ms a turn, measured with
        # bench/profile_turn.py), and these messages are built by this service, already in wire format.
        body = {
            "model": self.endpoint.model,
            "messages": messages,
            "temperature": self.endpoint.temperature,
            "max_tokens": max_tokens or self.endpoint.max_tokens,
            "stream": stream,
        }
        return json.dumps(body, ensure_ascii=False).encode()

    async def stream(self, messages: ChatMessages, *, max_tokens: int | None = None) -> AsyncIterator[str]:
        # Retry only until the first piece arrives: after that the user has seen text.
        try:
            async for attempt in self._retrying():
                with attempt:
                    stream = await self._client.post(
                        "/chat/completions",
                        content=self._body(messages, max_tokens, stream=True),
                        options={"headers": _JSON},
                        cast_to=ChatCompletionChunk,
                        stream=True,
                        stream_cls=AsyncStream[ChatCompletionChunk],
                    )
                    iterator: AsyncIterator[Any] = stream.__aiter__()
                    first = await _first_piece(iterator)
        except openai.OpenAIError as exc:
            raise UpstreamError(_describe(exc)) from exc
        if first is None:
            return
        yield first
        try:
            async for chunk in iterator:
                if chunk.choices and chunk.choices[0].delta.content:
                    yield chunk.choices[0].delta.content
        except openai.OpenAIError as exc:
            raise UpstreamError(_describe(exc)) from exc

    async def close(self) -> None:
        await self._client.close()


async def _first_piece(iterator: AsyncIterator[Any]) -> str | None:
    async for chunk in iterator:
        if chunk.choices and chunk.choices[0].delta.content:
            return str(chunk.choices[0].delta.content)
    return None


def _describe(exc: openai.OpenAIError) -> str:
    status = getattr(exc, "status_code", None)
    kind = type(exc).__name__
    return f"LLM upstream failed ({kind}{f', HTTP {status}' if status else ''})"


class Generator(Protocol):
    mode: str

    async def complete(self, messages: ChatMessages, question: str, chunks: Sequence[Chunk]) -> str: ...

    def stream(self, messages: ChatMessages, question: str, chunks: Sequence[Chunk]) -> AsyncIterator[str]: ...


class LLMGenerator:
    mode = "llm"

    def __init__(self, client: ChatClient) -> None:
        self.client = client

    async def complete(self, messages: ChatMessages, question: str, chunks: Sequence[Chunk]) -> str:
        return await self.client.complete(messages)

    def stream(self, messages: ChatMessages, question: str, chunks: Sequence[Chunk]) -> AsyncIterator[str]:
        return self.client.stream(messages)


class ExtractiveGenerator:
    """Answers with the retrieved sentences that best overlap the question, and says it is extractive."""

    mode = "extractive"

    def __init__(self, max_sentences: int, intro: str, empty: str) -> None:
        self.max_sentences, self.intro, self.empty = max_sentences, intro, empty

    async def complete(self, messages: ChatMessages, question: str, chunks: Sequence[Chunk]) -> str:
        return self._answer(question, chunks)

    async def stream(self, messages: ChatMessages, question: str, chunks: Sequence[Chunk]) -> AsyncIterator[str]:
        for line in self._answer(question, chunks).splitlines(keepends=True):
            yield line

    def _answer(self, question: str, chunks: Sequence[Chunk]) -> str:
        # Candidate sentences with their terms; words of a chunk's title say which document it is,
        # not what it answers, so they do not count.
        candidates: list[tuple[int, str, str, set[str]]] = []
        seen: set[str] = set()
        for rank, chunk in enumerate(chunks):
            title_terms = set(terms(chunk.title))
            for sentence in _SENTENCE_END.split(chunk.text):
                s = sentence.strip(" -*#\t")
                # Overlapping chunks repeat sentences: quote each once.
                if len(s) < 4 or s == chunk.title or s in seen:
                    continue
                seen.add(s)
                candidates.append((rank, s, chunk.title, set(terms(s)) - title_terms))
        if not candidates:
            return self.empty
        df: Counter[str] = Counter(t for c in candidates for t in c[3])
        n = len(candidates)
        q = set(terms(question))

        def score(c: tuple[int, str, str, set[str]]) -> float:
            rank, _, _, words = c
            # Rarer shared terms say more; better-ranked chunks carry retrieval's semantic signal.
            return sum(math.log(1 + n / df[t]) for t in q & words) / (1 + 0.15 * rank)

        best = sorted(candidates, key=lambda c: (score(c), -c[0]), reverse=True)[: self.max_sentences]
        lines = [f"- {s}（{title}）" for _, s, title, _ in best]
        return self.intro + "\n" + "\n".join(lines)
