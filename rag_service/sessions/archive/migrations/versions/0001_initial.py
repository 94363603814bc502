"""Sessions, messages and user memories.

Revision ID: 0001
Revises:
Create Date: 2025-03-01
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import mysql

revision: str = "0001"
down_revision: str | None = None
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# Frozen copies of the column types (a migration never imports the live models).
ID = sa.String(255)
TEXT = sa.Text().with_variant(mysql.MEDIUMTEXT(), "mysql", "mariadb")
PK = sa.BigInteger().with_variant(sa.Integer(), "sqlite")
MYSQL: dict[str, Any] = {"mysql_engine": "InnoDB", "mysql_charset": "utf8mb4", "mysql_collate": "utf8mb4_bin"}


def upgrade() -> None:
    op.create_table(
        "sessions",
        sa.Column("session_id", ID, nullable=False),
        sa.Column("tenant", ID, nullable=False),
        sa.Column("user_id", ID, nullable=False),
        sa.Column("created_at", sa.Double(), nullable=False),
        sa.Column("updated_at", sa.Double(), nullable=False),
        sa.Column("summary", TEXT, nullable=False),
        sa.Column("summary_encrypted", sa.Boolean(), nullable=False),
        sa.Column("summary_tokens", sa.Integer(), nullable=False),
        sa.Column("summarized", sa.Integer(), nullable=False),
        sa.Column("summarized_source_tokens", sa.Integer(), nullable=False),
        sa.Column("topic_start", sa.Integer(), nullable=False),
        sa.PrimaryKeyConstraint("session_id", name="pk_sessions"),
        **MYSQL,
    )
    op.create_index("ix_sessions_user_id", "sessions", ["user_id"])
    op.create_index("ix_sessions_updated_at", "sessions", ["updated_at"])
    op.create_table(
        "messages",
        sa.Column("id", PK, autoincrement=True, nullable=False),
        sa.Column("session_id", ID, nullable=False),
        sa.Column("seq", sa.Integer(), nullable=False),
        sa.Column("role", sa.String(16), nullable=False),
        sa.Column("content", TEXT, nullable=False),
        sa.Column("encrypted", sa.Boolean(), nullable=False),
        sa.Column("token_count", sa.Integer(), nullable=False),
        sa.Column("created_at", sa.Double(), nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_messages"),
        sa.ForeignKeyConstraint(
            ["session_id"], ["sessions.session_id"], name="fk_messages_session_id_sessions", ondelete="CASCADE"
        ),
        sa.UniqueConstraint("session_id", "seq", name="uq_messages_session_id_seq"),
        **MYSQL,
    )
    op.create_table(
        "user_memories",
        sa.Column("id", PK, autoincrement=True, nullable=False),
        sa.Column("user_id", ID, nullable=False),
        sa.Column("fact", TEXT, nullable=False),
        sa.Column("fact_hash", sa.String(64), nullable=False),
        sa.Column("encrypted", sa.Boolean(), nullable=False),
        sa.Column("source_session", ID, nullable=True),
        sa.Column("updated_at", sa.Double(), nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_user_memories"),
        sa.UniqueConstraint("user_id", "fact_hash", name="uq_user_memories_user_id_fact_hash"),
        **MYSQL,
    )


def downgrade() -> None:
    op.drop_table("user_memories")
    op.drop_table("messages")
    op.drop_index("ix_sessions_updated_at", table_name="sessions")
    op.drop_index("ix_sessions_user_id", table_name="sessions")
    op.drop_table("sessions")
