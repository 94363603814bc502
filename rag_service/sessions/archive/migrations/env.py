"""Alembic environment for the archive.

Programmatic use (rag_service.sessions.archive.migrate) passes the URL in `config.attributes["url"]`;
with the bundled alembic.ini (`alembic -c rag_service/sessions/archive/migrations/alembic.ini upgrade
head`) the URL comes from RAG_DATABASE__URL or the settings. Migrations run on the async engine in their
own event loop. `target_metadata` is the archive's schema module, so `alembic revision --autogenerate`
writes a migration from it (see rag_service/sessions/archive/schema.py).
"""

from __future__ import annotations

import asyncio
from typing import Any

from alembic import context
from sqlalchemy.engine import Connection

from rag_service.sessions.archive.engine import make_engine, normalize_url
from rag_service.sessions.archive.schema import VERSION_TABLE, metadata

config = context.config


def _url() -> str:
    url = config.attributes.get("url") or config.get_main_option("sqlalchemy.url")
    if not url:
        from rag_core.settings import Settings

        url = Settings().database.url
    return normalize_url(url).render_as_string(hide_password=False)


def include_name(name: str | None, type_: str, parent_names: Any) -> bool:
    """Autogenerate looks at the archive's own tables only (the database may hold others)."""
    return type_ != "table" or name in metadata.tables


def _configure(**kwargs: Any) -> None:
    context.configure(
        target_metadata=metadata, version_table=VERSION_TABLE, include_name=include_name, compare_type=True, **kwargs
    )


def run_offline() -> None:
    _configure(url=_url(), literal_binds=True, dialect_opts={"paramstyle": "named"})
    with context.begin_transaction():
        context.run_migrations()


def _run(connection: Connection) -> None:
    _configure(connection=connection, render_as_batch=connection.dialect.name == "sqlite")
    with context.begin_transaction():
        context.run_migrations()


async def _run_async() -> None:
    engine = make_engine(_url())
    try:
        async with engine.connect() as conn:
            await conn.run_sync(_run)
            await conn.commit()
    finally:
        await engine.dispose()


def run_online() -> None:
    connection = config.attributes.get("connection")
    if connection is not None:  # a sync connection handed in (AsyncConnection.run_sync)
        _run(connection)
    else:
        asyncio.run(_run_async())


if context.is_offline_mode():
    run_offline()
else:
    run_online()
