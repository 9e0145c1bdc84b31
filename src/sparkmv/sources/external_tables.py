"""Tables of external Iceberg catalogs as base tables: pinned at a snapshot, partitioned by
Iceberg transforms, and read correctly when the snapshot carries delete files.

Partitions. A table partitioned by one field with an ``identity``, ``year``, ``month``,
``day`` or ``hour`` transform is pinned per partition under its *source* column: the key of
a ``days(ts)`` partition is ``ts=2024-01-05 00:00:00`` (the first instant of the day, in the
one text form of the column's kind), so the lineage maps it onto the MV partition
expression as it maps an identity partition value. The transform is kept in
:attr:`PinnedTable.partition_transforms`; the lineage then only accepts an MV partition
expression at least as coarse (a ``days`` partition feeds one ``date_trunc('month', ts)``
partition, never one ``hour``). ``bucket`` / ``truncate`` / several partition fields, or
data files written under an older partition spec, pin the table as one partition with
:attr:`PinnedTable.partition_reason` saying why it is not a reference table. The version of
a partition is the snapshot that last updated it (Iceberg partition metadata, counting
delete files too).

Metadata read. A snapshot without delete files is pinned from its manifests' entries
(:mod:`sparkmv.storage.iceberg_manifests`), each manifest read once per process: the next
run's pin reads the new manifest list and only the manifests added since (no
``plan_files``, no ``inspect.partitions``). Its pinned input is stored as a reference to the
snapshot (:attr:`PinnedTable.files_from_snapshot`: versions per partition, no file lists);
a read recomputes the files of the partitions it reads from the snapshot (:func:`read`,
exact on a resume, as a snapshot never changes). A snapshot with delete files is planned by
pyiceberg, which matches them to data files.

Delete files. The data files of a partition without delete files are read by Spark as
Parquet; the files of a partition with position deletes (or deletion vectors) are read by
Spark too, left-anti-joined with their deleted positions (read on the driver through
pyiceberg: :mod:`sparkmv.storage.position_deletes`). Equality delete files cannot be
applied and fail the read. More delete files than the catalog's
``sparkmv.max-delete-files`` (default 100) fail such a read with the table and the count
named.
"""

from __future__ import annotations

import dataclasses
import json
from datetime import UTC, date, datetime, timedelta
from functools import lru_cache
from typing import TYPE_CHECKING, Any

from pyiceberg.table import FileScanTask, Table
from pyiceberg.table.snapshots import Snapshot
from pyiceberg.transforms import (
    DayTransform,
    HourTransform,
    IdentityTransform,
    MonthTransform,
    Transform,
    YearTransform,
)

from sparkmv.errors import RefreshError
from sparkmv.names import ObjectName
from sparkmv.sources import external
from sparkmv.sources.pinned import UNPARTITIONED, PinnedPartition, PinnedTable, partition_path
from sparkmv.storage import iceberg_manifests, partition_values, position_deletes
from sparkmv.storage.iceberg import DataFile
from sparkmv.storage.lazy import lazy_module

if TYPE_CHECKING:
    import pyarrow as pa
else:  # imported where rows are read: a read-only process never loads them
    pa = lazy_module("pyarrow")


if TYPE_CHECKING:  # pyspark only where a DataFrame is made
    from pyspark.sql import DataFrame, SparkSession

_TIME_TRANSFORMS: dict[type[Transform[Any, Any]], str] = {
    IdentityTransform: "identity",
    YearTransform: "year",
    MonthTransform: "month",
    DayTransform: "day",
    HourTransform: "hour",
}
_EPOCH = datetime(1970, 1, 1)


