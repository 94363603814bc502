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
import functools
import logging
import secrets
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, ParamSpec, Protocol, TypeVar, runtime_checkable

from rag_service.domain import Message, SessionMeta

if TYPE_CHECKING:
    from rag_service.privacy import Masker
    from rag_service.spool import Spool

log = logging.getLogger(__name__)

DELETED: Literal["deleted"] = "deleted"


class SessionNotFound(KeyError):
    pass


class SessionIncomplete(SessionNotFound):
    """The live store holds the session's metadata but not all of its messages (e.g. a Redis eviction)."""


@runtime_checkable
class SessionCatalog(Protocol):
    """A store that can list a tenant's sessions (the archived store; a bare live store cannot)."""

    async def list_sessions(self, tenant: str, limit: int, offset: int) -> list[dict[str, Any]]: ...


class SessionBusy(RuntimeError):
    pass


class StoreUnavailable(RuntimeError):
    """A part that holds sessions cannot be reached: `part` is "store" (the live store) or "archive"."""

    def __init__(self, part: str, detail: str) -> None:
        super().__init__(f"the {'session store' if part == 'store' else 'archive'} is unavailable: {detail}")
        self.part = part


_P = ParamSpec("_P")
_R = TypeVar("_R")


def outage_as_unavailable(
    part: str, errors: tuple[type[BaseException], ...]
) -> Callable[[Callable[_P, Awaitable[_R]]], Callable[_P, Coroutine[Any, Any, _R]]]:
    """Decorator: `errors` (a client library's connection failures) leave the method as StoreUnavailable."""

    def wrap(fn: Callable[_P, Awaitable[_R]]) -> Callable[_P, Coroutine[Any, Any, _R]]:
        @functools.wraps(fn)
        async def call(*args: _P.args, **kwargs: _P.kwargs) -> _R:
            try:
                return await fn(*args, **kwargs)
            except errors as exc:
                raise StoreUnavailable(part, f"{type(exc).__name__}: {exc}"[:300]) from exc

        return call

    return wrap


Probe = tuple[str, Callable[[], Awaitable[None]]]


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

    async def set_task(self, session_id: str, task: str) -> None:
        """Stores the session's task state (JSON, rag_service.intents)."""
        ...

    async def messages(self, session_id: str) -> list[Message]: ...

    async def delete(self, session_id: str) -> bool: ...

    def lock(self, session_id: str) -> AbstractAsyncContextManager[None]:
        """Serialises the turns of a session; released on every exit (error, cancellation)."""
        ...

    async def ping(self) -> None: ...

    def probes(self) -> list[Probe]:
        """Readiness checks by part ("store", "archive"), so /readyz can say which one is down."""
        ...

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

    async def evict(self, session_id: str) -> None:
        """Drops the live copy (no tombstone): the next use restores the session from the archive."""
        ...


@dataclass(frozen=True, slots=True)
class ArchiveWrite:
    """What the write-behind sends to the archive for one session: its meta (when known) and messages by seq."""

    session_id: str
    meta: SessionMeta | None
    messages: tuple[tuple[int, Message], ...] = ()


class SessionArchive(Protocol):
    """The durable side (rag_service.archive.Archive implements it)."""

    async def list_sessions(self, tenant: str, limit: int, offset: int) -> list[dict[str, Any]]: ...

    async def write_batch(self, writes: Sequence[ArchiveWrite]) -> set[str]:
        """Idempotent: upserts each meta, inserts the messages not stored yet. A message whose seq holds
        a different message is stored after the session's last seq, never dropped; returns the sessions
        where that happened (their live copies are stale)."""
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


@dataclass
class _Pending:
    """Changes of one session not yet in the archive."""

    # The meta to write when the live store no longer has the session at flush time (known at creation,
    # or read back from the spool).
    meta: SessionMeta | None = None
    messages: dict[int, Message] = field(default_factory=dict)

    def absorb(self, newer: _Pending) -> None:
        self.meta = newer.meta or self.meta
        self.messages.update(newer.messages)


