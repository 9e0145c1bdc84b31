"""incremental refresh: consumed positions per MV and base table; candidates of a run

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-23

``smv_consumed_positions`` holds, per object and base table, the position the object last
consumed (a pinned base table as JSON: Iceberg snapshot and files, Parquet listing); an
incremental refresh reads each base's change log from there. ``smv_task_runs.candidates``
records the refresh techniques AUTO weighed, with estimates and reasons.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "smv_consumed_positions",
        sa.Column("object_id", sa.Integer(), sa.ForeignKey("smv_objects.id", ondelete="CASCADE"), primary_key=True),
        sa.Column("base_table", sa.String(260), primary_key=True),
        sa.Column("position", sa.JSON(), nullable=False),
        sa.Column("run_id", sa.BigInteger(), nullable=True),
    )
    # Plain ALTER TABLE, never a batch copy: rebuilding smv_task_runs on SQLite would drop
    # it, and its progress rows with it (ON DELETE CASCADE).
    op.add_column("smv_task_runs", sa.Column("candidates", sa.JSON(), nullable=True))


def downgrade() -> None:
    op.execute("ALTER TABLE smv_task_runs DROP COLUMN candidates")  # SQLite 3.35+ and PostgreSQL
    op.drop_table("smv_consumed_positions")
