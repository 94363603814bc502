"""The archive's schema: the one definition of its tables (SQLAlchemy Core).

The migrations in ./migrations are generated from this module, not written by hand. After a change
here, from the repository root, with a scratch database migrated to the current head (PostgreSQL: on
SQLite autogenerate writes batch operations, which every dialect runs but are harder to read):

    export RAG_DATABASE__URL=postgresql://postgres@127.0.0.1:5432/scratch
    .venv/bin/alembic -c rag_service/sessions/archive/migrations/alembic.ini upgrade head
    .venv/bin/alembic -c rag_service/sessions/archive/migrations/alembic.ini \
        revision --autogenerate --rev-id 0002 -m "What changed"

(0001 was made the same way, against an empty database.) The file is formatted by ruff on the way out
(alembic.ini's post-write hooks). Read it before committing: autogenerate does not see every change (a
renamed column looks like a drop and an add). tests/test_archive.py checks, on every dialect, that the
migrated database and this module agree.

Times are epoch seconds in DOUBLE columns: they round-trip `time.time()` exactly on every dialect.
"""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects import mysql

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
    # The task state (rag_service.intents), migration 0002; NULL in rows written before it (MySQL gives
    # TEXT columns no default).
    sa.Column("task", _TEXT, nullable=True),
    sa.Column("task_encrypted", sa.Boolean(), nullable=True),
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
# FAQ pairs written by admins (rag_service/annotations.py). Migration 0003.
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
