"""Sessions keep their task state (intents and slots).

Revision ID: 0002
Revises: 0001
Create Date: 2026-12-01
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import mysql

revision: str = "0002"
down_revision: str | None = "0001"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

TEXT = sa.Text().with_variant(mysql.MEDIUMTEXT(), "mysql", "mariadb")


def upgrade() -> None:
    # Nullable: MySQL gives TEXT columns no default, and existing sessions have no task.
    with op.batch_alter_table("sessions") as batch:
        batch.add_column(sa.Column("task", TEXT, nullable=True))
        batch.add_column(sa.Column("task_encrypted", sa.Boolean(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("sessions") as batch:
        batch.drop_column("task_encrypted")
        batch.drop_column("task")