def pin(name: ObjectName, table: Table, props: dict[str, str]) -> PinnedTable:
    """Pin the current snapshot of external table ``name`` (no Spark): files, versions and
    delete files per partition."""
    from sparkmv.storage.schema import arrow_to_spark, schema_to_json

    schema_json = schema_to_json(arrow_to_spark(table.schema().as_arrow()))
    column, transform, reason = _partitioning(name, table)
    snap = table.current_snapshot()
    base = PinnedTable(
        name.qualified,
        "iceberg",
        schema_json,
        [column] if column and reason is None else [],
        {},
        snapshot_id=snap.snapshot_id if snap else None,
        partition_transforms=[transform] if column and reason is None else [],
        partition_reason=reason,
        catalog_properties=dict(props),
    )
    if snap is None:
        return base
    if iceberg_manifests.has_delete_files(table, snap):
        return _pin_planned(name, table, snap, base, column, transform, reason)
    entries = [e for e in iceberg_manifests.live_files(table, snap) if e.content == 0]
    if reason is None and any(e.spec_id != table.spec().spec_id for e in entries):
        reason = f"base table '{name.qualified}' has data files of an older partition spec (partition spec evolution)"
        base = dataclasses.replace(base, partition_columns=[], partition_transforms=[], partition_reason=reason)
    keyed = column is not None and reason is None
    groups = _group_entries(table, entries, column if keyed else None, transform)
    parts = _entry_partitions(table, snap, groups, keyed)
    return dataclasses.replace(base, partitions=parts, files_from_snapshot=True)


def _group_entries(
    table: Table, entries: list[iceberg_manifests.FileEntry], column: str | None, transform: str
) -> dict[str, list[iceberg_manifests.FileEntry]]:
    """Data file entries by partition key (``""`` for all without ``column``)."""
    source_type = _source_type(table, column)
    groups: dict[str, list[iceberg_manifests.FileEntry]] = {}
    for e in entries:
        key = _partition_key(column, transform, e.partition[0], source_type) if column else UNPARTITIONED
        groups.setdefault(key, []).append(e)
    return groups


@lru_cache(maxsize=65536)
def _partition_key(column: str, transform: str, raw: Any, source_type: Any) -> str:
    """The partition path of one raw partition value (cached: every run of an MV over a
    table partitioned by day keys thousands of the same values)."""
    return partition_path(column, _text(transform, raw, source_type))


def snapshot_files(pinned: PinnedTable, keys: set[str]) -> dict[str, list[str]]:
    """The data files of partitions ``keys`` of the pinned snapshot, recomputed from its
    manifests (a pinned input stored without its file lists,
    :attr:`PinnedTable.files_from_snapshot`): exactly the files :func:`pin` found, as a
    snapshot never changes.

    Raises:
        RefreshError: the pinned snapshot was expired since (its files may be gone).
    """
    name = ObjectName.parse(pinned.name, allow_reserved=True)
    table = external.load_table(name, pinned.catalog_properties)
    snap = table.snapshot_by_id(pinned.snapshot_id) if pinned.snapshot_id is not None else None
    if snap is None:
        raise RefreshError(
            f"snapshot {pinned.snapshot_id} of base table '{name.qualified}' was expired after this run pinned it; "
            "refresh again"
        )
    entries = [e for e in iceberg_manifests.live_files(table, snap) if e.content == 0]
    column = pinned.partition_columns[0] if pinned.partition_columns else None
    transform = pinned.partition_transforms[0] if pinned.partition_transforms else "identity"
    groups = _group_entries(table, entries, column, transform)
    return {k: sorted(e.path for e in groups.get(k, [])) for k in keys}


