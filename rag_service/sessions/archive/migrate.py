"""Runs the archive's Alembic migrations (./migrations) from the service: at start-up and in tests.

The schema is created by these migrations, never by `create_all` (except for an in-memory SQLite
database, which no migration run could reach: the Archive creates that one itself).
"""

from __future__ import annotations

import asyncio
import logging
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from sqlalchemy.engine import URL, make_url

from rag_service.sessions.archive.engine import normalize_url, sqlite_in_memory

log = logging.getLogger(__name__)

MIGRATIONS = Path(__file__).resolve().parent / "migrations"


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
    if sqlite_in_memory(make_url(url)):
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
    # env.py runs the migration on its own event loop, which cannot start inside a running one.
    with ThreadPoolExecutor(1, thread_name_prefix="archive-migrate") as worker:
        worker.submit(upgrade).result()


async def migrate_async(url: str | URL, revision: str = "head") -> None:
    await asyncio.to_thread(migrate, url, revision)
