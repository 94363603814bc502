"""The SQL archive on SQLite, PostgreSQL and MariaDB: migrations, idempotent writes, restore reads,
encryption at rest and user memories. Each dialect gets fresh databases (servers.py)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import sqlalchemy as sa
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from cryptography.fernet import Fernet

from rag_core.settings import DatabaseSettings
from rag_service.domain import Message, Role, SessionMeta
from rag_service.sessions.archive import (
    VERSION_TABLE,
    Archive,
    ArchiveError,
    metadata,
    migrate,
    migrate_async,
    normalize_url,
)
from rag_service.sessions.interface import ArchiveWrite, new_session_id
from tests.servers import DIALECTS, fresh_database

KEY = Fernet.generate_key().decode()


@pytest.fixture(scope="module", params=DIALECTS)
async def archive_url(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[str]:
    """One migrated database per dialect for the module."""
    async with fresh_database(request.param, tmp_path_factory.mktemp("archive")) as url:
        await migrate_async(url)
        yield url


@pytest.fixture
async def archive(archive_url: str) -> AsyncIterator[Archive]:
    opened = Archive(archive_url)
    yield opened
    await opened.close()


def msgs(n: int, start: int = 0) -> list[Message]:
    out = []
    for i in range(start, start + n):
        role: Role = "user" if i % 2 == 0 else "assistant"
        out.append(Message(role, f"第{i}条消息：星辰数码 iPhone 16 Pro 🙂 {'长' * i}", 10 + i, time.time() + i / 7))
    return out


def meta_of(user: str = "u1") -> SessionMeta:
    return SessionMeta(session_id=new_session_id(16, user=user), created_at=time.time() / 3, user=user, tenant="t1")


async def scalar(archive: Archive, sql: str, **params: object) -> object:
    async with archive.engine.connect() as conn:
        return (await conn.execute(sa.text(sql), params)).scalar()


# -- migrations ---------------------------------------------------------------------------------


@pytest.mark.parametrize("dialect", DIALECTS)
async def test_migrations_apply_on_an_empty_database_and_are_idempotent(dialect: str, tmp_path: Path) -> None:
    async with fresh_database(dialect, tmp_path) as url:
        migrate(url)  # from inside the event loop: runs in a worker thread
        await migrate_async(url)  # again: nothing to do
        archive = Archive(url)
        try:
            assert await scalar(archive, f"SELECT version_num FROM {VERSION_TABLE}") == "0003"
            async with archive.engine.connect() as conn:
                tables = set(await conn.run_sync(lambda c: sa.inspect(c).get_table_names()))
                # The migration and the models agree (what `alembic check` verifies).
                diff = await conn.run_sync(
                    lambda c: compare_metadata(
                        MigrationContext.configure(c, opts={"compare_type": True, "version_table": VERSION_TABLE}),
                        metadata,
                    )
                )
            assert {
                "sessions",
                "messages",
                "user_memories",
                "turn_receipts",
                "feedback",
                "annotations",
                VERSION_TABLE,
            } <= tables
            assert diff == []
        finally:
            await archive.close()


async def test_sessions_archived_before_task_state_load_after_migration_0002(tmp_path: Path) -> None:
    url = f"sqlite+aiosqlite:///{tmp_path / 'old.db'}"
    migrate(url, "0001")
    archive = Archive(url)
    try:
        async with archive.engine.begin() as conn:
            await conn.execute(
                sa.text("INSERT INTO sessions VALUES ('s1', '', '', 1.0, 1.0, '', :f, 0, 0, 0, 0)"),
                {"f": False},
            )
    finally:
        await archive.close()
    await migrate_async(url)
    archive = Archive(url)
    try:
        found = await archive.load("s1")
        assert found is not None and found[0].task == ""  # no task yet, not an error
    finally:
        await archive.close()


def test_urls_get_async_drivers_and_utf8mb4(tmp_path: Path) -> None:
    assert normalize_url("postgresql://u@h/db").drivername == "postgresql+asyncpg"
    mysql_url = normalize_url("mysql://root@127.0.0.1/test")
    assert mysql_url.drivername == "mysql+aiomysql" and mysql_url.query["charset"] == "utf8mb4"
    assert normalize_url("mysql+aiomysql://root@h/db?charset=latin1").query["charset"] == "latin1"
    sqlite_url = normalize_url(f"sqlite:///{tmp_path}/new/dir/a.db")
    assert sqlite_url.drivername == "sqlite+aiosqlite" and (tmp_path / "new" / "dir").is_dir()


def test_a_file_archive_keeps_its_connection_across_event_loops(tmp_path: Path) -> None:
    """One connection is kept between writes, and it still serves the engine when a later event loop
    uses it (a CLI or test running several `asyncio.run`s on one archive), concurrent writes included."""
    url = f"sqlite+aiosqlite:///{tmp_path / 'loops.db'}"
    migrate(url)
    archive = Archive(url)
    opened: list[object] = []
    sa.event.listen(archive.engine.sync_engine, "connect", lambda conn, _record: opened.append(conn))

    async def write(name: str, seq: int) -> None:
        meta = SessionMeta(session_id=name, created_at=1.0)
        await archive.create_session(meta)
        await archive.save_messages(name, seq, [Message("user", f"hello from {name}", 3, 1.0)])

    asyncio.run(write("first", 0))
    asyncio.run(write("second", 0))
    assert len(opened) == 1

    async def concurrent_then_close() -> list[str]:
        await asyncio.gather(*(write(f"s{i}", 0) for i in range(6)))
        try:
            found = [await archive.load(name) for name in ("first", "second", "s5")]
            return [messages[0].content for _, messages in filter(None, found)]
        finally:
            await archive.close()

    assert asyncio.run(concurrent_then_close()) == ["hello from first", "hello from second", "hello from s5"]


# -- sessions and messages ----------------------------------------------------------------------


async def test_round_trip_is_exact(archive: Archive) -> None:
    meta = meta_of()
    meta.summary, meta.summary_tokens, meta.summarized, meta.summarized_source_tokens = "摘要：用户问价格", 8, 2, 33
    meta.topic_start = 2
    items = msgs(5)
    await archive.create_session(meta)
    await archive.save_messages(meta.session_id, 0, items)
    found = await archive.load(meta.session_id)
    assert found is not None
    loaded_meta, loaded = found
    assert loaded == items  # Chinese, emoji, token counts, float timestamps
    meta.message_count = 5
    assert loaded_meta == meta


async def test_save_messages_is_idempotent(archive: Archive) -> None:
    meta = meta_of()
    await archive.create_session(meta)
    items = msgs(6)
    await archive.save_messages(meta.session_id, 0, items[:4])
    await archive.save_messages(meta.session_id, 0, items[:4])  # the same batch again
    await archive.save_messages(meta.session_id, 2, items[2:])  # overlapping
    count = await scalar(archive, "SELECT COUNT(*) FROM messages WHERE session_id = :s", s=meta.session_id)
    assert count == 6
    found = await archive.load(meta.session_id)
    assert found is not None and found[1] == items


async def test_write_batch_creates_missing_rows_and_upserts_meta(archive: Archive) -> None:
    bare, full = meta_of(), meta_of(user="u2")
    await archive.write_batch(
        [
            ArchiveWrite(bare.session_id, None, tuple(enumerate(msgs(2)))),  # no row yet, no meta known
            ArchiveWrite(full.session_id, full, ()),
        ]
    )
    full.summary, full.summarized = "新摘要", 2
    await archive.write_batch([ArchiveWrite(full.session_id, full, tuple(enumerate(msgs(2))))])
    got_bare, got_full = await archive.load(bare.session_id), await archive.load(full.session_id)
    assert got_bare is not None and len(got_bare[1]) == 2
    assert got_full is not None and got_full[0].summary == "新摘要" and got_full[0].summarized == 2
    assert await archive.max_seqs([bare.session_id, full.session_id, "nope"]) == {
        bare.session_id: 1,
        full.session_id: 1,
    }


async def test_upserts_are_built_once_per_shape_and_each_write_has_its_own_values(archive: Archive) -> None:
    from rag_service.sessions.archive.schema import sessions

    assert archive._upsert(sessions, ["session_id"], ["updated_at"]) is archive._upsert(
        sessions, ["session_id"], ["updated_at"]
    )
    assert archive._upsert(sessions, ["session_id"], ["updated_at"]) is not archive._upsert(
        sessions, ["session_id"], ["updated_at", "summary"]
    )
    # The remembered statement is never changed by a write: two metas written one after the other both land.
    first, second = meta_of(user="u7"), meta_of(user="u8")
    await archive.write_batch([ArchiveWrite(first.session_id, first, ())])
    await archive.write_batch([ArchiveWrite(second.session_id, second, ())])
    got_first, got_second = await archive.load(first.session_id), await archive.load(second.session_id)
    assert got_first is not None and got_first[0].user == "u7"
    assert got_second is not None and got_second[0].user == "u8"


async def test_session_ids_are_case_sensitive(archive: Archive) -> None:
    base = new_session_id(16)
    lower, upper = SessionMeta(base.lower() + "x", 1.0), SessionMeta(base.upper() + "X", 2.0)
    await archive.create_session(lower)
    await archive.create_session(upper)
    got_lower, got_upper = await archive.load(lower.session_id), await archive.load(upper.session_id)
    assert got_lower is not None and got_lower[0].created_at == 1.0
    assert got_upper is not None and got_upper[0].created_at == 2.0


async def test_long_content_fits(archive: Archive) -> None:
    meta = meta_of()
    await archive.create_session(meta)
    big = Message("assistant", "长文本" * 30000, 90000, time.time())  # ~270 KB of UTF-8
    await archive.save_messages(meta.session_id, 0, [big])
    found = await archive.load(meta.session_id)
    assert found is not None and found[1] == [big]


async def test_delete_and_unknown(archive: Archive) -> None:
    meta = meta_of()
    await archive.create_session(meta)
    await archive.save_messages(meta.session_id, 0, msgs(2))
    assert await archive.delete(meta.session_id)
    assert await archive.load(meta.session_id) is None
    assert not await archive.delete(meta.session_id)
    assert await scalar(archive, "SELECT COUNT(*) FROM messages WHERE session_id = :s", s=meta.session_id) == 0


async def test_gaps_in_seqs_are_closed_on_load(archive: Archive) -> None:
    meta = meta_of()
    await archive.create_session(meta)
    items = msgs(6)
    await archive.save_messages(meta.session_id, 0, items[:2])
    await archive.save_messages(meta.session_id, 4, items[4:])  # seqs 2 and 3 were lost
    found = await archive.load(meta.session_id)
    assert found is not None and found[1] == items[:2] + items[4:] and found[0].message_count == 4
    assert await archive.max_seqs([meta.session_id]) == {meta.session_id: 3}


# -- encryption at rest -------------------------------------------------------------------------


async def test_encryption_at_rest(archive_url: str) -> None:
    encrypted = Archive(archive_url, KEY)
    plain = Archive(archive_url)
    try:
        meta = meta_of()
        meta.summary = "用户想买 iPhone 16 Pro"
        await encrypted.create_session(meta)
        items = msgs(2)
        await encrypted.save_messages(meta.session_id, 0, items)
        raw = await scalar(
            encrypted, "SELECT content FROM messages WHERE session_id = :s AND seq = 0", s=meta.session_id
        )
        raw_summary = await scalar(encrypted, "SELECT summary FROM sessions WHERE session_id = :s", s=meta.session_id)
        assert isinstance(raw, str) and raw.startswith("gAAAA") and "星辰" not in raw
        assert isinstance(raw_summary, str) and raw_summary.startswith("gAAAA")
        found = await encrypted.load(meta.session_id)
        assert found is not None and found[1] == items and found[0].summary == meta.summary
        with pytest.raises(ArchiveError, match="encryption_key"):
            await plain.load(meta.session_id)
        # Rotation: a new key first, the old one still decrypts.
        rotated = Archive(archive_url, f"{Fernet.generate_key().decode()},{KEY}")
        try:
            found = await rotated.load(meta.session_id)
            assert found is not None and found[1] == items
        finally:
            await rotated.close()
    finally:
        await encrypted.close()
        await plain.close()


def test_encryption_key_is_validated() -> None:
    assert DatabaseSettings(encryption_key=KEY).encryption_key == KEY
    with pytest.raises(ValueError, match="Fernet"):
        DatabaseSettings(encryption_key="not-a-key")


# -- user memories ------------------------------------------------------------------------------


@pytest.mark.parametrize("key", [None, KEY])
async def test_user_memories(archive_url: str, key: str | None) -> None:
    archive = Archive(archive_url, key)
    user = f"user-{new_session_id(6)}"
    try:
        first = await archive.add_memory(user, "用户有一台 iPhone 15", source_session="s1")
        second = await archive.add_memory(user, "偏好顺丰快递", source_session="s1")
        again = await archive.add_memory(user, "  用户有一台   iPhone 15 ", source_session="s2")  # same fact
        assert again.id == first.id
        listed = await archive.list_memories(user)
        assert [m.fact for m in listed] == ["用户有一台 iPhone 15", "偏好顺丰快递"]  # newest first
        assert listed[0].source_session == "s2"
        assert await archive.list_memories(user, limit=1) == listed[:1]
        assert await archive.list_memories("someone-else") == []
        if key:
            raw = await scalar(archive, "SELECT fact FROM user_memories WHERE id = :i", i=second.id)
            assert isinstance(raw, str) and raw.startswith("gAAAA")
        assert not await archive.delete_memory("someone-else", second.id)
        assert await archive.delete_memory(user, second.id)
        assert [m.id for m in await archive.list_memories(user)] == [first.id]
        assert await archive.delete_memories(user) == 1
        assert await archive.list_memories(user) == []
    finally:
        await archive.close()
