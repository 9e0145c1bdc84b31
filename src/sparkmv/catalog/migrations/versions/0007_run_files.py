"""the data files a run wrote and the ones it replaced

Revision ID: 0007
Revises: 0006
Create Date: 2026-11-27

``smv_task_runs.files_written`` counts the data files a run's chunks staged (and its publish
committed); ``files_replaced`` the data files its commits removed from the table (Iceberg's
``deleted-data-files`` of the snapshots tagged with the run). Beside ``rows_written`` they show
how much of an MV a refresh rewrote: an incremental refresh rewrites only the files holding
touched keys. NULL for runs that committed nothing (SKIPPED, failed) and runs stored before.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None


def upgrade() -> None:
    # Plain ALTER TABLE, never a batch copy: rebuilding smv_task_runs on SQLite would drop
    # its progress rows (ON DELETE CASCADE).
    op.add_column("smv_task_runs", sa.Column("files_written", sa.Integer(), nullable=True))
    op.add_column("smv_task_runs", sa.Column("files_replaced", sa.Integer(), nullable=True))


def downgrade() -> None:
    op.execute("ALTER TABLE smv_task_runs DROP COLUMN files_replaced")  # SQLite 3.35+ and PostgreSQL
    op.execute("ALTER TABLE smv_task_runs DROP COLUMN files_written")