class ArchivedStore:
    """A live store in front of the SQL archive.

    Every change goes to the live store first (the turn waits for nothing else) and is queued for the
    archive; a background task writes the queue in batches (idempotent: a message stored already is
    skipped, metas are upserted), retrying with back-off while the archive is unavailable. A session
    missing from the live store (expired, evicted, Redis flushed or restarted) is restored from the
    archive on its next use, once this process's writes of it (queued or in flight) are in the archive.
    Writes that still fail at shutdown go to a spool on disk that the next start writes. Message content
    and summaries are masked (PII) before either store sees them.
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
        spool: Spool | None = None,
        on_conflict: Callable[[], None] | None = None,
    ) -> None:
        self.live, self.archive, self.masker, self.count_tokens = live, archive, masker, count_tokens
        self.flush_interval_s, self.retry_max_s = flush_interval_s, retry_max_s
        self.spool, self.on_conflict = spool, on_conflict
        self._pending: dict[str, _Pending] = {}
        self._inflight: dict[str, _Pending] = {}
        self._flush_lock = asyncio.Lock()
        self._task: asyncio.Task[None] | None = None
        self._failures = 0
        self._closing = False
        # Sessions whose live copy disagrees with the archive (a seq conflict), to be reconciled.
        self._stale: set[str] = set()
        self._reconciling: dict[str, asyncio.Task[None]] = {}
        # Spool files taken up at start, and their sessions: removed once those are written.
        self._spooled: tuple[list[Path], set[str]] = ([], set())
        self.restored = 0  # sessions restored from the archive (metrics, tests)
        self.conflicts = 0  # sessions whose messages were re-sequenced in the archive

    # -- SessionStore ---------------------------------------------------------------------------

    async def create(self, meta: SessionMeta) -> None:
        await self.live.create(meta)
        self._queue(meta.session_id).meta = SessionMeta(**meta.to_dict())
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
            await self._queue_meta(session_id)
        return applied

    async def set_topic_start(self, session_id: str, index: int) -> None:
        try:
            await self.live.set_topic_start(session_id, index)
        except SessionNotFound as exc:
            await self._restore(session_id, exc)
            await self.live.set_topic_start(session_id, index)
        await self._queue_meta(session_id)

    async def set_task(self, session_id: str, task: str) -> None:
        # Slots hold what the customer typed (a phone number too): masked like the messages.
        if self.masker is not None:
            task = self.masker.mask(task)
        try:
            await self.live.set_task(session_id, task)
        except SessionNotFound as exc:
            await self._restore(session_id, exc)
            await self.live.set_task(session_id, task)
        await self._queue_meta(session_id)

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

    def probes(self) -> list[Probe]:
        return [*self.live.probes(), ("archive", self.archive.ping)]

    async def start(self) -> None:
        """Takes up the writes an earlier run spooled to disk (archive down at its shutdown)."""
        if self.spool is None:
            return
        paths, writes = await asyncio.to_thread(self.spool.read)
        for w in writes:
            self._queue(w.session_id).absorb(_Pending(w.meta, dict(w.messages)))
        self._spooled = (paths, {w.session_id for w in writes})
        if writes:
            log.warning("archive write-behind: writing %d sessions spooled by an earlier run", len(writes))
            self._kick()
        elif paths:
            await asyncio.to_thread(self.spool.discard, paths)
            self._spooled = ([], set())

    async def close(self) -> None:
        """Writes what is still queued (a few attempts), spools the rest to disk, closes both stores."""
        self._closing = True  # the flusher stops even if a client library swallows the cancel
        background = [t for t in (self._task, *self._reconciling.values()) if t is not None and not t.done()]
        for task in background:
            task.cancel()
        await asyncio.gather(*background, return_exceptions=True)
        for attempt in range(3):
            try:
                await self.flush()
                break
            except Exception as exc:
                log.error("archive write-behind: flush at close failed (attempt %d): %s", attempt + 1, exc)
                await asyncio.sleep(0.2 * (attempt + 1))
        if self._pending:
            await self._spool_pending()
        await self.live.close()
        await self.archive.close()

    # -- write-behind ---------------------------------------------------------------------------

    @property
    def pending(self) -> int:
        """Sessions with changes not yet in the archive (queued or being written): the backlog."""
        return len(self._pending.keys() | self._inflight.keys())

    async def list_sessions(self, tenant: str, limit: int, offset: int) -> list[dict[str, Any]]:
        """The tenant's sessions as archived, after this process's pending writes (so a session created a
        moment ago is listed)."""
        await self.flush()
        return await self.archive.list_sessions(tenant, limit, offset)

    async def flush(self) -> None:
        """Writes everything queued so far (waiting for a batch in flight), then reconciles the sessions a
        conflict left stale; raises if the archive fails (the queue is kept)."""
        while self._pending or self._inflight:
            await self._flush_once()
        for sid in list(self._stale):
            running = self._reconciling.get(sid)
            await (running if running is not None else self._reconcile(sid))

    async def _queue_meta(self, session_id: str) -> None:
        """Queues a meta change with the meta it produced: should the live copy be lost before the flush,
        the archive still gets the summary (a flush prefers the live meta when there is one)."""
        state = (await self.live.peek([session_id])).get(session_id)
        pending = self._queue(session_id)
        if isinstance(state, SessionMeta):
            pending.meta = state
        self._kick()

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
        while (self._pending or self._stale) and not self._closing:
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
            self._reconcile_stale()

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
        await self._discard_spooled()

    async def _write(self, batch: dict[str, _Pending]) -> None:
        sids = list(batch)
        states = await self.live.peek(sids)
        sids = [sid for sid in sids if states.get(sid) != DELETED]
        stored = await self.archive.max_seqs([sid for sid in sids if batch[sid].messages])
        writes: list[ArchiveWrite] = []
        for sid in sids:
            queued, state = batch[sid], states.get(sid)
            meta = state if isinstance(state, SessionMeta) else queued.meta
            messages = dict(queued.messages)
            if messages:
                # A gap (writes lost with a crashed process) is filled from the live store when it still has them.
                have, first = stored.get(sid, -1), min(messages)
                if first > have + 1:
                    for i, m in enumerate(await self.live.peek_messages(sid, have + 1, first)):
                        messages.setdefault(have + 1 + i, m)
            writes.append(ArchiveWrite(sid, meta, tuple(sorted(messages.items(), key=lambda kv: kv[0]))))
        if writes:
            self._note_conflicts(await self.archive.write_batch(writes))
            # A session deleted by another process while this batch was being written: delete it again.
            after = await self.live.peek([w.session_id for w in writes])
            for sid, state in after.items():
                if state == DELETED:
                    await self.archive.delete(sid)

    def _note_conflicts(self, sessions: set[str]) -> None:
        for _ in sessions:
            self.conflicts += 1
            if self.on_conflict is not None:
                self.on_conflict()
        if sessions:
            self._stale |= sessions
            self._kick()

    # -- conflicts: a live copy that numbers messages differently from the archive ---------------

    def _reconcile_stale(self) -> None:
        for sid in list(self._stale):
            if sid not in self._reconciling and not self._closing:
                task = asyncio.get_running_loop().create_task(self._reconcile(sid))
                self._reconciling[sid] = task
                task.add_done_callback(functools.partial(self._reconciled, sid))

    def _reconciled(self, session_id: str, _task: asyncio.Task[None]) -> None:
        self._reconciling.pop(session_id, None)

    async def _reconcile(self, session_id: str) -> None:
        """The archive holds turns this live copy lacks, or numbers them differently (a turn appended to
        a copy restored without an earlier one). Under the session's lock, so no turn runs meanwhile:
        copy whatever the live copy holds into the archive (messages stored already are skipped, the
        others go after the last seq), then drop the live copy, so the next use restores the merged
        conversation. Retried on the next flush if the lock or a store is not available."""
        try:
            async with self.live.lock(session_id):
                state = (await self.live.peek([session_id])).get(session_id)
                if isinstance(state, SessionMeta):
                    await self._settle(session_id)
                    held = await self.live.peek_messages(session_id, 0, state.message_count)
                    await self.archive.write_batch([ArchiveWrite(session_id, state, tuple(enumerate(held)))])
                    await self.live.evict(session_id)
                    log.warning("a session's live copy disagreed with the archive: merged, restored on next use")
                self._stale.discard(session_id)
        except Exception as exc:
            log.warning("could not reconcile a session with the archive yet (retrying): %s", exc)
            self._kick()

    # -- restore --------------------------------------------------------------------------------

    async def _settle(self, session_id: str) -> None:
        """Waits until the archive holds this process's writes of the session: queued ones, and a batch
        in flight (a restore that read the archive before that batch committed would miss its turns, and
        the next turn would reuse their positions)."""
        while session_id in self._pending or session_id in self._inflight:
            try:
                await self._flush_once()
            except StoreUnavailable:
                raise
            except Exception as exc:
                raise StoreUnavailable("archive", f"queued writes cannot be written ({exc})"[:300]) from exc

    async def _restore(self, session_id: str, cause: SessionNotFound) -> None:
        """Puts the archived session back into the live store, or raises SessionNotFound."""
        await self._settle(session_id)
        found = await self.archive.load(session_id)
        if found is None:
            raise SessionNotFound(session_id) from cause
        meta, messages = found
        if await self.live.restore(meta, messages):
            self.restored += 1
            log.info("session restored from the archive (%d messages)", len(messages))

    # -- spool ----------------------------------------------------------------------------------

    async def _spool_pending(self) -> None:
        if self.spool is None:
            log.error("archive write-behind: %d sessions not archived at close", len(self._pending))
            return
        try:
            states = await self.live.peek(list(self._pending))
        except Exception:  # the live store is down too: the metas known here will do
            states = {}
        writes = []
        for sid, queued in self._pending.items():
            state = states.get(sid)
            if state == DELETED:
                continue
            meta = state if isinstance(state, SessionMeta) else queued.meta
            writes.append(ArchiveWrite(sid, meta, tuple(sorted(queued.messages.items(), key=lambda kv: kv[0]))))
        path = await asyncio.to_thread(self.spool.save, writes)
        log.error(
            "archive unavailable at close: %d sessions spooled to %s; the next start writes them", len(writes), path
        )
        self._pending.clear()
        old, self._spooled = self._spooled[0], ([], set())
        await asyncio.to_thread(self.spool.discard, old)

    async def _discard_spooled(self) -> None:
        paths, sids = self._spooled
        if self.spool is None or not paths or sids & (self._pending.keys() | self._inflight.keys()):
            return
        self._spooled = ([], set())
        await asyncio.to_thread(self.spool.discard, paths)
        log.info("archive write-behind: the spooled sessions of an earlier run are archived")

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