def _entry_partitions(
    table: Table, snap: Snapshot, groups: dict[str, list[iceberg_manifests.FileEntry]], keyed: bool
) -> dict[str, PinnedPartition]:
    """The pinned partitions of live data file entries grouped by partition key (no delete
    files in the snapshot). A partition's last update is the newest snapshot that added one
    of its live files (as Iceberg's partition metadata gives it); not ``keyed``: the
    snapshot itself."""
    parts: dict[str, PinnedPartition] = {}
    made: dict[int, Snapshot | None] = {}
    for key in sorted(groups):
        found = groups[key]
        newest: Snapshot | None = None
        for e in found if keyed else []:
            if e.snapshot_id is None:
                continue
            if e.snapshot_id not in made:
                made[e.snapshot_id] = table.snapshot_by_id(e.snapshot_id)
            s = made[e.snapshot_id]
            if s is not None and (newest is None or newest.timestamp_ms < s.timestamp_ms):
                newest = s
        if not keyed:
            newest = snap
        size = sum(e.size_bytes for e in found)
        parts[key] = PinnedPartition(
            files=sorted(e.path for e in found),
            version=partition_version(str(newest.snapshot_id if newest else snap.snapshot_id), size, 0),
            changed_at=newest.timestamp_ms / 1000 if newest else None,
            bytes=size,
            rows=sum(e.record_count for e in found),
            delete_files=0,
        )
    return parts


def _pin_planned(
    name: ObjectName,
    table: Table,
    snap: Snapshot,
    base: PinnedTable,
    column: str | None,
    transform: str,
    reason: str | None,
) -> PinnedTable:
    """:func:`pin` of a snapshot with delete files: planned by pyiceberg (which matches the
    delete files to data files), versions from its partition metadata."""
    tasks = plan(name, table, snap.snapshot_id)
    evolved = next((t for t in tasks if t.file.spec_id != table.spec().spec_id), None)
    if evolved is not None and reason is None:
        reason = f"base table '{name.qualified}' has data files of an older partition spec (partition spec evolution)"
        base = dataclasses.replace(base, partition_columns=[], partition_transforms=[], partition_reason=reason)
    source_type = _source_type(table, column)
    keyed = column is not None and reason is None
    groups: dict[str, list[FileScanTask]] = {}
    for task in tasks:
        key = partition_path(column, _text(transform, task.file.partition[0], source_type)) if keyed and column else ""
        groups.setdefault(key, []).append(task)
    versions = _versions(table, snap.snapshot_id, column if keyed else None, transform, source_type)
    parts: dict[str, PinnedPartition] = {}
    for key in sorted(set(groups) | set(versions)):
        found = groups.get(key, [])
        version, changed = versions.get(key, (str(snap.snapshot_id), snap.timestamp_ms / 1000))
        size = sum(t.file.file_size_in_bytes for t in found)
        deletes = len({d.file_path for t in found for d in t.delete_files})
        parts[key] = PinnedPartition(
            files=sorted(t.file.file_path for t in found),
            version=partition_version(version, size, deletes),
            changed_at=changed,
            bytes=size,
            rows=sum(t.file.record_count for t in found),
            delete_files=deletes,
        )
    return dataclasses.replace(base, partitions=parts)


def partition_version(updated_by: str, data_bytes: int, delete_files: int) -> str:
    """The version of a partition of an external Iceberg table: the snapshot that last
    changed it, its data bytes and its delete files. Iceberg's last-updated snapshot of a
    partition counts live files only: dropping a whole file (a copy-on-write delete of all
    its rows) leaves it unchanged while the partition lost rows; the bytes do not.

    >>> partition_version("42", 1000, 0)
    '42/1000/0'
    """
    return f"{updated_by}/{data_bytes}/{delete_files}"


def plan(name: ObjectName, table: Table, snapshot_id: int | None) -> list[FileScanTask]:
    """The scan tasks of a snapshot of external table ``name`` (data files with the position
    deletes applying to each).

    Raises:
        RefreshError: the snapshot has equality delete files, which pyiceberg cannot apply.
    """
    try:
        return list(table.scan(snapshot_id=snapshot_id).plan_files())
    except ValueError as exc:
        if "equality deletes" not in str(exc):
            raise
        raise RefreshError(
            f"base table '{name.qualified}' has equality delete files at snapshot {snapshot_id}, which sparkmv "
            "cannot apply (it applies position deletes only); compact the table (rewrite its data files)"
        ) from exc


