"""Building the planner's input for one MV: pin base tables, trace lineage, read the
version map and the MV's published partitions; turn an MV inactive when a base table
vanished or its files no longer match the stored schema."""

from __future__ import annotations

import json
import logging
import os
from dataclasses import dataclass
from functools import lru_cache

from pyiceberg.table import Table
from sqlglot import exp

from sparkmv.analysis.expectations import Expectation, expectations_of
from sparkmv.analysis.lineage import Lineage, partition_lineage
from sparkmv.analysis.query import parse_query
from sparkmv.analysis.transforms import external_lineage
from sparkmv.catalog import Catalog
from sparkmv.catalog.models import ObjectRow
from sparkmv.catalog.states import ObjectKind
from sparkmv.errors import InactiveError, RefreshError, SourceError
from sparkmv.names import ObjectName
from sparkmv.refresh.planner import PartitionValue, PlanInput, RefreshRequest, RetentionFilter, changed_partitions
from sparkmv.refresh.properties import MvProperties
from sparkmv.refresh.runtime import Runtime
from sparkmv.sources.pinned import PinnedTable
from sparkmv.sources.resolve import pin_base
from sparkmv.storage import warehouse
from sparkmv.storage.iceberg import IcebergStore
from sparkmv.storage.partition_values import check_range

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
    expectations: tuple[Expectation, ...] = ()
    """The MV's expectations (:mod:`sparkmv.analysis.expectations`), applied to the rows
    every refresh computes (:mod:`sparkmv.refresh.expectations`)."""

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
            expectations=expectations_of(row.options),
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
            ext = catalog.external_catalogs.find(s, name.catalog) if name.catalog else None
            props = dict(ext.properties) if ext is not None else None
        out[name.qualified] = pin_base(name, row, store, props)
    return out


def inactive_inputs(catalog: Catalog, tables: list[ObjectName]) -> list[str]:
    """Descriptions (``'name' (reason)``) of the inactive MVs among ``tables``: a refresh
    never reads an inactive input."""
    out: list[str] = []
    with catalog.transaction() as s:
        for name in tables:
            row = catalog.objects.find(s, name)
            if row is not None and row.kind == ObjectKind.MATERIALIZED_VIEW and not row.is_active:
                out.append(f"'{name}' ({row.inactive_reason})")
    return out


def pin_for_refresh(catalog: Catalog, store: IcebergStore, mv: MvDefinition) -> dict[str, PinnedTable]:
    """Pin every base table of ``mv`` for a refresh and check the pinned files' schemas.

    A base table that vanished, or files whose schema no longer matches the stored one
    (a column gone or of another type), turn the MV inactive with the reason. Only the files
    of partitions whose version differs from the MV's version map are read (the others were
    checked by the refresh that consumed them): a refresh with nothing to do reads no footer.

    Raises:
        InactiveError: in those cases (the MV is inactive when it is raised).
    """
    inactive = inactive_inputs(catalog, mv.base_tables)
    if inactive:
        raise RefreshError(
            f"MV '{mv.name}' reads inactive materialized view {inactive[0]}; "
            "reactivate it first (ALTER MATERIALIZED VIEW ... ACTIVE)"
        )
    try:
        pinned = pin_all(catalog, store, mv.base_tables)
        with catalog.read() as s:
            consumed = {k: v.version for k, v in catalog.versions.load(s, mv.object_id).items()}
        # files of a partition at the version the MV consumed were checked when it was consumed
        changed = {t: set(changed_partitions(p, consumed)) for t, p in pinned.items()}
        reason = next((r for r in (schema_problem(p, changed[t]) for t, p in pinned.items()) if r), None)
    except SourceError as exc:
        reason = str(exc)
    if reason is None:
        return pinned
    log.warning("materialized view %s turns inactive: %s", mv.name, reason)
    with catalog.transaction() as s:
        catalog.objects.set_fields(s, mv.object_id, is_active=False, inactive_reason=reason)
        catalog.objects.deactivate_readers(
            s, mv.name.qualified, f"input materialized view '{mv.name}' is inactive: {reason}"
        )
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
    location = warehouse.normalize(path)
    try:
        st = warehouse.stat(location)
    except OSError:
        return None
    return _footer_types(location, st.size, st.mtime_ns)


@lru_cache(maxsize=65536)
def _footer_types(location: str, size: int, mtime_ns: int) -> dict[str, str] | None:
    """:func:`_file_types` of a file as it is at ``size`` and ``mtime_ns`` (the cache key:
    a rewritten file is read again). Bounded, as a long-running scheduler plans forever."""
    import pyarrow as pa

    from sparkmv.storage.schema import arrow_to_spark

    try:
        arrow = warehouse.parquet_schema(location)
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


