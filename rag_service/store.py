"""Session stores: one interface; an in-process store is the embedded default.

Every store keeps all messages of a session (the memory strategy only chooses what to send), the
running summary and metadata, with a TTL refreshed on every turn, and serialises the turns of one
session with a per-session lock.
"""

from __future__ import annotations

import asyncio
import secrets
import time
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass, field
from typing import Protocol

from rag_service.domain import Message, SessionMeta


class SessionNotFound(KeyError):
    pass


class SessionBusy(RuntimeError):
    pass


def new_session_id(random_bytes: int, tenant: str = "", user: str = "") -> str:
    token = secrets.token_urlsafe(random_bytes)
    prefix = "".join(f"{p}:" for p in (tenant, user) if p)
    return prefix + token


@dataclass(frozen=True, slots=True)
class SummaryUpdate:
    expected_summarized: int
    summary: str
    summary_tokens: int
    summarized: int
    source_tokens: int


class SessionStore(Protocol):
    async def create(self, meta: SessionMeta) -> None: ...

    async def load(
        self, session_id: str, start_of: Callable[[SessionMeta], int]
    ) -> tuple[SessionMeta, list[Message], int]:
        """Meta, the messages from `start_of(meta)` on, and that start index; refreshes the TTL."""
        ...

    async def append(self, session_id: str, messages: Sequence[Message]) -> int: ...

    async def update_summary(self, session_id: str, update: SummaryUpdate) -> bool:
        """Applies only if nobody compressed since `expected_summarized` was read."""
        ...

    async def set_topic_start(self, session_id: str, index: int) -> None: ...

    async def messages(self, session_id: str) -> list[Message]: ...

    async def delete(self, session_id: str) -> bool: ...

    def lock(self, session_id: str) -> AbstractAsyncContextManager[None]: ...

    async def ping(self) -> None: ...

    async def close(self) -> None: ...


@dataclass
class _Entry:
    meta: SessionMeta
    messages: list[Message] = field(default_factory=list)
    expires_at: float = 0.0


class MemoryStore:
    """In-process store for the embedded default and tests; same contract as the Redis store."""

    def __init__(self, ttl_s: int, lock_timeout_s: float, on_busy: str) -> None:
        self.ttl_s, self.lock_timeout_s, self.on_busy = ttl_s, lock_timeout_s, on_busy
        self._entries: dict[str, _Entry] = {}
        self._locks: dict[str, asyncio.Lock] = {}

    def _get(self, session_id: str) -> _Entry:
        entry = self._entries.get(session_id)
        if entry is None or entry.expires_at < time.monotonic():
            self._entries.pop(session_id, None)
            raise SessionNotFound(session_id)
        entry.expires_at = time.monotonic() + self.ttl_s
        return entry

    async def create(self, meta: SessionMeta) -> None:
        self._entries[meta.session_id] = _Entry(meta, [], time.monotonic() + self.ttl_s)

    async def load(
        self, session_id: str, start_of: Callable[[SessionMeta], int]
    ) -> tuple[SessionMeta, list[Message], int]:
        entry = self._get(session_id)
        start = start_of(entry.meta)
        return SessionMeta(**entry.meta.to_dict()), entry.messages[start:], start

    async def append(self, session_id: str, messages: Sequence[Message]) -> int:
        entry = self._get(session_id)
        entry.messages.extend(messages)
        entry.meta.message_count = len(entry.messages)
        return entry.meta.message_count

    async def update_summary(self, session_id: str, update: SummaryUpdate) -> bool:
        entry = self._get(session_id)
        if entry.meta.summarized != update.expected_summarized:
            return False
        entry.meta.summary, entry.meta.summary_tokens = update.summary, update.summary_tokens
        entry.meta.summarized = update.summarized
        entry.meta.summarized_source_tokens += update.source_tokens
        return True

    async def set_topic_start(self, session_id: str, index: int) -> None:
        self._get(session_id).meta.topic_start = index

    async def messages(self, session_id: str) -> list[Message]:
        return list(self._get(session_id).messages)

    async def delete(self, session_id: str) -> bool:
        self._locks.pop(session_id, None)
        return self._entries.pop(session_id, None) is not None

    def lock(self, session_id: str) -> AbstractAsyncContextManager[None]:
        return self._lock(session_id)

    @asynccontextmanager
    async def _lock(self, session_id: str) -> AsyncIterator[None]:
        lock = self._locks.setdefault(session_id, asyncio.Lock())
        if self.on_busy == "reject" and lock.locked():
            raise SessionBusy(session_id)
        try:
            await asyncio.wait_for(lock.acquire(), self.lock_timeout_s)
        except TimeoutError as exc:
            raise SessionBusy(session_id) from exc
        try:
            yield
        finally:
            lock.release()

    async def ping(self) -> None:
        return None

    async def close(self) -> None:
        return None
