"""What the archive's repositories share: one engine, the dialect's upsert, the cipher, and outages
reported as StoreUnavailable."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects import mysql, postgresql, sqlite
from sqlalchemy.engine import URL

from rag_service.sessions.archive.crypto import Cipher
from rag_service.sessions.archive.engine import make_engine, normalize_url, sqlite_in_memory
from rag_service.sessions.archive.schema import metadata
from rag_service.sessions.interface import outage_as_unavailable

# The database cannot be reached or dropped the connection: a 503 to the caller, not a 500.
available = outage_as_unavailable(
    "archive", (sa.exc.OperationalError, sa.exc.InterfaceError, sa.exc.TimeoutError, OSError, TimeoutError)
)


class Database:
    def __init__(self, url: str | URL, encryption_key: str | None = None) -> None:
        self.url = normalize_url(url)
        self.engine = make_engine(self.url)
        self.dialect = self.url.get_backend_name()
        self.cipher = Cipher(encryption_key) if encryption_key else None
        self._ready = not sqlite_in_memory(self.url)
        self._ready_lock = asyncio.Lock()
        self._upserts: dict[tuple[sa.Table, tuple[str, ...], tuple[str, ...]], Any] = {}

    async def connect_ready(self) -> None:
        """Public because the feedback and annotation repositories share this archive's engine and must
        wait, as the session repositories do, for an in-memory database's tables."""
        if self._ready:
            return
        async with self._ready_lock:
            if not self._ready:
                async with self.engine.begin() as conn:
                    await conn.run_sync(metadata.create_all)
                self._ready = True

    def _insert(self, table: sa.Table) -> Any:
        if self.dialect == "postgresql":
            return postgresql.insert(table)
        if self.dialect == "sqlite":
            return sqlite.insert(table)
        return mysql.insert(table)

    def _upsert(self, table: sa.Table, keys: Sequence[str], update: Sequence[str]) -> Any:
        # Built once per shape (a statement is immutable: `.values()` makes a new one); building it cost
        # more than a turn receipt's own work.
        shape = (table, tuple(keys), tuple(update))
        stmt = self._upserts.get(shape)
        if stmt is None:
            stmt = self._upserts[shape] = self._build_upsert(table, keys, update)
        return stmt

    def _build_upsert(self, table: sa.Table, keys: Sequence[str], update: Sequence[str]) -> Any:
        stmt = self._insert(table)
        if self.dialect in ("postgresql", "sqlite"):
            return stmt.on_conflict_do_update(index_elements=list(keys), set_={c: stmt.excluded[c] for c in update})
        return stmt.on_duplicate_key_update({c: stmt.inserted[c] for c in update})

    @available
    async def ping(self) -> None:
        async with self.engine.connect() as conn:
            await conn.execute(sa.text("SELECT 1"))

    async def close(self) -> None:
        await self.engine.dispose()
