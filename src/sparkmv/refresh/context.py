"""Building the planner's input for one MV: pin base tables, trace lineage, read the
version map and the MV's published partitions; turn an MV inactive when a base table
vanished or its files no longer match the stored schema."""

from __future__ import annotations

import json
import logging
import os
from dataclasses import dataclass
from functools import lru_cache

from sqlglot import exp

from sparkmv.analysis.lineage import Lineage, partition_lineage
from sparkmv.analysis.query import parse_query
from sparkmv.catalog import Catalog
from sparkmv.catalog.models import ObjectRow
from sparkmv.errors import InactiveError, SourceError
from sparkmv.names import ObjectName
from sparkmv.refresh.planner import PartitionValue
from sparkmv.refresh.properties import MvProperties
from sparkmv.sources.pinned import PinnedTable
from sparkmv.sources.resolve import pin_base
from sparkmv.storage.iceberg import IcebergStore

log = logging.getLogger("sparkmv.refresh")


@dataclass(frozen=True)
class MvDefinition:
    """An MV as the refresh sees it."""

    object_id: int
    name: ObjectName
    query: exp.Query
    partition_by: str | None
    base_tables: list[ObjectName]
    properties: MvProperties

    @classmethod
    def from_row(cls, row: ObjectRow) -> MvDefinition:
        """Parse the stored definition of an MV row."""
        assert row.definition is not None
        return cls(
            object_id=row.id,
            name=ObjectName(row.namespace, row.name),
            query=parse_query(row.definition),
            partition_by=row.partition_by,
            base_tables=[ObjectName.parse(t, allow_reserved=True) for t in row.base_tables],
            properties=MvProperties.parse(row.properties or {}),
        )


def pin_all(catalog: Catalog, store: IcebergStore, tables: list[ObjectName]) -> dict[str, PinnedTable]:
    """Pin every base table now.

    Raises:
        SourceError: when a base table is gone.
    """
    out: dict[str, PinnedTable] = {}
    for name in tables:
        with catalog.transaction() as s:
            row = catalog.objects.find(s, name)
        out[name.qualified] = pin_base(name, row, store)
    return out


def pin_for_refresh(catalog: Catalog, store: IcebergStore, mv: MvDefinition) -> dict[str, PinnedTable]:
    """Pin every base table of ``mv`` for a refresh and check the pinned files' schemas.

    A base table that vanished, or files whose schema no longer matches the stored one
    (a column gone or of another type), turn the MV inactive with the reason.

    Raises:
        InactiveError: in those cases (the MV is inactive when it is raised).
    """
    try:
        pinned = pin_all(catalog, store, mv.base_tables)
        reason = next((r for r in (schema_problem(p) for p in pinned.values()) if r), None)
    except SourceError as exc:
        reason = str(exc)
    if reason is None:
        return pinned
    log.warning("materialized view %s turns inactive: %s", mv.name, reason)
    with catalog.transaction() as s:
        catalog.objects.set_fields(s, mv.object_id, is_active=False, inactive_reason=reason)
    raise InactiveError(f"MV '{mv.name}' is inactive: {reason}")


_WIDENING = {
    ("int", "bigint"),
    ("smallint", "int"),
    ("smallint", "bigint"),
    ("tinyint", "smallint"),
    ("tinyint", "int"),
    ("tinyint", "bigint"),
    ("float", "double"),
    ("date", "timestamp"),
    ("timestamp_ntz", "timestamp"),
    ("timestamp", "timestamp_ntz"),
}


def _file_types(path: str) -> dict[str, str] | None:
    """Column -> Spark type name of one Parquet file's footer; None when the footer cannot
    be read (Spark reports that when it reads the file)."""
    local = path.removeprefix("file://")
    try:
        st = os.stat(local)
    except OSError:
        return None
    return _footer_types(local, st.st_size, st.st_mtime_ns)


@lru_cache(maxsize=65536)
def _footer_types(local: str, size: int, mtime_ns: int) -> dict[str, str] | None:
    """:func:`_file_types` of a file as it is at ``size`` and ``mtime_ns`` (the cache key:
    a rewritten file is read again). Bounded, as a long-running scheduler plans forever."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from sparkmv.storage.schema import arrow_to_spark

    try:
        arrow = pq.read_schema(local)
    except Exception:  # unreadable footers are Spark's to report when it reads them
        return None
    out: dict[str, str] = {}
    for f in arrow:
        try:
            spark_field = arrow_to_spark(pa.schema([f])).fields[0]
        except Exception:  # a type Spark cannot map is not compared
            continue
        out[f.name.lower()] = spark_field.dataType.simpleString()
    return out


def schema_problem(pinned: PinnedTable) -> str | None:
    """Why the files of an external Parquet table no longer match its stored schema
    (a stored column missing or of an incompatible type), or None.

    Partition columns (from directory names) are not compared.
    """
    if pinned.kind != "parquet":
        return None
    stored = _type_names_simple(pinned.schema_json)
    skip = {c.lower() for c in pinned.partition_columns}
    for path, part in sorted(pinned.partitions.items()):
        for file in part.files:
            found = _file_types(file)
            if found is None:
                continue
            for column, expected in stored.items():
                if column in skip:
                    continue
                actual = found.get(column)
                if actual is None:
                    return (
                        f"schema of base table '{pinned.name}' changed: column '{column}' is missing "
                        f"in {os.path.basename(file)} of partition {path or '<all>'}"
                    )
                if actual != expected and (actual, expected) not in _WIDENING:
                    return (
                        f"schema of base table '{pinned.name}' changed: column '{column}' is {actual} "
                        f"in {os.path.basename(file)} of partition {path or '<all>'}, was {expected}"
                    )
    return None


def _type_names_simple(schema_json: str) -> dict[str, str]:
    from sparkmv.storage.schema import schema_from_json

    return {f.name.lower(): f.dataType.simpleString() for f in schema_from_json(schema_json).fields}


def _type_names(schema_json: str) -> dict[str, str]:
    fields = json.loads(schema_json).get("fields", [])
    return {f["name"]: f["type"] if isinstance(f["type"], str) else "string" for f in fields}


def lineage_of(mv: MvDefinition, pinned: dict[str, PinnedTable]) -> Lineage:
    """Partition lineage of ``mv`` given the pinned base schemas."""
    if mv.partition_by is None:
        return Lineage({}, "unpartitioned MV")
    schema = {t: _type_names(p.schema_json) for t, p in pinned.items()}
    parts = {t: p.partition_columns for t, p in pinned.items()}
    return partition_lineage(mv.query, mv.partition_by, schema, parts)


def mv_partitions(store: IcebergStore, name: ObjectName) -> set[PartitionValue]:
    """Partition values of the MV's current snapshot."""
    table = store.load(name)
    return {p.value for p in store.partitions(table)} if IcebergStore.partition_column(table) else set()
