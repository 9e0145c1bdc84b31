"""pipeline datasets: every dataset of a pipeline project (``sparkmv.pipeline_datasets``)

Revision ID: 0008
Revises: 0007
Create Date: 2026-12-01

``smv_pipeline_datasets`` holds one row per dataset of a Spark Declarative Pipelines project
that ``sparkmv pipeline run`` ran: its pipeline, name, kind (materialized view, streaming
table, view, temporary view, sink), source (sql or python), definition file and line, and
the outcome of its newest run (state, technique, reason, rows, start and end). Python
datasets are not sparkmv objects, so without it ``sparkmv status`` could not list them. A new
table only: the downgrade drops it and nothing else changes.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "smv_pipeline_datasets",
        sa.Column("id", sa.Integer(), primary_key=True, autoincrement=True),
        sa.Column("pipeline", sa.String(200), nullable=False),
        sa.Column("namespace", sa.String(128), nullable=False),
        sa.Column("name", sa.String(128), nullable=False),
        sa.Column("kind", sa.String(32), nullable=False),
        sa.Column("source", sa.String(16), nullable=False),
        sa.Column("definition_file", sa.Text(), nullable=False),
        sa.Column("definition_line", sa.Integer(), nullable=False),
        sa.Column("last_state", sa.String(16), nullable=True),
        sa.Column("last_technique", sa.String(16), nullable=True),
        sa.Column("last_reason", sa.Text(), nullable=True),
        sa.Column("rows", sa.BigInteger(), nullable=True),
        sa.Column("last_run_start", sa.DateTime(), nullable=True),
        sa.Column("last_run_end", sa.DateTime(), nullable=True),
        sa.Column("updated_at", sa.DateTime(), nullable=False),
        sa.UniqueConstraint("namespace", "name", name="uq_smv_pipeline_datasets_name"),
    )


def downgrade() -> None:
    op.drop_table("smv_pipeline_datasets")
