"""Database URLs and engines: SQLite (aiosqlite, the embedded default), PostgreSQL (asyncpg) and
MySQL/MariaDB (aiomysql), whatever driver a configured URL names."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import URL, make_url
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine
from sqlalchemy.pool import AsyncAdaptedQueuePool, StaticPool


class ArchiveError(RuntimeError):
    pass


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
    if backend == "sqlite" and not sqlite_in_memory(u):
        assert u.database is not None
        Path(u.database).expanduser().parent.mkdir(parents=True, exist_ok=True)
    return u


class RollbackOnClose(sqlite3.Connection):
    """A SQLite connection that rolls back before it closes.

    `sqlite3.Connection.close()` leaves a connection whose statement is still held by a cursor (a SELECT
    with rows not fetched, an `executemany`) open as a zombie (`sqlite3_close_v2`): its transaction, and
    with it the database's write lock, lasts until that cursor is garbage-collected. SQLAlchemy closes a
    connection that way when a task is cancelled in the middle of a transaction (it invalidates it, no
    rollback), and the cancelled task's exception keeps the cursor alive: every other writer then waited
    out its busy timeout and failed with "database is locked". A rollback resets those statements and
    ends the transaction at once (what the close would have done anyway: nothing of it was committed)."""

    def close(self) -> None:
        try:
            if self.in_transaction:
                self.rollback()
        except sqlite3.Error:  # closed already, or the rollback failed: the close is all there is to do
            pass
        super().close()


def sqlite_in_memory(u: URL) -> bool:
    return u.get_backend_name() == "sqlite" and u.database in (None, "", ":memory:")


def make_engine(url: str | URL) -> AsyncEngine:
    u = normalize_url(url)
    if u.get_backend_name() != "sqlite":
        return create_async_engine(u, pool_pre_ping=True, pool_recycle=1800)
    if sqlite_in_memory(u):
        engine = create_async_engine(u, poolclass=StaticPool)
    else:
        # Two idle connections kept (their workers are daemon threads: SQLAlchemy's aiosqlite adapter marks
        # them so, and an engine nobody disposed does not hold up interpreter exit); more are opened for
        # concurrent use (no limit, as before) and closed when returned. Opening one per use (NullPool)
        # was half of every turn receipt's CPU: a thread, the connection and the pragmas, then their
        # teardown (~0.6 ms). Two, because the write-behind's flush and a batch of turn receipts often
        # overlap: with one kept, 11 of the 14 connections 60 benchmark turns opened were such overlaps.
        # aiosqlite makes each call's future on the running loop, so a kept connection also serves an
        # engine used from another loop later (tests, CLIs).
        engine = create_async_engine(
            u,
            poolclass=AsyncAdaptedQueuePool,
            pool_size=2,
            max_overflow=-1,
            connect_args={"timeout": 30, "factory": RollbackOnClose},
        )

    @sa.event.listens_for(engine.sync_engine, "connect")
    def _pragmas(dbapi_connection: Any, _record: Any) -> None:
        cursor = dbapi_connection.cursor()
        cursor.execute("PRAGMA foreign_keys=ON")
        cursor.execute("PRAGMA busy_timeout=30000")
        if not sqlite_in_memory(u):
            cursor.execute("PRAGMA journal_mode=WAL")
        cursor.close()

    return engine
