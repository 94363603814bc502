"""Turn receipts, answer ratings and annotations (the knowledge base learning from its conversations).

Revision ID: 0002
Revises: 0001
Create Date: 2026-12-01
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import mysql

revision: str = "0002"
down_revision: str | None = "0001"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# Frozen copies of the column types (a migration never imports the live models).
ID = sa.String(255)
KEY = sa.String(64)
TEXT = sa.Text().with_variant(mysql.MEDIUMTEXT(), "mysql", "mariadb")
MYSQL: dict[str, Any] = {"mysql_engine": "InnoDB", "mysql_charset": "utf8mb4", "mysql_collate": "utf8mb4_bin"}


def upgrade() -> None:
    op.create_table(
        "turn_receipts",
        sa.Column("message_id", KEY, nullable=False),
        sa.Column("tenant", ID, nullable=False),
        sa.Column("session_id", ID, nullable=False),
        sa.Column("question", TEXT, nullable=False),
        sa.Column("answer", TEXT, nullable=False),
        sa.Column("rewritten_query", TEXT, nullable=False),
        sa.Column("mode", sa.String(32), nullable=False),
        sa.Column("turn_kind", sa.String(32), nullable=False),
        sa.Column("intent", sa.String(64), nullable=False),
        sa.Column("sources", TEXT, nullable=False),
        sa.Column("receipt", TEXT, nullable=False),
        sa.Column("encrypted", sa.Boolean(), nullable=False),
        sa.Column("created_at", sa.Double(), nullable=False),
        sa.PrimaryKeyConstraint("message_id", name="pk_turn_receipts"),
        **MYSQL,
    )
    op.create_index("ix_turn_receipts_session_id", "turn_receipts", ["session_id"])
    op.create_index("ix_turn_receipts_tenant_created_at", "turn_receipts", ["tenant", "created_at"])
    op.create_table(
        "feedback",
        sa.Column("message_id", KEY, nullable=False),
        sa.Column("tenant", ID, nullable=False),
        sa.Column("session_id", ID, nullable=False),
        sa.Column("rating", sa.String(8), nullable=False),
        sa.Column("reason", sa.String(64), nullable=False),
        sa.Column("comment", TEXT, nullable=False),
        sa.Column("encrypted", sa.Boolean(), nullable=False),
        sa.Column("created_at", sa.Double(), nullable=False),
        sa.Column("updated_at", sa.Double(), nullable=False),
        sa.PrimaryKeyConstraint("message_id", name="pk_feedback"),
        **MYSQL,
    )
    op.create_index("ix_feedback_tenant_updated_at", "feedback", ["tenant", "updated_at"])
    op.create_table(
        "annotations",
        sa.Column("id", KEY, nullable=False),
        sa.Column("tenant", ID, nullable=False),
        sa.Column("question", TEXT, nullable=False),
        sa.Column("answer", TEXT, nullable=False),
        sa.Column("from_message_id", KEY, nullable=True),
        sa.Column("created_at", sa.Double(), nullable=False),
        sa.Column("updated_at", sa.Double(), nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_annotations"),
        **MYSQL,
    )
    op.create_index("ix_annotations_tenant", "annotations", ["tenant"])


def downgrade() -> None:
    op.drop_index("ix_annotations_tenant", table_name="annotations")
    op.drop_table("annotations")
    op.drop_index("ix_feedback_tenant_updated_at", table_name="feedback")
    op.drop_table("feedback")
    op.drop_index("ix_turn_receipts_tenant_created_at", table_name="turn_receipts")
    op.drop_index("ix_turn_receipts_session_id", table_name="turn_receipts")
    op.drop_table("turn_receipts")
