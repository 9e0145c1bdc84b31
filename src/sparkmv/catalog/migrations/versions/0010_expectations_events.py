"""expectation results and the event log (``sparkmv.expectations``, ``sparkmv.pipeline_events``)

Revision ID: 0010
Revises: 0009
Create Date: 2026-12-03

``smv_expectation_results``: one row per expectation of a dataset per refresh run: the
dataset, the expectation's name and action (warn, drop, fail), the run, and the rows that
passed and failed among the rows the run processed. ``smv_pipeline_events``: the event log,
one row per event (run started and ended, each dataset's refresh, expectation results,
errors, cancels, recoveries), written in the catalog transaction of the state change it
reports. New tables only: the downgrade drops them and nothing else changes.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0010"
down_revision = "0009"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "smv_expectation_results",
        sa.Column("id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), primary_key=True, autoincrement=True),
        sa.Column("run_id", sa.BigInteger(), nullable=True, index=True),
        sa.Column("dataset", sa.String(260), nullable=False, index=True),
        sa.Column("expectation", sa.String(260), nullable=False),
        sa.Column("action", sa.String(8), nullable=False),
        sa.Column("condition", sa.Text(), nullable=False),
        sa.Column("rows_passed", sa.BigInteger(), nullable=False),
        sa.Column("rows_failed", sa.BigInteger(), nullable=False),
        sa.Column("recorded_at", sa.DateTime(), nullable=False),
    )
    op.create_table(
        "smv_pipeline_events",
        sa.Column("id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), primary_key=True, autoincrement=True),
        sa.Column("timestamp", sa.DateTime(), nullable=False, index=True),
        sa.Column("pipeline", sa.String(200), nullable=True, index=True),
        sa.Column("run_id", sa.BigInteger(), nullable=True, index=True),
        sa.Column("dataset", sa.String(260), nullable=True),
        sa.Column("event_type", sa.String(40), nullable=False),
        sa.Column("level", sa.String(8), nullable=False),
        sa.Column("message", sa.Text(), nullable=False),
        sa.Column("details", sa.JSON(), nullable=True),
    )


def downgrade() -> None:
    op.drop_table("smv_pipeline_events")
    op.drop_table("smv_expectation_results")
