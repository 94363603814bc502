"""The SQL archive: sessions, their messages and user memories (SQLAlchemy 2, async), on SQLite,
PostgreSQL or MySQL/MariaDB.

    schema.py        the tables: the one definition (migrations/ is generated from it)
    engine.py        URLs (an async driver for each backend) and engines
    migrate.py       `alembic upgrade head` from the service, safe inside an event loop
    crypto.py        encryption at rest (Fernet, key rotation)
    session_repo.py  sessions and messages: idempotent batched writes, restore reads
    memory_repo.py   user memories
"""

from __future__ import annotations

from rag_service.sessions.archive.crypto import Cipher
from rag_service.sessions.archive.engine import ArchiveError, normalize_url
from rag_service.sessions.archive.memory_repo import MemoryRepository, StoredFact
from rag_service.sessions.archive.migrate import migrate, migrate_async
from rag_service.sessions.archive.schema import VERSION_TABLE, metadata
from rag_service.sessions.archive.session_repo import SessionRepository

__all__ = [
    "VERSION_TABLE",
    "Archive",
    "ArchiveError",
    "Cipher",
    "StoredFact",
    "metadata",
    "migrate",
    "migrate_async",
    "normalize_url",
]


class Archive(SessionRepository, MemoryRepository):
    """Both repositories over one engine (and one cipher): what the service opens at `database.url`."""
