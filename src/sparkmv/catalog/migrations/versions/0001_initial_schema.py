"""initial schema

Revision ID: 0001
Revises:
Create Date: 2026-11-21
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "smv_objects",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("namespace", sa.String(length=128), nullable=False),
        sa.Column("name", sa.String(length=128), nullable=False),
        sa.Column("kind", sa.String(length=32), nullable=False),
        sa.Column("definition", sa.Text(), nullable=True),
        sa.Column("location", sa.Text(), nullable=True),
        sa.Column("format", sa.String(length=32), nullable=True),
        sa.Column("schema_json", sa.Text(), nullable=True),
        sa.Column("partition_columns", sa.JSON(), nullable=False),
        sa.Column("partition_by", sa.String(length=128), nullable=True),
        sa.Column("base_tables", sa.JSON(), nullable=False),
        sa.Column("properties", sa.JSON(), nullable=False),
        sa.Column("options", sa.JSON(), nullable=False),
        sa.Column("refresh_scheme", sa.String(length=200), nullable=False),
        sa.Column("state", sa.String(length=16), nullable=False),
        sa.Column("state_since", sa.DateTime(), nullable=True),
        sa.Column("current_run_id", sa.BigInteger(), nullable=True),
        sa.Column("lease_owner", sa.String(length=255), nullable=True),
        sa.Column("lease_expires", sa.DateTime(), nullable=True),
        sa.Column("is_active", sa.Boolean(), nullable=False),
        sa.Column("inactive_reason", sa.Text(), nullable=True),
        sa.Column("last_run_id", sa.BigInteger(), nullable=True),
        sa.Column("last_success_run_id", sa.BigInteger(), nullable=True),
        sa.Column("last_trigger_time", sa.DateTime(), nullable=True),
        sa.Column("last_success_time", sa.DateTime(), nullable=True),
        sa.Column("schedule_start", sa.DateTime(), nullable=True),
        sa.Column("schedule_every_seconds", sa.Integer(), nullable=True),
        sa.Column("next_fire_time", sa.DateTime(), nullable=True),
        sa.Column("last_fire_time", sa.DateTime(), nullable=True),
        sa.Column("suspended", sa.Boolean(), nullable=False),
        sa.Column("consecutive_failures", sa.Integer(), nullable=False),
        sa.Column("refresh_state_reason", sa.Text(), nullable=True),
        sa.Column("created_at", sa.DateTime(), nullable=False),
        sa.Column("updated_at", sa.DateTime(), nullable=False),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("namespace", "name", name="uq_smv_objects_name"),
    )
    op.create_table(
        "smv_control",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("object_id", sa.Integer(), nullable=False),
        sa.Column("run_id", sa.BigInteger(), nullable=True),
        sa.Column("command", sa.String(length=16), nullable=False),
        sa.Column("created_at", sa.DateTime(), nullable=False),
        sa.ForeignKeyConstraint(["object_id"], ["smv_objects.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id"),
    )
    with op.batch_alter_table("smv_control", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_smv_control_object_id"), ["object_id"], unique=False)

    op.create_table(
        "smv_task_runs",
        sa.Column("run_id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), autoincrement=True, nullable=False),
        sa.Column("object_id", sa.Integer(), nullable=False),
        sa.Column("object_name", sa.String(length=260), nullable=False),
        sa.Column("trigger", sa.String(length=32), nullable=False),
        sa.Column("mode", sa.String(length=32), nullable=True),
        sa.Column("mode_reason", sa.Text(), nullable=True),
        sa.Column("state", sa.String(length=32), nullable=False),
        sa.Column("priority", sa.Integer(), nullable=False),
        sa.Column("publish", sa.String(length=16), nullable=False),
        sa.Column("created", sa.DateTime(), nullable=False),
        sa.Column("started", sa.DateTime(), nullable=True),
        sa.Column("finished", sa.DateTime(), nullable=True),
        sa.Column("error", sa.Text(), nullable=True),
        sa.Column("plan", sa.JSON(), nullable=True),
        sa.Column("attempts", sa.Integer(), nullable=False),
        sa.Column("owner", sa.String(length=255), nullable=True),
        sa.Column("partitions_planned", sa.Integer(), nullable=False),
        sa.Column("partitions_done", sa.Integer(), nullable=False),
        sa.Column("chunks_planned", sa.Integer(), nullable=False),
        sa.Column("chunks_done", sa.Integer(), nullable=False),
        sa.Column("rows_written", sa.BigInteger(), nullable=False),
        sa.Column("rows_inserted", sa.BigInteger(), nullable=False),
        sa.Column("rows_updated", sa.BigInteger(), nullable=False),
        sa.Column("rows_deleted", sa.BigInteger(), nullable=False),
        sa.Column("snapshot_id", sa.BigInteger(), nullable=True),
        sa.Column("request_options", sa.JSON(), nullable=False),
        sa.ForeignKeyConstraint(["object_id"], ["smv_objects.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("run_id"),
    )
    with op.batch_alter_table("smv_task_runs", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_smv_task_runs_object_id"), ["object_id"], unique=False)

    op.create_table(
        "smv_version_map",
        sa.Column("object_id", sa.Integer(), nullable=False),
        sa.Column("base_table", sa.String(length=260), nullable=False),
        sa.Column("base_partition", sa.String(length=1000), nullable=False),
        sa.Column("version", sa.String(length=255), nullable=False),
        sa.Column("changed_at", sa.Float(), nullable=True),
        sa.Column("run_id", sa.BigInteger(), nullable=True),
        sa.ForeignKeyConstraint(["object_id"], ["smv_objects.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("object_id", "base_table", "base_partition"),
    )
    op.create_table(
        "smv_refresh_progress",
        sa.Column("run_id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), nullable=False),
        sa.Column("chunk_id", sa.Integer(), nullable=False),
        sa.Column("partitions", sa.JSON(), nullable=False),
        sa.Column("is_completed", sa.Boolean(), nullable=False),
        sa.Column("position", sa.Text(), nullable=True),
        sa.Column("processed_rows", sa.BigInteger(), nullable=False),
        sa.Column("bytes_written", sa.BigInteger(), nullable=False),
        sa.Column("files_written", sa.Integer(), nullable=False),
        sa.Column("files", sa.JSON(), nullable=False),
        sa.Column("attempts", sa.Integer(), nullable=False),
        sa.Column("duration_seconds", sa.Float(), nullable=False),
        sa.Column("published", sa.Boolean(), nullable=False),
        sa.Column("last_checkpoint", sa.DateTime(), nullable=True),
        sa.ForeignKeyConstraint(["run_id"], ["smv_task_runs.run_id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("run_id", "chunk_id"),
    )


def downgrade() -> None:
    op.drop_table("smv_refresh_progress")
    op.drop_table("smv_version_map")
    with op.batch_alter_table("smv_task_runs", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_smv_task_runs_object_id"))

    op.drop_table("smv_task_runs")
    with op.batch_alter_table("smv_control", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_smv_control_object_id"))

    op.drop_table("smv_control")
    op.drop_table("smv_objects")
