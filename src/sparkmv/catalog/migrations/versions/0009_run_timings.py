"""where the time of a refresh run went

Revision ID: 0009
Revises: 0008
Create Date: 2026-12-02

``smv_task_runs.timings`` (JSON): the run's wall-clock seconds per phase (plan, pin, changes,
compute, commit, catalog, other) and its Spark jobs (count, seconds, per job group), as
:mod:`sparkmv.refresh.timing` records them. NULL for runs stored before.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None


def upgrade() -> None:
    # Plain ALTER TABLE, never a batch copy: rebuilding smv_task_runs on SQLite would drop
    # its progress rows (ON DELETE CASCADE).
    op.add_column("smv_task_runs", sa.Column("timings", sa.JSON(), nullable=True))


def downgrade() -> None:
    op.execute("ALTER TABLE smv_task_runs DROP COLUMN timings")  # SQLite 3.35+ and PostgreSQL
