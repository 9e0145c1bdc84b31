"""a run's estimate beside what it read

Revision ID: 0006
Revises: 0005
Create Date: 2026-11-26

``smv_task_runs.estimate_bytes`` is the chosen refresh technique's estimate of the bytes it
reads (as weighed in ``candidates``); ``bytes_read`` is what the run's Spark jobs read, by
Spark's input metrics. Side by side they show whether AUTO's cost model was right.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None


def upgrade() -> None:
    # Plain ALTER TABLE, never a batch copy: rebuilding smv_task_runs on SQLite would drop
    # its progress rows (ON DELETE CASCADE).
    op.add_column("smv_task_runs", sa.Column("estimate_bytes", sa.BigInteger(), nullable=True))
    op.add_column("smv_task_runs", sa.Column("bytes_read", sa.BigInteger(), nullable=True))


def downgrade() -> None:
    op.execute("ALTER TABLE smv_task_runs DROP COLUMN bytes_read")  # SQLite 3.35+ and PostgreSQL
    op.execute("ALTER TABLE smv_task_runs DROP COLUMN estimate_bytes")
