"""DDL of external Iceberg catalogs: ``CREATE EXTERNAL CATALOG``, ``DROP CATALOG``,
``SHOW CATALOGS`` (see :mod:`sparkmv.sources.external` for the properties)."""

from __future__ import annotations

from typing import Any

from sparkmv.catalog import ObjectKind
from sparkmv.errors import AnalysisError, ObjectExistsError, ObjectNotFoundError
from sparkmv.names import ObjectName
from sparkmv.refresh.runtime import Runtime
from sparkmv.sources import external
from sparkmv.sql.statements import CreateExternalCatalog, DropCatalog

SHOW_COLUMNS = ["name", "type", "catalog_type", "properties"]
SHOW_SCHEMA = "name string, type string, catalog_type string, properties string"


def create_external_catalog(rt: Runtime, stmt: CreateExternalCatalog) -> str:
    """Register an external Iceberg catalog after checking pyiceberg can load and reach it.

    Raises:
        ObjectExistsError: a catalog of that name exists (unless IF NOT EXISTS).
        SparkMvError: an unknown type, a secret given in clear text.
        SourceError: the catalog is unreachable (nothing is registered).
    """
    catalog_type = external.check_properties(stmt.name, stmt.properties)
    with rt.catalog.read() as s:
        found = rt.catalog.external_catalogs.find(s, stmt.name) is not None
    if found:
        if stmt.if_not_exists:
            return f"catalog '{stmt.name}' already exists"
        raise ObjectExistsError(f"catalog '{stmt.name}' already exists")
    external.open_catalog(stmt.name, stmt.properties)  # outside the transaction: it may be slow
    with rt.catalog.transaction() as s:
        rt.catalog.external_catalogs.insert(s, stmt.name, catalog_type, dict(stmt.properties))
    return f"created external catalog '{stmt.name}' ({catalog_type})"


def drop_catalog(rt: Runtime, stmt: DropCatalog) -> str:
    """Forget an external catalog (never its tables or data).

    Raises:
        ObjectNotFoundError: no catalog of that name (unless IF EXISTS).
        AnalysisError: a materialized view reads one of its tables.
    """
    with rt.catalog.transaction() as s:
        if rt.catalog.external_catalogs.find(s, stmt.name) is None:
            if stmt.if_exists:
                return f"catalog '{stmt.name}' does not exist"
            raise ObjectNotFoundError(f"catalog '{stmt.name}' does not exist")
        readers = [
            ObjectName(r.namespace, r.name).display
            for r in rt.catalog.objects.list(s)
            if r.kind == ObjectKind.MATERIALIZED_VIEW and any(_in_catalog(b, stmt.name) for b in r.base_tables or [])
        ]
        if readers:
            raise AnalysisError(
                f"cannot drop catalog '{stmt.name}': materialized view {', '.join(repr(r) for r in readers)} "
                "reads its tables; drop them first"
            )
        rt.catalog.external_catalogs.delete(s, stmt.name)
    external.forget(stmt.name)
    return f"dropped catalog '{stmt.name}'"


def show_catalogs(rt: Runtime) -> list[tuple[Any, ...]]:
    """One row per external catalog: name, ``iceberg``, Iceberg catalog type, properties
    as written (secrets appear only as their ``env:NAME`` references)."""
    with rt.catalog.read() as s:
        rows = rt.catalog.external_catalogs.list(s)
    return [
        (r.name, "iceberg", r.catalog_type, ", ".join(f"{k}={v}" for k, v in sorted(r.properties.items())))
        for r in rows
    ]


def check_external_table(rt: Runtime, name: ObjectName) -> None:
    """Check a three-part name names a table of a registered external catalog.

    Raises:
        AnalysisError: the catalog is not registered, unreachable, or has no such table.
    """
    with rt.catalog.read() as s:
        row = rt.catalog.external_catalogs.find(s, name.catalog)
    if row is None:
        raise AnalysisError(f"catalog '{name.catalog}' of table '{name.qualified}' does not exist")
    from sparkmv.errors import SourceError

    try:
        external.load_table(name, dict(row.properties))
    except SourceError as exc:
        raise AnalysisError(str(exc)) from exc


def _in_catalog(base: str, catalog: str) -> bool:
    parts = base.split(".")
    return len(parts) == 3 and parts[0] == catalog