def group_tasks(table: Table, tasks: list[FileScanTask], pinned: PinnedTable) -> dict[str, list[DataFile]]:
    """The data files of planned scan ``tasks`` by the partition key of ``pinned`` (the
    source column's first value of each transformed partition; ``""`` when ``pinned`` has
    no partition column)."""
    column = pinned.partition_columns[0] if pinned.partition_columns else None
    transform = pinned.partition_transforms[0] if pinned.partition_transforms else "identity"
    source_type = _source_type(table, column)
    out: dict[str, list[DataFile]] = {}
    for task in tasks:
        value = _text(transform, task.file.partition[0], source_type) if column else None
        key = partition_path(column, value) if column else UNPARTITIONED
        out.setdefault(key, []).append(
            DataFile(task.file.file_path, value, task.file.record_count, task.file.file_size_in_bytes)
        )
    return out


def _partitioning(name: ObjectName, table: Table) -> tuple[str | None, str, str | None]:
    """(source column, transform name, reason it is no reference table) of the current spec."""
    spec = table.spec()
    if not spec.fields:
        return None, "identity", None
    fields = ", ".join(f"{f.transform}({table.schema().find_column_name(f.source_id)})" for f in spec.fields)
    if len(spec.fields) > 1:
        return None, "identity", f"base table '{name.qualified}' is partitioned by several fields ({fields})"
    field = spec.fields[0]
    transform = _TIME_TRANSFORMS.get(type(field.transform))
    column = table.schema().find_column_name(field.source_id)
    if transform == "day" and partition_values.kind_of_iceberg_type(_source_type(table, column)) == "date":
        transform = "identity"  # days(d) of a DATE column holds one value per partition
    if transform is None:
        return (
            None,
            "identity",
            (
                f"base table '{name.qualified}' is partitioned by {fields}: not a transform partition change "
                "tracking can map (identity, year, month, day, hour)"
            ),
        )
    return column, transform, None


def _source_type(table: Table, column: str | None) -> Any:
    """The pyiceberg type of the partition source column (None when unpartitioned)."""
    return table.schema().find_field(column).field_type if column else None


