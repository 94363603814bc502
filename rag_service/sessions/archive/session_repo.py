"""The sessions repository: sessions and their messages in the archive (what the write-behind writes
and a restore reads)."""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncConnection

from rag_service.domain import Message, SessionMeta
from rag_service.sessions.archive.base import Database, available
from rag_service.sessions.archive.crypto import seal, unseal
from rag_service.sessions.archive.schema import messages, sessions
from rag_service.sessions.interface import AlsoWrite, ArchiveWrite, GapFill

log = logging.getLogger(__name__)


# The statements of every write-behind flush, built once: a statement is immutable and remembers its
# cache key, where building one and its key again cost ~0.1 ms each (the SQL sent is the same: `in_` of a
# list is an expanding parameter too).
_IDS: sa.BindParameter[str] = sa.bindparam("session_ids", expanding=True)
_MAX_SEQS = (
    sa.select(messages.c.session_id, sa.func.max(messages.c.seq))
    .where(messages.c.session_id.in_(_IDS))
    .group_by(messages.c.session_id)
)
_INSERT_MESSAGES = sa.insert(messages)


class _Gaps(Exception):
    """Writes that start beyond their session's last stored seq + 1 (its last seq by session): their
    transaction is rolled back, and written again with the missing messages filled in."""

    def __init__(self, last: dict[str, int]) -> None:
        super().__init__(f"{len(last)} sessions with a gap")
        self.last = last


@dataclass
class _Tail:
    """What a session holds at the seqs a write touches: identities (role, content, created_at) by seq."""

    last: int = -1
    by_seq: dict[int, tuple[str, str, float]] = field(default_factory=dict)
    identities: set[tuple[str, str, float]] = field(default_factory=set)


