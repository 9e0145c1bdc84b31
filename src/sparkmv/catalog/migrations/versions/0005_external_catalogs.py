"""external Iceberg catalogs

Revision ID: 0005
Revises: 0004
Create Date: 2026-11-23

``smv_external_catalogs`` holds one row per ``CREATE EXTERNAL CATALOG``: its name, its
Iceberg catalog type and the properties handed to pyiceberg's ``load_catalog`` (secrets
only as ``env:NAME`` references).
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "smv_external_catalogs",
        sa.Column("id", sa.Integer(), primary_key=True, autoincrement=True),
        sa.Column("name", sa.String(128), nullable=False, unique=True),
        sa.Column("catalog_type", sa.String(32), nullable=False),
        sa.Column("properties", sa.JSON(), nullable=False),
        sa.Column("created_at", sa.DateTime(), nullable=False),
    )


def downgrade() -> None:
    op.drop_table("smv_external_catalogs")