def _text(transform: str, value: Any, source_type: Any) -> str | None:
    """The text of one partition value (physical, or as partition metadata gives it) as
    the first value of the source column it covers.

    >>> from pyiceberg.types import DateType, TimestampType
    >>> _text("day", 19727, TimestampType()), _text("month", 650, DateType()), _text("hour", 473448, TimestampType())
    ('2024-01-05 00:00:00', '2024-03-01', '2024-01-05 00:00:00')
    >>> _text("year", 54, TimestampType()), _text("day", date(2024, 1, 5), DateType())
    ('2024-01-01 00:00:00', '2024-01-05')
    >>> _text("identity", 19727, DateType())
    '2024-01-05'
    """
    if value is None:
        return None
    if transform == "identity":
        return partition_values.to_text(partition_values.from_iceberg_physical(value, source_type))
    if isinstance(value, date):
        start = datetime(value.year, value.month, value.day)
    elif transform == "year":
        start = datetime(1970 + int(value), 1, 1)
    elif transform == "month":
        start = datetime(1970 + int(value) // 12, int(value) % 12 + 1, 1)
    elif transform == "day":
        start = _EPOCH + timedelta(days=int(value))
    else:
        start = _EPOCH + timedelta(hours=int(value))
    is_date = partition_values.kind_of_iceberg_type(source_type) == "date"
    return partition_values.to_text(start.date() if is_date else start)


def _versions(
    table: Table, snapshot_id: int, column: str | None, transform: str, source_type: Any
) -> dict[str, tuple[str, float | None]]:
    """Partition key -> (last updated snapshot id, its epoch seconds) from partition metadata;
    without ``column`` (no reference table) one key ``""``, versioned by the snapshot."""
    if column is None:
        snap = table.snapshot_by_id(snapshot_id)
        return {UNPARTITIONED: (str(snapshot_id), snap.timestamp_ms / 1000 if snap else None)}
    out: dict[str, tuple[str, float | None]] = {}
    for r in table.inspect.partitions(snapshot_id=snapshot_id).to_pylist():
        part = r.get("partition") or {}
        raw = next(iter(part.values())) if part else None
        updated = r.get("last_updated_at")  # naive UTC
        key = partition_path(column, _text(transform, raw, source_type))
        at = updated.replace(tzinfo=UTC).timestamp() if updated else None
        out[key] = (str(r.get("last_updated_snapshot_id") or snapshot_id), at)
    return out


def _check_deletes(pinned: PinnedTable) -> None:
    """Refuse to apply more delete files than the catalog's ``sparkmv.max-delete-files``."""
    name = ObjectName.parse(pinned.name, allow_reserved=True)
    props = pinned.catalog_properties or {}
    count = sum(p.delete_files for p in pinned.partitions.values())
    limit = external.max_deletes(name.catalog, props)
    if count > limit:
        raise RefreshError(
            f"base table '{name.qualified}' has {count} delete files at snapshot {pinned.snapshot_id}, more than "
            f"{external.MAX_DELETE_FILES_PROPERTY} = {limit} of catalog '{name.catalog}'; compact the table "
            "(rewrite its data files) or raise the limit"
        )


def read(spark: SparkSession, pinned: PinnedTable, partitions: set[str] | None = None) -> DataFrame:
    """A DataFrame over the pinned snapshot of an external table (of ``partitions`` only,
    when given): the files of partitions without delete files read by Spark as Parquet,
    the others by Spark with their position deletes applied (a merge-on-read scan,
    :mod:`sparkmv.storage.position_deletes`), in one union.

    Raises:
        RefreshError: partitions with delete files are read and the snapshot carries more
            than the catalog's ``sparkmv.max-delete-files``, or equality delete files.
    """
    from sparkmv.sources import iceberg
    from sparkmv.storage.schema import schema_from_json

    chosen = {k: p for k, p in pinned.partitions.items() if partitions is None or k in partitions}
    if pinned.files_from_snapshot and any(not p.files for p in chosen.values()):  # stored without file lists
        listed = snapshot_files(pinned, set(chosen))
        chosen = {k: dataclasses.replace(p, files=listed[k]) for k, p in chosen.items()}
        pinned = dataclasses.replace(pinned, partitions=chosen)
    with_deletes = {k for k, p in chosen.items() if p.delete_files}
    plain = iceberg.read(spark, pinned, set(chosen) - with_deletes)
    if not with_deletes:
        return plain
    _check_deletes(pinned)
    files = sorted({f for k in with_deletes for f in chosen[k].files})
    schema = schema_from_json(pinned.schema_json)
    applied = position_deletes.read_applying(spark, files, schema, _deleted(pinned, set(files)))
    return plain.unionByName(applied)


def _deleted(pinned: PinnedTable, files: set[str]) -> pa.Table:
    """The positions deleted from data ``files`` at the pinned snapshot (``file_path``, ``pos``)."""
    import pyarrow.compute as pc

    assert pinned.snapshot_id is not None
    every = _deleted_at(pinned.name, pinned.snapshot_id, json.dumps(pinned.catalog_properties, sort_keys=True))
    return every.filter(pc.is_in(every.column("file_path"), value_set=pa.array(sorted(files), pa.string())))


@lru_cache(maxsize=16)
def _deleted_at(name: str, snapshot_id: int, properties: str) -> pa.Table:
    """Every position deleted at snapshot ``snapshot_id`` of external table ``name`` (a
    snapshot never changes: a run's several reads of it plan and read its delete files once)."""
    table_name = ObjectName.parse(name, allow_reserved=True)
    table = external.load_table(table_name, json.loads(properties))
    tasks = [t for t in plan(table_name, table, snapshot_id) if t.delete_files]
    return position_deletes.deleted_positions(table.io, tasks)
