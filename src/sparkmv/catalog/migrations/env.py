"""Alembic environment: runs the numbered migrations on the connection sparkmv passes in."""

from __future__ import annotations

from alembic import context

from sparkmv.catalog.models import Base

target_metadata = Base.metadata


def _include_object(obj, name, type_, reflected, compare_to):  # type: ignore[no-untyped-def]
    # pyiceberg's catalog tables share the database; they are not ours to migrate.
    return not (type_ == "table" and name is not None and name.startswith("iceberg_"))


def run_migrations() -> None:
    connection = context.config.attributes.get("connection")
    if connection is None:
        from sqlalchemy import create_engine

        engine = create_engine(context.config.get_main_option("sqlalchemy.url") or "")
        with engine.begin() as conn:
            _run(conn)
        return
    _run(connection)


def _run(connection) -> None:  # type: ignore[no-untyped-def]
    context.configure(
        connection=connection,
        target_metadata=target_metadata,
        include_object=_include_object,
        render_as_batch=True,
        version_table="smv_alembic_version",
    )
    with context.begin_transaction():
        context.run_migrations()


run_migrations()
