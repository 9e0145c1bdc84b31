"""query rewrite log: the queries considered for query rewrite (``sparkmv.rewrite_log``)

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-23

``smv_rewrite_log`` holds one row per MV a rewritten query used (or one row with ``mv``
NULL when no MV was used): when, the query's fingerprint and (truncated) text, the rewrite
class, the analysis time and the rejected candidates' reasons. A new table only: the
downgrade drops it and nothing else changes.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "smv_rewrite_log",
        sa.Column("id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), primary_key=True, autoincrement=True),
        sa.Column("query_time", sa.DateTime(), nullable=False),
        sa.Column("fingerprint", sa.String(32), nullable=False),
        sa.Column("query", sa.Text(), nullable=False),
        sa.Column("mv", sa.String(260), nullable=True),
        sa.Column("rewrite_class", sa.String(16), nullable=True),
        sa.Column("analysis_ms", sa.Float(), nullable=False),
        sa.Column("rejected", sa.Text(), nullable=True),
    )


def downgrade() -> None:
    op.drop_table("smv_rewrite_log")
