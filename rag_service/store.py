"""Session stores: one interface; an in-process store is the embedded default.

Every store keeps all messages of a session (the memory strategy only chooses what to send), the
running summary and metadata, with a TTL refreshed on every turn, and serialises the turns of one
session with a per-session lock.

Composition: a live store (`MemoryStore`, or `RedisStore` in rag_service.store_redis) holds the sessions
in use; `ArchivedStore` puts it in front of the SQL archive (rag_service.archive), writes every change
behind it (batched, idempotent, retried) and restores sessions that expired from the live store.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import secrets
import time
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal, Protocol

from rag_service.domain import Message, SessionMeta

if TYPE_CHECKING:
    from rag_service.privacy import Masker

log = logging.getLogger(__name__)

DELETED: Literal["deleted"] = "deleted"


class SessionNotFound(KeyError):
    pass


class SessionIncomplete(SessionNotFound):
    """The live store holds the session's metadata but not all of its messages (e.g. a Redis eviction)."""


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


async def acquire_within(lock: asyncio.Lock, timeout: float, session_id: str) -> None:
    """lock.acquire() within `timeout`, else SessionBusy; never leaves the lock held on a timeout that
    races the acquisition (which `wait_for` can do on Python 3.11)."""
    acquired = False
    try:
        async with asyncio.timeout(timeout):
            await lock.acquire()
            acquired = True
    except TimeoutError as exc:
        if acquired:
            lock.release()
        raise SessionBusy(session_id) from exc


class LiveStore(SessionStore, Protocol):
    """A session store that can sit in front of the archive."""

    async def restore(self, meta: SessionMeta, messages: Sequence[Message]) -> bool:
        """Puts a session back (TTL fresh) unless the store holds it complete (someone restored it
        first); True if it was written. Replaces an incomplete copy (SessionIncomplete). Raises
        SessionNotFound if the session was deleted recently (a restore racing a delete)."""
        ...

    async def peek(self, session_ids: Sequence[str]) -> dict[str, SessionMeta | Literal["deleted"] | None]:
        """Current meta of each session, DELETED if it was deleted recently, None if absent; no TTL refresh."""
        ...

    async def peek_messages(self, session_id: str, start: int, stop: int) -> list[Message]:
        """messages[start:stop] without refreshing the TTL (empty if the session is absent)."""
        ...


@dataclass(frozen=True, slots=True)
class ArchiveWrite:
    """What the write-behind sends to the archive for one session: its meta (when known) and messages by seq."""

    session_id: str
    meta: SessionMeta | None
    messages: tuple[tuple[int, Message], ...] = ()


class SessionArchive(Protocol):
    """The durable side (rag_service.archive.Archive implements it)."""

    async def write_batch(self, writes: Sequence[ArchiveWrite]) -> None:
        """Idempotent: upserts each meta, inserts the messages whose seq is not stored yet."""
        ...

    async def max_seqs(self, session_ids: Sequence[str]) -> dict[str, int]:
        """The highest stored seq of each session (absent: nothing stored)."""
        ...

    async def load(self, session_id: str) -> tuple[SessionMeta, list[Message]] | None: ...

    async def delete(self, session_id: str) -> bool: ...

    async def ping(self) -> None: ...

    async def close(self) -> None: ...


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

    async def close(self) -> None:
        return None


@dataclass
class _Pending:
    """Changes of one session not yet in the archive."""

    # The meta known at creation, written when the live store no longer has the session at flush time.
    created: SessionMeta | None = None
    messages: dict[int, Message] = field(default_factory=dict)

    def absorb(self, newer: _Pending) -> None:
        self.created = newer.created or self.created
        self.messages.update(newer.messages)


