"""Write-behind and restore: a live store in front of the SQL archive (`ArchivedStore`).

The turn waits for the live store only; the archive gets every change in the background, in batches,
and gives back the sessions the live store lost (expired, evicted, Redis flushed or restarted).
"""

from __future__ import annotations

import asyncio
import functools
import logging
from collections.abc import Awaitable, Callable, Sequence
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from rag_service.domain import Message, SessionMeta
from rag_service.sessions.interface import (
    DELETED,
    ArchiveWrite,
    LiveStore,
    Probe,
    Rider,
    SessionArchive,
    SessionNotFound,
    StoreUnavailable,
    SummaryUpdate,
)
from rag_service.sessions.spool import Spool

log = logging.getLogger(__name__)

_R = TypeVar("_R")


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
    Writes that still fail at shutdown go to a spool on disk that the next start writes. PII masking is
    not done here: rag_service.sessions.masking wraps this store, so both stores get masked text.
    """

    def __init__(
        self,
        live: LiveStore,
        archive: SessionArchive,
        *,
        flush_interval_s: float = 0.2,
        retry_max_s: float = 30.0,
        spool: Spool | None = None,
        on_conflict: Callable[[], None] | None = None,
    ) -> None:
        self.live, self.archive = live, archive
        self.flush_interval_s, self.retry_max_s = flush_interval_s, retry_max_s
        self.spool, self.on_conflict = spool, on_conflict
        self._pending: dict[str, _Pending] = {}
        self._inflight: dict[str, _Pending] = {}
        self._flush_lock = asyncio.Lock()
        self._task: asyncio.Task[None] | None = None
        self._failures = 0
        self._closing = False
        self._waiting = False  # the flusher is between batches: a cancel there interrupts no write
        # Sessions whose live copy disagrees with the archive (a seq conflict), to be reconciled.
        self._stale: set[str] = set()
        self._reconciling: dict[str, asyncio.Task[None]] = {}
        # Spool files taken up at start, and their sessions: removed once those are written.
        self._spooled: tuple[list[Path], set[str]] = ([], set())
        self.restored = 0  # sessions restored from the archive (metrics, tests)
        self.conflicts = 0  # sessions whose messages were re-sequenced in the archive
        self._riders: list[Rider] = []

    def carry(self, rider: Rider) -> None:
        """`rider`'s queued rows go in each flush's transaction. A turn's receipt is queued just after its
        messages, so both commit together: one transaction per flush where there were two (a transaction
        of one receipt on file SQLite cost 0.4 ms of CPU, its rows in the flush's 0.1 ms). Turns an LLM
        answers take longer than a flush interval, so most flushes hold one turn, and this is per turn."""
        self._riders.append(rider)

    # -- SessionStore ---------------------------------------------------------------------------

    async def create(self, meta: SessionMeta) -> None:
        await self.live.create(meta)
        self._queue(meta.session_id).meta = SessionMeta(**meta.to_dict())
        self._kick()

    async def load(
        self, session_id: str, start_of: Callable[[SessionMeta], int]
    ) -> tuple[SessionMeta, list[Message], int]:
        return await self._restoring(session_id, lambda: self.live.load(session_id, start_of))

    async def append(self, session_id: str, messages: Sequence[Message]) -> int:
        count = await self._restoring(session_id, lambda: self.live.append(session_id, messages))
        pending = self._queue(session_id)
        for i, m in enumerate(messages):
            pending.messages[count - len(messages) + i] = m
        self._kick()
        return count

    async def update_summary(self, session_id: str, update: SummaryUpdate) -> bool:
        applied = await self._restoring(session_id, lambda: self.live.update_summary(session_id, update))
        if applied:
            await self._queue_meta(session_id)
        return applied

    async def set_topic_start(self, session_id: str, index: int) -> None:
        await self._restoring(session_id, lambda: self.live.set_topic_start(session_id, index))
        await self._queue_meta(session_id)

    async def set_task(self, session_id: str, task: str) -> None:
        await self._restoring(session_id, lambda: self.live.set_task(session_id, task))
        await self._queue_meta(session_id)

    async def messages(self, session_id: str) -> list[Message]:
        return await self._restoring(session_id, lambda: self.live.messages(session_id))

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
            # A batch being written is let finish (the flusher stops after it): a task cancelled inside a
            # database call has its connection dropped mid-transaction, and the batch written again below.
            if task is not self._task or self._waiting:
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
            self._waiting = True
            try:
                await asyncio.sleep(delay)
            finally:
                self._waiting = False
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
        writes: list[ArchiveWrite] = []
        for sid in sids:
            queued, state = batch[sid], states.get(sid)
            if state == DELETED:
                continue
            meta = state if isinstance(state, SessionMeta) else queued.meta
            writes.append(ArchiveWrite(sid, meta, tuple(sorted(queued.messages.items(), key=lambda kv: kv[0]))))
        if writes:
            boarded = [b for b in (r.board() for r in self._riders) if b is not None]
            try:
                # A gap behind what the archive holds (writes lost with a crashed process) is filled from
                # the live store when it still has those messages.
                also = [write for write, _ in boarded]
                conflicts = await self.archive.write_batch(writes, self.live.peek_messages, also=also)
            except BaseException as exc:
                for _, settle in boarded:
                    settle(exc)
                raise
            for _, settle in boarded:
                settle(None)
            self._note_conflicts(conflicts)
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

    async def _restoring(self, session_id: str, op: Callable[[], Awaitable[_R]]) -> _R:
        """`op` on the live store; if the live store lacks the session, it is restored and `op` runs again."""
        try:
            return await op()
        except SessionNotFound as exc:
            await self._restore(session_id, exc)
        return await op()

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
