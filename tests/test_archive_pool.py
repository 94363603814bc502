"""A file SQLite archive keeps two connections: a write-behind flush and a batch of turn receipts that
overlap do not open (and then close) a connection each time."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import sqlalchemy as sa

from rag_service.sessions.archive.engine import make_engine


def test_two_overlapping_users_reuse_kept_connections(tmp_path: Path) -> None:
    async def run() -> int:
        engine = make_engine(f"sqlite+aiosqlite:///{tmp_path}/archive.db")
        opened = 0

        @sa.event.listens_for(engine.sync_engine, "connect")
        def _count(_conn: Any, _record: Any) -> None:
            nonlocal opened
            opened += 1

        try:
            for _ in range(3):
                async with engine.connect() as a, engine.connect() as b:
                    await a.execute(sa.text("SELECT 1"))
                    await b.execute(sa.text("SELECT 1"))
        finally:
            await engine.dispose()
        return opened

    assert asyncio.run(run()) == 2
