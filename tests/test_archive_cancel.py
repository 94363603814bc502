"""A write cancelled midway must not leave the SQLite archive locked, and closing the write-behind store
must not cancel the batch it is writing.

Without both, closing the service while a batch was in flight cancelled it inside its transaction;
SQLAlchemy then closed the connection without a rollback, and sqlite3 keeps a connection closed that way
(a statement still held by a cursor, which the cancelled task's exception kept alive) open with its
transaction and the database's write lock: the flush at close waited out its busy timeout, failed with
"database is locked", and the session went to the spool instead of the archive.
"""

from __future__ import annotations

import asyncio
import sqlite3
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from sqlalchemy.engine import make_url

from rag_service.domain import Message, SessionMeta
from rag_service.sessions.archive import Archive
from rag_service.sessions.interface import ArchiveWrite, new_session_id
from rag_service.sessions.live_memory import MemoryStore
from rag_service.sessions.spool import Spool
from rag_service.sessions.writebehind import ArchivedStore


def _turn(label: str, at: float) -> list[Message]:
    return [
        Message("user", f"Does the kettle {label} switch off by itself?", 8, at),
        Message("assistant", "Yes.", 2, at),
    ]


def _write_lock_taken(url: str) -> bool:
    """Whether another connection holds the database's write lock (asked without waiting)."""
    database = make_url(url).database
    assert database is not None
    probe = sqlite3.connect(database, timeout=0, isolation_level=None)
    try:
        probe.execute("BEGIN IMMEDIATE")
        probe.execute("ROLLBACK")
        return False
    except sqlite3.OperationalError as exc:
        assert "locked" in str(exc)
        return True
    finally:
        probe.close()


def _on_statement(archive: Archive, prefix: str, action: Any) -> None:
    """Calls `action()` as a statement starting with `prefix` is about to be sent (inside its transaction)."""

    @sa.event.listens_for(archive.engine.sync_engine, "before_cursor_execute")
    def _hook(conn: Any, cursor: Any, statement: str, *args: Any) -> None:
        if statement.lstrip().startswith(prefix):
            action()


@pytest.mark.parametrize(
    "statement",
    ["SELECT messages.session_id, max", "INSERT INTO messages"],
    ids=["during-a-select", "during-the-insert"],
)
async def test_a_write_cancelled_midway_leaves_no_lock_and_loses_nothing(sqlite_url: str, statement: str) -> None:
    archive = Archive(sqlite_url)
    now = time.time()
    meta = SessionMeta(session_id=new_session_id(16), created_at=now)
    first, second = _turn("A", now), _turn("B", now + 1)
    try:
        await archive.write_batch([ArchiveWrite(meta.session_id, meta, tuple(enumerate(first)))])
        later = ArchiveWrite(meta.session_id, None, tuple(enumerate(second, 2)))
        target: list[asyncio.Task[set[str]]] = []
        # The cancel lands at the driver call that sends the statement: the transaction has written already.
        _on_statement(archive, statement, lambda: target and target.pop().cancel())
        task = asyncio.get_running_loop().create_task(archive.write_batch([later]))
        target.append(task)
        with pytest.raises(asyncio.CancelledError):
            await task
        # `task` is still referenced (as the write-behind keeps its flusher): it holds the cursor.
        assert not _write_lock_taken(sqlite_url)
        assert await archive.write_batch([later]) == set()
        found = await archive.load(meta.session_id)
        assert found is not None and [m.content for m in found[1]] == [m.content for m in first + second]
    finally:
        await archive.close()


class GatedArchive:
    """The archive with its batch writes held at a gate; records whether a write was cancelled."""

    def __init__(self, archive: Archive) -> None:
        self.archive = archive
        self.gate, self.writing = asyncio.Event(), asyncio.Event()
        self.cancelled = 0

    async def write_batch(self, writes: Sequence[ArchiveWrite], *args: Any, **kwargs: Any) -> set[str]:
        self.writing.set()
        try:
            await self.gate.wait()
        except asyncio.CancelledError:
            self.cancelled += 1
            raise
        return await self.archive.write_batch(writes, *args)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.archive, name)


async def test_close_lets_the_batch_in_flight_finish(sqlite_url: str, tmp_path: Path) -> None:
    gated = GatedArchive(Archive(sqlite_url))
    spool = Spool(tmp_path / "spool")
    store = ArchivedStore(MemoryStore(60, 5.0, "wait"), gated, flush_interval_s=0, spool=spool)
    meta = SessionMeta(session_id=new_session_id(16), created_at=time.time())
    await store.create(meta)
    await store.append(meta.session_id, _turn("A", meta.created_at))
    await gated.writing.wait()  # the flusher is inside its write
    closing = asyncio.get_running_loop().create_task(store.close())
    while not store._closing:  # close() has stopped (or cancelled) the flusher
        await asyncio.sleep(0)
    gated.gate.set()
    await closing
    assert gated.cancelled == 0
    assert spool.read() == ([], [])
    archive = Archive(sqlite_url)
    try:
        found = await archive.load(meta.session_id)
        assert found is not None and [m.content for m in found[1]] == [m.content for m in _turn("A", 0)]
    finally:
        await archive.close()


async def test_closing_while_the_archive_writes_archives_everything(sqlite_url: str, tmp_path: Path) -> None:
    """The service shut down as the flusher sends a batch's messages: nothing spooled, all archived."""
    archive = Archive(sqlite_url)

    # No waiting on a lock: a lock left behind fails the flush at close at once instead of after 30 s.
    @sa.event.listens_for(archive.engine.sync_engine, "connect")
    def _no_wait(dbapi_connection: Any, _record: Any) -> None:
        cursor = dbapi_connection.cursor()
        cursor.execute("PRAGMA busy_timeout=0")
        cursor.close()

    spool = Spool(tmp_path / "spool")
    store = ArchivedStore(MemoryStore(60, 5.0, "wait"), archive, flush_interval_s=0, spool=spool)
    closing: list[asyncio.Task[None]] = []

    def close_once() -> None:
        if not closing:
            closing.append(asyncio.get_running_loop().create_task(store.close()))

    _on_statement(archive, "INSERT INTO messages", close_once)
    meta = SessionMeta(session_id=new_session_id(16), created_at=time.time())
    await store.create(meta)
    await store.append(meta.session_id, _turn("A", meta.created_at))
    while not closing:
        await asyncio.sleep(0)
    await closing[0]
    assert spool.read() == ([], [])
    reopened = Archive(sqlite_url)
    try:
        found = await reopened.load(meta.session_id)
        assert found is not None and [m.content for m in found[1]] == [m.content for m in _turn("A", 0)]
    finally:
        await reopened.close()