def schema_problem(pinned: PinnedTable, partitions: set[str] | None = None) -> str | None:
    """Why the files of an external Parquet table (of ``partitions`` only, when given: the
    partition paths to check) no longer match its stored schema (a stored column missing or
    of an incompatible type), or None.

    Partition columns (from directory names) are not compared. Each footer read is cached
    per process (:func:`_footer_types`).
    """
    if pinned.kind != "parquet":
        return None
    parts = sorted((k, p) for k, p in pinned.partitions.items() if partitions is None or k in partitions)
    if not parts:
        return None
    stored = _type_names_simple(pinned.schema_json)
    skip = {c.lower() for c in pinned.partition_columns}
    for path, part in parts:
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
    if not any(p.catalog_properties is not None for p in pinned.values()):
        return partition_lineage(mv.query, mv.partition_by, schema, parts)
    transforms = {t: p.partition_transforms for t, p in pinned.items()}
    reasons = {t: p.partition_reason for t, p in pinned.items() if p.partition_reason}
    return external_lineage(mv.query, mv.partition_by, schema, parts, transforms, reasons)


def plan_input(rt: Runtime, mv: MvDefinition, pinned: dict[str, PinnedTable], request: RefreshRequest) -> PlanInput:
    """The planner's input for a refresh of ``mv`` now (used by the MV job and by ``EXPLAIN
    REFRESH`` alike): the version map, the partitions of the MV's current snapshot, the
    kind of its partition values and its retention. The MV's Iceberg table is loaded once;
    its current snapshot id is :attr:`PlanInput.mv_snapshot_id`."""
    with rt.catalog.read() as s:
        versions = rt.catalog.versions.load(s, mv.object_id)
        refreshed = rt.catalog.objects.by_id(s, mv.object_id).last_success_run_id is not None
    table = rt.iceberg.load(mv.name)
    published: set[PartitionValue] = set()
    if refreshed and IcebergStore.partition_column(table):
        published = {p.value for p in IcebergStore.partitions(table)}
    snapshot = table.current_snapshot()
    return PlanInput(
        partition_by=mv.partition_by,
        lineage=lineage_of(mv, pinned),
        pinned=pinned,
        version_map={k: v.version for k, v in versions.items()},
        mv_partitions=published,
        refreshed_before=refreshed,
        properties=mv.properties,
        request=request,
        partition_kind=IcebergStore.partition_kind(table) or "string",
        retention=_retention_filter(rt, mv, table),
        mv_snapshot_id=snapshot.snapshot_id if snapshot is not None else None,
    )


def mv_partition_kind(store: IcebergStore, name: ObjectName) -> str:
    """Kind of the MV partition column's typed values (``string`` when unpartitioned)."""
    return IcebergStore.partition_kind(store.load(name)) or "string"


def _retention_filter(rt: Runtime, mv: MvDefinition, table: Table) -> RetentionFilter | None:
    """The MV's ``partition_retention_condition`` as a function evaluated by Spark over
    the partition values (None without a condition or partition column)."""
    condition = mv.properties.partition_retention_condition
    if not condition or mv.partition_by is None:
        return None
    from sparkmv.refresh.retention import retained
    from sparkmv.storage.schema import arrow_to_spark

    schema = arrow_to_spark(table.schema().as_arrow())
    field = next(f for f in schema.fields if f.name.lower() == mv.partition_by.lower())
    return lambda values: retained(rt.spark, condition, field.name, field.dataType, values)


def check_request(catalog: Catalog, store: IcebergStore, name: ObjectName, start: str | None, end: str | None) -> None:
    """Check a ``PARTITION START (..) END (..)`` range before anything is queued or run.

    Raises:
        ObjectNotFoundError: when there is no such MV.
        RefreshError: when the MV is not partitioned.
        PartitionValueError: for an empty bound, a bound not of the partition column's
            kind, or START not before END.
    """
    if start is None and end is None:
        return
    with catalog.transaction() as s:
        row = catalog.objects.get(s, name, ObjectKind.MATERIALIZED_VIEW)
    bounds = ", ".join(f"{w} ('{v}')" for w, v in (("START", start), ("END", end)) if v is not None)
    if row.partition_by is None:
        raise RefreshError(
            f"materialized view '{name}' is not partitioned: PARTITION {bounds} cannot be used; "
            "refresh it without a partition range"
        )
    check_range(start, end, mv_partition_kind(store, name), str(name))


def partition_without_zone(catalog: Catalog, store: IcebergStore, mv: MvDefinition) -> bool:
    """True when the MV's TIMESTAMP partition column is stored without time zone (Spark
    ``TIMESTAMP_NTZ``): it traces only to base columns that are not zoned (a DATE, a
    ``TIMESTAMP_NTZ``, a string), e.g. ``date_trunc('WEEK', dt)`` of a DATE ``dt``. A
    partition column that traces to a zoned TIMESTAMP column, or to nothing known, stays
    zoned."""
    if mv.partition_by is None:
        return False
    pinned = pin_all(catalog, store, mv.base_tables)
    lineage = lineage_of(mv, pinned)
    types = {t: {c.lower(): v for c, v in _type_names(p.schema_json).items()} for t, p in pinned.items()}
    found = [types.get(t, {}).get(c) for t, c in lineage.sources]
    return bool(found) and all(v is not None and v != "timestamp" for v in found)
