"""The in-process live store: the embedded default (single process) and the tests' reference store.

Same contract as the Redis store (rag_service.sessions.live_redis): TTL refreshed on use, a tombstone
after a delete (so writes still queued for the archive are dropped), a lock per session.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass, field
from typing import Literal

from rag_service.domain import Message, SessionMeta
from rag_service.sessions.interface import (
    DELETED,
    Probe,
    SessionBusy,
    SessionIncomplete,
    SessionNotFound,
    SummaryUpdate,
    acquire_within,
)

log = logging.getLogger(__name__)


@dataclass
class _Entry:
    meta: SessionMeta
    messages: list[Message] = field(default_factory=list)
    expires_at: float = 0.0


class MemoryStore:
    """In-process store for the embedded default and tests; same contract as the Redis store."""

    def __init__(self, ttl_s: int, lock_timeout_s: float, on_busy: str, tombstone_ttl_s: float = 86400.0) -> None:
        self.ttl_s, self.lock_timeout_s, self.on_busy = ttl_s, lock_timeout_s, on_busy
        self.tombstone_ttl_s = tombstone_ttl_s
        self._entries: dict[str, _Entry] = {}
        self._locks: dict[str, asyncio.Lock] = {}
        # Deleted ids (until expiry), so that writes still queued for the archive are dropped.
        self._deleted: dict[str, float] = {}
        self._next_sweep = time.monotonic() + 60.0

    def _get(self, session_id: str) -> _Entry:
        entry = self._entries.get(session_id)
        if entry is None or entry.expires_at < time.monotonic():
            self._entries.pop(session_id, None)
            raise SessionNotFound(session_id)
        if len(entry.messages) != entry.meta.message_count:
            raise SessionIncomplete(session_id)
        entry.expires_at = time.monotonic() + self.ttl_s
        return entry

    def _sweep(self) -> None:
        """Drops expired sessions, tombstones and idle locks (at most once a minute)."""
        now = time.monotonic()
        if now < self._next_sweep:
            return
        self._next_sweep = now + 60.0
        for sid in [k for k, e in self._entries.items() if e.expires_at < now]:
            del self._entries[sid]
        for sid in [k for k, t in self._deleted.items() if t < now]:
            del self._deleted[sid]
        for sid in [k for k, lock in self._locks.items() if k not in self._entries and not lock.locked()]:
            del self._locks[sid]

    async def create(self, meta: SessionMeta) -> None:
        self._sweep()
        self._deleted.pop(meta.session_id, None)
        fresh = SessionMeta(**meta.to_dict())
        fresh.message_count = 0
        self._entries[meta.session_id] = _Entry(fresh, [], time.monotonic() + self.ttl_s)

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
        if not summary_fits(update, entry.meta.message_count):
            return False
        entry.meta.summary, entry.meta.summary_tokens = update.summary, update.summary_tokens
        entry.meta.summarized = update.summarized
        entry.meta.summarized_source_tokens += update.source_tokens
        return True

    async def set_topic_start(self, session_id: str, index: int) -> None:
        entry = self._get(session_id)
        entry.meta.topic_start = max(0, min(index, entry.meta.message_count))

    async def set_task(self, session_id: str, task: str) -> None:
        self._get(session_id).meta.task = task

    async def messages(self, session_id: str) -> list[Message]:
        return list(self._get(session_id).messages)

    async def delete(self, session_id: str) -> bool:
        self._locks.pop(session_id, None)
        self._deleted[session_id] = time.monotonic() + self.tombstone_ttl_s
        entry = self._entries.pop(session_id, None)
        return entry is not None and entry.expires_at >= time.monotonic()

    # -- LiveStore ------------------------------------------------------------------------------

    async def restore(self, meta: SessionMeta, messages: Sequence[Message]) -> bool:
        if self._deleted.get(meta.session_id, 0.0) >= time.monotonic():
            raise SessionNotFound(meta.session_id)
        entry = self._entries.get(meta.session_id)
        if (
            entry is not None
            and entry.expires_at >= time.monotonic()
            and len(entry.messages) == entry.meta.message_count
        ):
            return False
        restored = SessionMeta(**meta.to_dict())
        restored.message_count = len(messages)
        self._entries[meta.session_id] = _Entry(restored, list(messages), time.monotonic() + self.ttl_s)
        return True

    async def evict(self, session_id: str) -> None:
        self._entries.pop(session_id, None)

    def clear(self) -> None:
        """Forgets every live session (what a restart of a live store server does)."""
        self._entries.clear()

    async def peek(self, session_ids: Sequence[str]) -> dict[str, SessionMeta | Literal["deleted"] | None]:
        now = time.monotonic()
        out: dict[str, SessionMeta | Literal["deleted"] | None] = {}
        for sid in session_ids:
            entry = self._entries.get(sid)
            if self._deleted.get(sid, 0.0) >= now:
                out[sid] = DELETED
            elif entry is not None and entry.expires_at >= now:
                out[sid] = SessionMeta(**entry.meta.to_dict())
            else:
                out[sid] = None
        return out

    async def peek_messages(self, session_id: str, start: int, stop: int) -> list[Message]:
        entry = self._entries.get(session_id)
        if entry is None or entry.expires_at < time.monotonic():
            return []
        return entry.messages[start:stop]

    def lock(self, session_id: str) -> AbstractAsyncContextManager[None]:
        return self._lock(session_id)

    @asynccontextmanager
    async def _lock(self, session_id: str) -> AsyncIterator[None]:
        lock = self._locks.setdefault(session_id, asyncio.Lock())
        if self.on_busy == "reject" and lock.locked():
            raise SessionBusy(session_id)
        await acquire_within(lock, self.lock_timeout_s, session_id)
        try:
            yield
        finally:
            lock.release()

    async def ping(self) -> None:
        return None

    def probes(self) -> list[Probe]:
        return [("store", self.ping)]

    async def start(self) -> None:
        return None

    async def close(self) -> None:
        return None


def summary_fits(update: SummaryUpdate, message_count: int) -> bool:
    """A summary folds stored messages only: `summarized <= message_count` holds in every store. A plan
    made over another list than the stored one (e.g. a client's own history) is refused here."""
    if update.expected_summarized <= update.summarized <= message_count:
        return True
    log.warning(
        "summary update refused: it folds up to message %d of a session holding %d",
        update.summarized,
        message_count,
    )
    return False