class ArchivedStore:
    """A live store in front of the SQL archive.

    Every change goes to the live store first (the turn waits for nothing else) and is queued for the
    archive; a background task writes the queue in batches (idempotent: messages are keyed by
    (session_id, seq), metas are upserted), retrying with back-off while the archive is unavailable.
    A session missing from the live store (expired, evicted, Redis flushed) is restored from the
    archive on its next use. Message content and summaries are masked (PII) before either store sees them.
    """

    def __init__(
        self,
        live: LiveStore,
        archive: SessionArchive,
        *,
        masker: Masker | None = None,
        count_tokens: Callable[[str], int] | None = None,
        flush_interval_s: float = 0.2,
        retry_max_s: float = 30.0,
    ) -> None:
        self.live, self.archive, self.masker, self.count_tokens = live, archive, masker, count_tokens
        self.flush_interval_s, self.retry_max_s = flush_interval_s, retry_max_s
        self._pending: dict[str, _Pending] = {}
        self._inflight: dict[str, _Pending] = {}
        self._flush_lock = asyncio.Lock()
        self._task: asyncio.Task[None] | None = None
        self._failures = 0
        self._closing = False
        self.restored = 0  # sessions restored from the archive (metrics, tests)

    # -- SessionStore ---------------------------------------------------------------------------

    async def create(self, meta: SessionMeta) -> None:
        await self.live.create(meta)
        self._queue(meta.session_id).created = SessionMeta(**meta.to_dict())
        self._kick()

    async def load(
        self, session_id: str, start_of: Callable[[SessionMeta], int]
    ) -> tuple[SessionMeta, list[Message], int]:
        try:
            return await self.live.load(session_id, start_of)
        except SessionNotFound as exc:
            await self._restore(session_id, exc)
        return await self.live.load(session_id, start_of)

    async def append(self, session_id: str, messages: Sequence[Message]) -> int:
        masked = [self._mask_message(m) for m in messages]
        try:
            count = await self.live.append(session_id, masked)
        except SessionNotFound as exc:
            await self._restore(session_id, exc)
            count = await self.live.append(session_id, masked)
        pending = self._queue(session_id)
        for i, m in enumerate(masked):
            pending.messages[count - len(masked) + i] = m
        self._kick()
        return count

    async def update_summary(self, session_id: str, update: SummaryUpdate) -> bool:
        if self.masker is not None:
            summary = self.masker.mask(update.summary)
            if summary != update.summary:
                update = dataclasses.replace(
                    update,
                    summary=summary,
                    summary_tokens=self._recount(update.summary, summary, update.summary_tokens),
                )
        try:
            applied = await self.live.update_summary(session_id, update)
        except SessionNotFound as exc:
            await self._restore(session_id, exc)
            applied = await self.live.update_summary(session_id, update)
        if applied:
            self._queue(session_id)
            self._kick()
        return applied

    async def set_topic_start(self, session_id: str, index: int) -> None:
        try:
            await self.live.set_topic_start(session_id, index)
        except SessionNotFound as exc:
            await self._restore(session_id, exc)
            await self.live.set_topic_start(session_id, index)
        self._queue(session_id)
        self._kick()

    async def messages(self, session_id: str) -> list[Message]:
        try:
            return await self.live.messages(session_id)
        except SessionNotFound as exc:
            await self._restore(session_id, exc)
        return await self.live.messages(session_id)

    async def delete(self, session_id: str) -> bool:
        """Removes the session from the live store and the archive. Waits for a turn in progress (its
        writes must not outlive the delete); the live store leaves a tombstone so that writes other
        processes still have queued are dropped."""
        async with self.live.lock(session_id):
            live = await self.live.delete(session_id)
            self._pending.pop(session_id, None)
            async with self._flush_lock:  # a batch in flight may hold this session
                self._pending.pop(session_id, None)
                archived = await self.archive.delete(session_id)
        return live or archived

    def lock(self, session_id: str) -> AbstractAsyncContextManager[None]:
        return self.live.lock(session_id)

    async def ping(self) -> None:
        await self.live.ping()
        await self.archive.ping()

    async def close(self) -> None:
        """Writes what is still queued (a few attempts), then closes both stores."""
        self._closing = True  # the flusher stops even if a client library swallows the cancel
        if self._task is not None and not self._task.done():
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
        for attempt in range(3):
            try:
                await self.flush()
                break
            except Exception as exc:
                log.error("archive write-behind: flush at close failed (attempt %d): %s", attempt + 1, exc)
                await asyncio.sleep(0.2 * (attempt + 1))
        if self._pending:
            log.error("archive write-behind: %d sessions not archived at close", len(self._pending))
        await self.live.close()
        await self.archive.close()

    # -- write-behind ---------------------------------------------------------------------------

    @property
    def pending(self) -> int:
        """Sessions with changes not yet in the archive (queued or being written)."""
        return len(self._pending.keys() | self._inflight.keys())

    async def flush(self) -> None:
        """Writes everything queued so far; raises if the archive fails (the queue is kept)."""
        while self._pending:
            await self._flush_once()

    def _queue(self, session_id: str) -> _Pending:
        pending = self._pending.get(session_id)
        if pending is None:
            pending = self._pending[session_id] = _Pending()
        return pending

    def _kick(self) -> None:
        if self._closing:
            return
        if self._task is None or self._task.done():
            self._task = asyncio.get_running_loop().create_task(self._run())

    async def _run(self) -> None:
        delay = self.flush_interval_s
        while self._pending and not self._closing:
            await asyncio.sleep(delay)
            if self._closing:
                return
            try:
                await self._flush_once()
                self._failures, delay = 0, self.flush_interval_s
            except Exception as exc:
                self._failures += 1
                delay = min(self.retry_max_s, self.flush_interval_s * 2**self._failures)
                log.warning(
                    "archive write-behind failed (%d sessions queued, retry in %.1fs): %s",
                    len(self._pending),
                    delay,
                    exc,
                )

    async def _flush_once(self) -> None:
        async with self._flush_lock:
            if not self._pending:
                return
            batch, self._pending = self._pending, {}
            self._inflight = batch
            try:
                await self._write(batch)
            except BaseException:
                for sid, queued in batch.items():
                    newer = self._pending.get(sid)
                    if newer is not None:
                        queued.absorb(newer)
                    self._pending[sid] = queued
                raise
            finally:
                self._inflight = {}

    async def _write(self, batch: dict[str, _Pending]) -> None:
        sids = list(batch)
        states = await self.live.peek(sids)
        sids = [sid for sid in sids if states.get(sid) != DELETED]
        stored = await self.archive.max_seqs([sid for sid in sids if batch[sid].messages])
        writes: list[ArchiveWrite] = []
        for sid in sids:
            queued, state = batch[sid], states.get(sid)
            meta = state if isinstance(state, SessionMeta) else queued.created
            messages = dict(queued.messages)
            if messages:
                # A gap (writes lost with a crashed process) is filled from the live store when it still has them.
                have, first = stored.get(sid, -1), min(messages)
                if first > have + 1:
                    for i, m in enumerate(await self.live.peek_messages(sid, have + 1, first)):
                        messages.setdefault(have + 1 + i, m)
            writes.append(ArchiveWrite(sid, meta, tuple(sorted(messages.items(), key=lambda kv: kv[0]))))
        if writes:
            await self.archive.write_batch(writes)
            # A session deleted by another process while this batch was being written: delete it again.
            after = await self.live.peek([w.session_id for w in writes])
            for sid, state in after.items():
                if state == DELETED:
                    await self.archive.delete(sid)

    # -- restore --------------------------------------------------------------------------------

    async def _restore(self, session_id: str, cause: SessionNotFound) -> None:
        """Puts the archived session back into the live store, or raises SessionNotFound."""
        if session_id in self._pending:
            # The archive must hold everything the live store had before it is copied back.
            await self.flush()
        found = await self.archive.load(session_id)
        if found is None:
            raise SessionNotFound(session_id) from cause
        meta, messages = found
        if await self.live.restore(meta, messages):
            self.restored += 1
            log.info("session restored from the archive (%d messages)", len(messages))

    # -- masking --------------------------------------------------------------------------------

    def _mask_message(self, message: Message) -> Message:
        if self.masker is None:
            return message
        content = self.masker.mask(message.content)
        if content == message.content:
            return message
        tokens = self._recount(message.content, content, message.tokens)
        return Message(message.role, content, tokens, message.created_at)

    def _recount(self, before: str, after: str, tokens: int) -> int:
        if self.count_tokens is None:
            return tokens
        return max(0, tokens + self.count_tokens(after) - self.count_tokens(before))