class SessionRepository(Database):
    def _session_row(self, meta: SessionMeta, now: float) -> dict[str, Any]:
        summary, encrypted = seal(self.cipher, meta.summary)
        task, task_encrypted = seal(self.cipher, meta.task)
        return {
            "session_id": meta.session_id,
            "tenant": meta.tenant,
            "user_id": meta.user,
            "created_at": meta.created_at,
            "updated_at": now,
            "summary": summary,
            "summary_encrypted": encrypted,
            "summary_tokens": meta.summary_tokens,
            "summarized": meta.summarized,
            "summarized_source_tokens": meta.summarized_source_tokens,
            "topic_start": meta.topic_start,
            "task": task,
            "task_encrypted": task_encrypted,
        }

    def _message_rows(self, session_id: str, items: Sequence[tuple[int, Message]]) -> list[dict[str, Any]]:
        rows = []
        for seq, m in items:
            content, encrypted = seal(self.cipher, m.content)
            rows.append(
                {
                    "session_id": session_id,
                    "seq": seq,
                    "role": m.role,
                    "content": content,
                    "encrypted": encrypted,
                    "token_count": m.tokens,
                    "created_at": m.created_at,
                }
            )
        return rows

    async def _save_meta(self, conn: AsyncConnection, metas: Sequence[SessionMeta], now: float) -> None:
        if not metas:
            return
        update = [c.name for c in sessions.columns if c.name not in ("session_id", "created_at")]
        await conn.execute(self._upsert(sessions, ["session_id"], update), [self._session_row(m, now) for m in metas])

    async def _touch(self, conn: AsyncConnection, items: Sequence[tuple[str, float]], now: float) -> None:
        """Makes sure a session row exists (messages reference it) and bumps its updated_at."""
        if not items:
            return
        rows = [self._session_row(SessionMeta(session_id=sid, created_at=created), now) for sid, created in items]
        await conn.execute(self._upsert(sessions, ["session_id"], ["updated_at"]), rows)

    # -- sessions and messages --------------------------------------------------------------------

    async def create_session(self, meta: SessionMeta) -> None:
        await self.save_meta(meta)

    @available
    async def save_meta(self, meta: SessionMeta) -> None:
        await self.connect_ready()
        async with self.engine.begin() as conn:
            await self._save_meta(conn, [meta], time.time())

    async def save_messages(self, session_id: str, start_seq: int, items: Sequence[Message]) -> set[str]:
        """Idempotent: messages stored already (at any seq) are skipped."""
        return await self.write_batch([ArchiveWrite(session_id, None, tuple(enumerate(items, start_seq)))])

    @available
    async def write_batch(
        self, writes: Sequence[ArchiveWrite], fill: GapFill | None = None, *, also: Sequence[AlsoWrite] = ()
    ) -> set[str]:
        """One transaction: metas upserted, rows made to exist, messages placed (see `_place`). Returns the
        sessions where a message's seq was held by a different message: those were written after the
        session's last seq, and the live copy, which numbered them differently, is stale.

        With `fill`, a write that would leave a gap after the session's last stored seq (writes lost with
        a crashed process) has the missing messages filled from it first. The last seq is the one the
        transaction reads anyway (a separate read before it cost a connection and a select on every
        flush); a gap, which is rare, rolls the transaction back, is filled, and the batch is written
        again: so the live store is not read while the archive's write lock is held. `also` runs in each
        transaction that commits (a rolled-back one takes its statements with it)."""
        writes = [w for w in writes if w.meta is not None or w.messages]
        if not writes and not also:
            return set()
        await self.connect_ready()
        try:
            return await self._write_batch(writes, also, stop_at_gaps=fill is not None)
        except _Gaps as gaps:
            assert fill is not None
            filled = [
                await self._filled(w, gaps.last[w.session_id], fill) if w.session_id in gaps.last else w for w in writes
            ]
            return await self._write_batch(filled, also, stop_at_gaps=False)

    @staticmethod
    async def _filled(write: ArchiveWrite, last: int, fill: GapFill) -> ArchiveWrite:
        """The write with the messages between the session's last stored seq and its first one, as far as
        `fill` still has them."""
        messages = dict(write.messages)
        first = min(messages)
        for i, m in enumerate(await fill(write.session_id, last + 1, first)):
            messages.setdefault(last + 1 + i, m)
        return ArchiveWrite(write.session_id, write.meta, tuple(sorted(messages.items(), key=lambda kv: kv[0])))

    async def _write_batch(
        self, writes: Sequence[ArchiveWrite], also: Sequence[AlsoWrite], *, stop_at_gaps: bool
    ) -> set[str]:
        now = time.time()
        metas = [w.meta for w in writes if w.meta is not None]
        bare = [(w.session_id, w.messages[0][1].created_at) for w in writes if w.meta is None]
        conflicted: set[str] = set()
        async with self.engine.begin() as conn:
            await self._save_meta(conn, metas, now)
            await self._touch(conn, bare, now)
            with_messages = [w for w in writes if w.messages]
            if with_messages:
                stored = await self._stored_tails(conn, with_messages)
                if stop_at_gaps:
                    gaps = {
                        w.session_id: stored[w.session_id].last
                        for w in with_messages
                        if min(seq for seq, _ in w.messages) > stored[w.session_id].last + 1
                    }
                    if gaps:
                        raise _Gaps(gaps)
                rows = []
                for w in with_messages:
                    placed, moved = self._place(w, stored[w.session_id])
                    rows += self._message_rows(w.session_id, placed)
                    if moved:
                        conflicted.add(w.session_id)
                        log.error(
                            "archive: %d message(s) of a session found their seq taken by another message "
                            "(writes racing a restore); stored after the last seq instead",
                            moved,
                        )
                if rows:
                    # A plain insert: a seq that another writer took meanwhile fails the batch, which is
                    # then retried against what that writer stored, instead of being skipped.
                    await conn.execute(_INSERT_MESSAGES, rows)
            for write in also:
                await write(conn)
        return conflicted

    async def _stored_tails(self, conn: AsyncConnection, writes: Sequence[ArchiveWrite]) -> dict[str, _Tail]:
        """Per session: its highest stored seq and the stored messages from the write's first seq on."""
        ids = [w.session_id for w in writes]
        tails = {sid: _Tail() for sid in ids}
        for sid, seq in (await conn.execute(_MAX_SEQS, {"session_ids": ids})).all():
            tails[sid].last = int(seq)
        ranges = [
            sa.and_(messages.c.session_id == w.session_id, messages.c.seq >= w.messages[0][0])
            for w in writes
            if tails[w.session_id].last >= w.messages[0][0]
        ]
        if ranges:
            cols = (messages.c.session_id, messages.c.seq, messages.c.role, messages.c.content)
            stmt = sa.select(*cols, messages.c.encrypted, messages.c.created_at).where(sa.or_(*ranges))
            for r in (await conn.execute(stmt)).all():
                tail = tails[r.session_id]
                identity = (r.role, unseal(self.cipher, r.content, r.encrypted), r.created_at)
                tail.by_seq[int(r.seq)] = identity
                tail.identities.add(identity)
        return tails

    @staticmethod
    def _place(write: ArchiveWrite, tail: _Tail) -> tuple[list[tuple[int, Message]], int]:
        """Where each message of a write goes. A message stored already (same role, content and creation
        time at any seq, or same role and content at its seq) is skipped: a replayed batch. A free seq
        takes the message. A seq held by a different message is a conflict (two copies of the session numbered their messages differently,
        e.g. a turn appended to a live copy restored without an earlier turn): the message goes after the
        session's last seq, so both are kept, in the order they reached the archive."""
        placed: list[tuple[int, Message]] = []
        moved = 0
        for seq, m in sorted(write.messages, key=lambda kv: kv[0]):
            identity = (m.role, m.content, m.created_at)
            held = tail.by_seq.get(seq)
            # Equal text at its own seq is the same message re-sent (not after a move: the write's
            # messages no longer line up with the stored ones then).
            if identity in tail.identities or (not moved and held is not None and held[:2] == identity[:2]):
                continue
            if held is not None or (moved and seq <= tail.last):
                seq = tail.last + 1
                moved += 1
            placed.append((seq, m))
            tail.by_seq[seq] = identity
            tail.identities.add(identity)
            tail.last = max(tail.last, seq)
        return placed, moved

    @available
    async def max_seqs(self, session_ids: Sequence[str]) -> dict[str, int]:
        if not session_ids:
            return {}
        await self.connect_ready()
        async with self.engine.connect() as conn:
            rows = (await conn.execute(_MAX_SEQS, {"session_ids": list(session_ids)})).all()
        return {sid: int(seq) for sid, seq in rows}

    @available
    async def load(self, session_id: str) -> tuple[SessionMeta, list[Message]] | None:
        """The session's meta (message_count = the archived messages) and messages in order."""
        await self.connect_ready()
        async with self.engine.connect() as conn:
            row = (await conn.execute(sa.select(sessions).where(sessions.c.session_id == session_id))).first()
            if row is None:
                return None
            result = await conn.execute(
                sa.select(messages).where(messages.c.session_id == session_id).order_by(messages.c.seq)
            )
            rows = result.all()
        if any(r.seq != i for i, r in enumerate(rows)):
            await self._renumber(session_id, [(r.id, r.seq) for r in rows])
        items = [
            Message(r.role, unseal(self.cipher, r.content, r.encrypted), r.token_count, r.created_at) for r in rows
        ]
        n = len(items)
        meta = SessionMeta(
            session_id=row.session_id,
            created_at=row.created_at,
            tenant=row.tenant,
            user=row.user_id,
            message_count=n,
            summary=unseal(self.cipher, row.summary, row.summary_encrypted),
            summary_tokens=row.summary_tokens,
            summarized=min(row.summarized, n),
            summarized_source_tokens=row.summarized_source_tokens,
            topic_start=min(row.topic_start, n),
            task=unseal(self.cipher, row.task or "", bool(row.task_encrypted)),
        )
        return meta, items

    async def _renumber(self, session_id: str, ids: Sequence[tuple[int, int]]) -> None:
        """Closes gaps in a session's seqs (writes lost together with the live copy), so that the live
        list's indexes and the archive's seqs agree again. Ascending order never collides."""
        log.warning("archived session has gaps in its message seqs (lost writes); renumbering")
        async with self.engine.begin() as conn:
            for i, (row_id, seq) in enumerate(ids):
                if seq != i:
                    await conn.execute(sa.update(messages).where(messages.c.id == row_id).values(seq=i))

    @available
    async def delete(self, session_id: str) -> bool:
        await self.connect_ready()
        async with self.engine.begin() as conn:
            await conn.execute(sa.delete(messages).where(messages.c.session_id == session_id))
            result = await conn.execute(sa.delete(sessions).where(sessions.c.session_id == session_id))
        return bool(result.rowcount)

    @available
    async def session_ids(self, user_id: str | None = None) -> list[str]:
        await self.connect_ready()
        stmt = sa.select(sessions.c.session_id).order_by(sessions.c.updated_at)
        if user_id is not None:
            stmt = stmt.where(sessions.c.user_id == user_id)
        async with self.engine.connect() as conn:
            return [r[0] for r in (await conn.execute(stmt)).all()]

    @available
    async def list_sessions(self, tenant: str, limit: int, offset: int) -> list[dict[str, Any]]:
        """A tenant's sessions, most recently active first (an admin's view: ids, users, times)."""
        await self.connect_ready()
        stmt = (
            sa.select(sessions.c.session_id, sessions.c.user_id, sessions.c.created_at, sessions.c.updated_at)
            .where(sessions.c.tenant == tenant)
            .order_by(sessions.c.updated_at.desc(), sessions.c.session_id)
            .limit(limit)
            .offset(offset)
        )
        async with self.engine.connect() as conn:
            rows = (await conn.execute(stmt)).all()
        return [
            {"session_id": r.session_id, "user": r.user_id, "created_at": r.created_at, "updated_at": r.updated_at}
            for r in rows
        ]
