"""progress rows: a typed chunk outcome column instead of JSON packed into ``position``

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-23

Refreshable-table reloads used to store their per-vnode merge counts as JSON text in
``smv_refresh_progress.position``; they move to the new JSON column ``outcome`` (old rows are
converted, so runs recorded before the upgrade still resume and report their counts).
"""

from __future__ import annotations

import json

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None

_progress = sa.table(
    "smv_refresh_progress",
    sa.column("run_id", sa.BigInteger()),
    sa.column("chunk_id", sa.Integer()),
    sa.column("position", sa.Text()),
    sa.column("outcome", sa.JSON(none_as_null=True)),
)


def upgrade() -> None:
    with op.batch_alter_table("smv_refresh_progress") as batch:
        batch.add_column(sa.Column("outcome", sa.JSON(), nullable=True))
    conn = op.get_bind()
    rows = conn.execute(
        sa.select(_progress.c.run_id, _progress.c.chunk_id, _progress.c.position).where(_progress.c.position.like("{%"))
    ).all()
    for run_id, chunk_id, position in rows:
        conn.execute(
            _progress.update()
            .where(_progress.c.run_id == run_id, _progress.c.chunk_id == chunk_id)
            .values(outcome=json.loads(position), position=None)
        )


def downgrade() -> None:
    conn = op.get_bind()
    rows = conn.execute(
        sa.select(_progress.c.run_id, _progress.c.chunk_id, _progress.c.outcome).where(_progress.c.outcome.is_not(None))
    ).all()
    for run_id, chunk_id, outcome in rows:
        if outcome is None:  # a JSON null
            continue
        conn.execute(
            _progress.update()
            .where(_progress.c.run_id == run_id, _progress.c.chunk_id == chunk_id)
            .values(position=json.dumps(outcome))
        )
    with op.batch_alter_table("smv_refresh_progress") as batch:
        batch.drop_column("outcome")
