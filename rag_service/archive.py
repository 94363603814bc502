"""The SQL archive: sessions, their messages and user memories, turn receipts, ratings and annotations
(SQLAlchemy 2, async).

SQLite (aiosqlite, the embedded default), PostgreSQL (asyncpg) and MySQL/MariaDB (aiomysql). The
schema is created by the Alembic migrations in rag_service/migrations (`migrate(url)`), never by
`create_all` (except for an in-memory SQLite database, which no migration run could reach).

Times are epoch seconds in DOUBLE columns: they round-trip `time.time()` exactly on every dialect.
With `database.encryption_key` set, message content, summaries and memory facts are stored as Fernet
tokens (flagged per row, so a key can be introduced on a populated archive) and decrypted on read.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import logging
import re
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import sqlalchemy as sa
from cryptography.fernet import Fernet, InvalidToken, MultiFernet
from sqlalchemy.dialects import mysql, postgresql, sqlite
from sqlalchemy.engine import URL, make_url
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine, create_async_engine
from sqlalchemy.pool import NullPool, StaticPool

from rag_service.domain import Message, SessionMeta
from rag_service.store import ArchiveWrite, outage_as_unavailable

log = logging.getLogger(__name__)

MIGRATIONS = Path(__file__).resolve().parent / "migrations"
# Our own version table, so the archive can share a database with other Alembic-managed schemas.
VERSION_TABLE = "rag_alembic_version"

_ID = sa.String(255)
_TEXT = sa.Text().with_variant(mysql.MEDIUMTEXT(), "mysql", "mariadb")
_PK = sa.BigInteger().with_variant(sa.Integer(), "sqlite")
# utf8mb4 for Chinese and emoji; binary collation because session ids are case-sensitive.
MYSQL_TABLE_ARGS: dict[str, Any] = {
    "mysql_engine": "InnoDB",
    "mysql_charset": "utf8mb4",
    "mysql_collate": "utf8mb4_bin",
}

metadata = sa.MetaData(
    naming_convention={
        "ix": "ix_%(table_name)s_%(column_0_N_name)s",
        "uq": "uq_%(table_name)s_%(column_0_N_name)s",
        "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
        "pk": "pk_%(table_name)s",
    }
)

sessions = sa.Table(
    "sessions",
    metadata,
    sa.Column("session_id", _ID, primary_key=True),
    sa.Column("tenant", _ID, nullable=False),
    sa.Column("user_id", _ID, nullable=False, index=True),
    sa.Column("created_at", sa.Double(), nullable=False),
    sa.Column("updated_at", sa.Double(), nullable=False, index=True),
    sa.Column("summary", _TEXT, nullable=False),
    sa.Column("summary_encrypted", sa.Boolean(), nullable=False),
    sa.Column("summary_tokens", sa.Integer(), nullable=False),
    sa.Column("summarized", sa.Integer(), nullable=False),
    sa.Column("summarized_source_tokens", sa.Integer(), nullable=False),
    sa.Column("topic_start", sa.Integer(), nullable=False),
    **MYSQL_TABLE_ARGS,
)

messages = sa.Table(
    "messages",
    metadata,
    sa.Column("id", _PK, primary_key=True, autoincrement=True),
    sa.Column("session_id", _ID, sa.ForeignKey("sessions.session_id", ondelete="CASCADE"), nullable=False),
    sa.Column("seq", sa.Integer(), nullable=False),
    sa.Column("role", sa.String(16), nullable=False),
    sa.Column("content", _TEXT, nullable=False),
    sa.Column("encrypted", sa.Boolean(), nullable=False),
    sa.Column("token_count", sa.Integer(), nullable=False),
    sa.Column("created_at", sa.Double(), nullable=False),
    sa.UniqueConstraint("session_id", "seq"),
    **MYSQL_TABLE_ARGS,
)

user_memories = sa.Table(
    "user_memories",
    metadata,
    sa.Column("id", _PK, primary_key=True, autoincrement=True),
    sa.Column("user_id", _ID, nullable=False),
    sa.Column("fact", _TEXT, nullable=False),
    sa.Column("fact_hash", sa.String(64), nullable=False),
    sa.Column("encrypted", sa.Boolean(), nullable=False),
    sa.Column("source_session", _ID, nullable=True),
    sa.Column("updated_at", sa.Double(), nullable=False),
    sa.UniqueConstraint("user_id", "fact_hash"),
    **MYSQL_TABLE_ARGS,
)


# Ratings of answers and the receipts of the turns they rate (rag_service/feedback.py), and annotations:
# FAQ pairs written by admins (rag_service/annotations.py). Migration 0002.
turn_receipts = sa.Table(
    "turn_receipts",
    metadata,
    sa.Column("message_id", sa.String(64), primary_key=True),
    sa.Column("tenant", _ID, nullable=False),
    sa.Column("session_id", _ID, nullable=False, index=True),
    sa.Column("question", _TEXT, nullable=False),
    sa.Column("answer", _TEXT, nullable=False),
    sa.Column("rewritten_query", _TEXT, nullable=False),
    sa.Column("mode", sa.String(32), nullable=False),
    sa.Column("turn_kind", sa.String(32), nullable=False),
    sa.Column("intent", sa.String(64), nullable=False),
    sa.Column("sources", _TEXT, nullable=False),
    sa.Column("receipt", _TEXT, nullable=False),
    sa.Column("encrypted", sa.Boolean(), nullable=False),
    sa.Column("created_at", sa.Double(), nullable=False),
    sa.Index("ix_turn_receipts_tenant_created_at", "tenant", "created_at"),
    **MYSQL_TABLE_ARGS,
)

feedback = sa.Table(
    "feedback",
    metadata,
    sa.Column("message_id", sa.String(64), primary_key=True),
    sa.Column("tenant", _ID, nullable=False),
    sa.Column("session_id", _ID, nullable=False),
    sa.Column("rating", sa.String(8), nullable=False),
    sa.Column("reason", sa.String(64), nullable=False),
    sa.Column("comment", _TEXT, nullable=False),
    sa.Column("encrypted", sa.Boolean(), nullable=False),
    sa.Column("created_at", sa.Double(), nullable=False),
    sa.Column("updated_at", sa.Double(), nullable=False),
    sa.Index("ix_feedback_tenant_updated_at", "tenant", "updated_at"),
    **MYSQL_TABLE_ARGS,
)


annotation_rows = sa.Table(
    "annotations",
    metadata,
    sa.Column("id", sa.String(64), primary_key=True),
    sa.Column("tenant", _ID, nullable=False, index=True),
    sa.Column("question", _TEXT, nullable=False),
    sa.Column("answer", _TEXT, nullable=False),
    sa.Column("from_message_id", sa.String(64), nullable=True),
    sa.Column("created_at", sa.Double(), nullable=False),
    sa.Column("updated_at", sa.Double(), nullable=False),
    **MYSQL_TABLE_ARGS,
)


class ArchiveError(RuntimeError):
    pass


# The database cannot be reached or dropped the connection: a 503 to the caller, not a 500.
_available = outage_as_unavailable(
    "archive", (sa.exc.OperationalError, sa.exc.InterfaceError, sa.exc.TimeoutError, OSError, TimeoutError)
)


@dataclass
class _Tail:
    """What a session holds at the seqs a write touches: identities (role, content, created_at) by seq."""

    last: int = -1
    by_seq: dict[int, tuple[str, str, float]] = field(default_factory=dict)
    identities: set[tuple[str, str, float]] = field(default_factory=set)


@dataclass(frozen=True, slots=True)
class UserMemory:
    id: int
    user_id: str
    fact: str
    source_session: str | None
    updated_at: float


# -- URLs and engines ---------------------------------------------------------------------------

_ASYNC_DRIVERS = {"sqlite": "aiosqlite", "postgresql": "asyncpg", "mysql": "aiomysql", "mariadb": "aiomysql"}


def normalize_url(url: str | URL) -> URL:
    """An async driver for each backend (`postgresql://` -> asyncpg ...), utf8mb4 for MySQL, and the
    directory of a SQLite file created."""
    u = make_url(url)
    backend = u.get_backend_name()
    if backend not in _ASYNC_DRIVERS:
        raise ArchiveError(f"unsupported database {backend!r}: use sqlite, postgresql or mysql/mariadb")
    if u.get_driver_name() in ("", "pysqlite", "psycopg2", "psycopg", "pymysql", "mysqldb"):
        u = u.set(drivername=f"{backend}+{_ASYNC_DRIVERS[backend]}")
    if backend in ("mysql", "mariadb") and "charset" not in u.query:
        u = u.update_query_dict({"charset": "utf8mb4"})
    if backend == "sqlite" and not _sqlite_in_memory(u):
        assert u.database is not None
        Path(u.database).expanduser().parent.mkdir(parents=True, exist_ok=True)
    return u


def _sqlite_in_memory(u: URL) -> bool:
    return u.get_backend_name() == "sqlite" and u.database in (None, "", ":memory:")


def make_engine(url: str | URL) -> AsyncEngine:
    u = normalize_url(url)
    if u.get_backend_name() != "sqlite":
        return create_async_engine(u, pool_pre_ping=True, pool_recycle=1800)
    if _sqlite_in_memory(u):
        engine = create_async_engine(u, poolclass=StaticPool)
    else:
        # A connection per use: no idle worker threads, and the archive is written in batches anyway.
        engine = create_async_engine(u, poolclass=NullPool, connect_args={"timeout": 30})

    @sa.event.listens_for(engine.sync_engine, "connect")
    def _pragmas(dbapi_connection: Any, _record: Any) -> None:
        cursor = dbapi_connection.cursor()
        cursor.execute("PRAGMA foreign_keys=ON")
        cursor.execute("PRAGMA busy_timeout=30000")
        if not _sqlite_in_memory(u):
            cursor.execute("PRAGMA journal_mode=WAL")
        cursor.close()

    return engine


# -- migrations ---------------------------------------------------------------------------------


def alembic_config(url: str | URL) -> Any:
    from alembic.config import Config

    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS))
    cfg.attributes["url"] = normalize_url(url).render_as_string(hide_password=False)
    return cfg


def migrate(url: str | URL, revision: str = "head") -> None:
    """`alembic upgrade head` on the archive (idempotent). Safe to call from inside an event loop: the
    migration runs its own loop in a worker thread. A concurrent migrator (another worker starting at
    the same time) is tolerated by one retry."""
    if _sqlite_in_memory(make_url(url)):
        return  # created by the Archive itself
    from alembic import command

    def upgrade() -> None:
        try:
            command.upgrade(alembic_config(url), revision)
        except Exception as exc:
            log.warning("archive migration failed, retrying once (a concurrent migrator?): %s", exc)
            time.sleep(1.0)
            command.upgrade(alembic_config(url), revision)

    try:
        asyncio.get_running_loop()
    except RuntimeError:
        upgrade()
        return
    errors: list[BaseException] = []

    def run() -> None:
        try:
            upgrade()
        except BaseException as exc:
            errors.append(exc)

    worker = threading.Thread(target=run, name="archive-migrate")
    worker.start()
    worker.join()
    if errors:
        raise errors[0]


async def migrate_async(url: str | URL, revision: str = "head") -> None:
    await asyncio.to_thread(migrate, url, revision)


# -- encryption ---------------------------------------------------------------------------------


class Cipher:
    """Fernet with rotation: the first key encrypts, every key decrypts."""

    def __init__(self, keys: str) -> None:
        parts = [k.strip() for k in keys.split(",") if k.strip()]
        if not parts:
            raise ArchiveError("empty encryption key")
        self._fernet = MultiFernet([Fernet(k) for k in parts])
        # Memory facts are deduplicated by a keyed hash: equal facts collide, plaintext is not derivable.
        self._hash_key = hashlib.sha256(b"rag-fact-hash:" + parts[0].encode()).digest()

    def encrypt(self, text: str) -> str:
        return self._fernet.encrypt(text.encode("utf-8")).decode("ascii")

    def decrypt(self, token: str) -> str:
        try:
            return self._fernet.decrypt(token.encode("ascii")).decode("utf-8")
        except InvalidToken as exc:
            raise ArchiveError("an archived value cannot be decrypted with database.encryption_key") from exc

    def fact_hash(self, fact: str) -> str:
        return hmac.new(self._hash_key, fact.encode("utf-8"), hashlib.sha256).hexdigest()


def _normalize_fact(fact: str) -> str:
    return re.sub(r"\s+", " ", fact).strip()


# -- the archive --------------------------------------------------------------------------------


class Archive:
    def __init__(self, url: str | URL, encryption_key: str | None = None) -> None:
        self.url = normalize_url(url)
        self.engine = make_engine(self.url)
        self.dialect = self.url.get_backend_name()
        self.cipher = Cipher(encryption_key) if encryption_key else None
        self._ready = not _sqlite_in_memory(self.url)
        self._ready_lock = asyncio.Lock()

    async def _connect_ready(self) -> None:
        if self._ready:
            return
        async with self._ready_lock:
            if not self._ready:
                async with self.engine.begin() as conn:
                    await conn.run_sync(metadata.create_all)
                self._ready = True

    # -- dialect helpers ----------------------------------------------------------------------

    def _insert(self, table: sa.Table) -> Any:
        if self.dialect == "postgresql":
            return postgresql.insert(table)
        if self.dialect == "sqlite":
            return sqlite.insert(table)
        return mysql.insert(table)

    def _upsert(self, table: sa.Table, keys: Sequence[str], update: Sequence[str]) -> Any:
        stmt = self._insert(table)
        if self.dialect in ("postgresql", "sqlite"):
            return stmt.on_conflict_do_update(index_elements=list(keys), set_={c: stmt.excluded[c] for c in update})
        return stmt.on_duplicate_key_update({c: stmt.inserted[c] for c in update})

    def _seal(self, text: str) -> tuple[str, bool]:
        return (self.cipher.encrypt(text), True) if self.cipher and text else (text, False)

    def _open(self, text: str, encrypted: bool) -> str:
        if not encrypted:
            return text
        if self.cipher is None:
            raise ArchiveError("the archive holds encrypted rows but database.encryption_key is not set")
        return self.cipher.decrypt(text)

    def _session_row(self, meta: SessionMeta, now: float) -> dict[str, Any]:
        summary, encrypted = self._seal(meta.summary)
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
        }

    def _message_rows(self, session_id: str, items: Sequence[tuple[int, Message]]) -> list[dict[str, Any]]:
        rows = []
        for seq, m in items:
            content, encrypted = self._seal(m.content)
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

    @_available
    async def save_meta(self, meta: SessionMeta) -> None:
        await self._connect_ready()
        async with self.engine.begin() as conn:
            await self._save_meta(conn, [meta], time.time())

    async def save_messages(self, session_id: str, start_seq: int, items: Sequence[Message]) -> set[str]:
        """Idempotent: messages stored already (at any seq) are skipped."""
        return await self.write_batch([ArchiveWrite(session_id, None, tuple(enumerate(items, start_seq)))])

    @_available
    async def write_batch(self, writes: Sequence[ArchiveWrite]) -> set[str]:
        """One transaction: metas upserted, rows made to exist, messages placed (see `_place`). Returns the
        sessions where a message's seq was held by a different message: those were written after the
        session's last seq, and the live copy, which numbered them differently, is stale."""
        writes = [w for w in writes if w.meta is not None or w.messages]
        if not writes:
            return set()
        await self._connect_ready()
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
                    await conn.execute(sa.insert(messages), rows)
        return conflicted

    async def _stored_tails(self, conn: AsyncConnection, writes: Sequence[ArchiveWrite]) -> dict[str, _Tail]:
        """Per session: its highest stored seq and the stored messages from the write's first seq on."""
        ids = [w.session_id for w in writes]
        tails = {sid: _Tail() for sid in ids}
        top = sa.select(messages.c.session_id, sa.func.max(messages.c.seq)).where(messages.c.session_id.in_(ids))
        for sid, seq in (await conn.execute(top.group_by(messages.c.session_id))).all():
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
                identity = (r.role, self._open(r.content, r.encrypted), r.created_at)
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

    @_available
    async def max_seqs(self, session_ids: Sequence[str]) -> dict[str, int]:
        if not session_ids:
            return {}
        await self._connect_ready()
        stmt = (
            sa.select(messages.c.session_id, sa.func.max(messages.c.seq))
            .where(messages.c.session_id.in_(list(session_ids)))
            .group_by(messages.c.session_id)
        )
        async with self.engine.connect() as conn:
            return {sid: int(seq) for sid, seq in (await conn.execute(stmt)).all()}

    @_available
    async def load(self, session_id: str) -> tuple[SessionMeta, list[Message]] | None:
        """The session's meta (message_count = the archived messages) and messages in order."""
        await self._connect_ready()
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
        items = [Message(r.role, self._open(r.content, r.encrypted), r.token_count, r.created_at) for r in rows]
        n = len(items)
        meta = SessionMeta(
            session_id=row.session_id,
            created_at=row.created_at,
            tenant=row.tenant,
            user=row.user_id,
            message_count=n,
            summary=self._open(row.summary, row.summary_encrypted),
            summary_tokens=row.summary_tokens,
            summarized=min(row.summarized, n),
            summarized_source_tokens=row.summarized_source_tokens,
            topic_start=min(row.topic_start, n),
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

    @_available
    async def delete(self, session_id: str) -> bool:
        await self._connect_ready()
        async with self.engine.begin() as conn:
            await conn.execute(sa.delete(messages).where(messages.c.session_id == session_id))
            result = await conn.execute(sa.delete(sessions).where(sessions.c.session_id == session_id))
        return bool(result.rowcount)

    @_available
    async def session_ids(self, user_id: str | None = None) -> list[str]:
        await self._connect_ready()
        stmt = sa.select(sessions.c.session_id).order_by(sessions.c.updated_at)
        if user_id is not None:
            stmt = stmt.where(sessions.c.user_id == user_id)
        async with self.engine.connect() as conn:
            return [r[0] for r in (await conn.execute(stmt)).all()]

    @_available
    async def list_sessions(self, tenant: str, limit: int, offset: int) -> list[dict[str, Any]]:
        """A tenant's sessions, most recently active first (an admin's view: ids, users, times)."""
        await self._connect_ready()
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

    # -- user memories --------------------------------------------------------------------------

    def _fact_hash(self, fact: str) -> str:
        if self.cipher is not None:
            return self.cipher.fact_hash(fact)
        return hashlib.sha256(fact.encode("utf-8")).hexdigest()

    @_available
    async def add_memory(self, user_id: str, fact: str, source_session: str | None = None) -> UserMemory:
        """Stores a fact about a user; the same fact again only refreshes updated_at and source_session."""
        fact = _normalize_fact(fact)
        if not fact:
            raise ValueError("empty fact")
        await self._connect_ready()
        digest, now = self._fact_hash(fact), time.time()
        stored, encrypted = self._seal(fact)
        row = {
            "user_id": user_id,
            "fact": stored,
            "fact_hash": digest,
            "encrypted": encrypted,
            "source_session": source_session,
            "updated_at": now,
        }
        async with self.engine.begin() as conn:
            await conn.execute(
                self._upsert(user_memories, ["user_id", "fact_hash"], ["source_session", "updated_at"]), [row]
            )
            found = (
                await conn.execute(
                    sa.select(user_memories.c.id).where(
                        user_memories.c.user_id == user_id, user_memories.c.fact_hash == digest
                    )
                )
            ).scalar_one()
        return UserMemory(int(found), user_id, fact, source_session, now)

    @_available
    async def list_memories(self, user_id: str, limit: int | None = None) -> list[UserMemory]:
        """Newest first."""
        await self._connect_ready()
        stmt = (
            sa.select(user_memories)
            .where(user_memories.c.user_id == user_id)
            .order_by(user_memories.c.updated_at.desc(), user_memories.c.id.desc())
        )
        if limit is not None:
            stmt = stmt.limit(limit)
        async with self.engine.connect() as conn:
            rows = (await conn.execute(stmt)).all()
        return [
            UserMemory(int(r.id), r.user_id, self._open(r.fact, r.encrypted), r.source_session, r.updated_at)
            for r in rows
        ]

    @_available
    async def delete_memory(self, user_id: str, memory_id: int) -> bool:
        await self._connect_ready()
        async with self.engine.begin() as conn:
            result = await conn.execute(
                sa.delete(user_memories).where(user_memories.c.user_id == user_id, user_memories.c.id == memory_id)
            )
        return bool(result.rowcount)

    @_available
    async def delete_memories(self, user_id: str) -> int:
        """Forgets everything about a user; returns how many facts were deleted."""
        await self._connect_ready()
        async with self.engine.begin() as conn:
            result = await conn.execute(sa.delete(user_memories).where(user_memories.c.user_id == user_id))
        return int(result.rowcount)

    # -- lifecycle ------------------------------------------------------------------------------

    @_available
    async def ping(self) -> None:
        async with self.engine.connect() as conn:
            await conn.execute(sa.text("SELECT 1"))

    async def close(self) -> None:
        await self.engine.dispose()
