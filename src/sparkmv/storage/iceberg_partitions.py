"""Per-partition metadata of an Iceberg table's snapshot, read from its manifests in plain
Python (pyiceberg's ``inspect.partitions`` builds a pyarrow table; a read-only process such
as the web UI then never loads pyarrow)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pyiceberg.manifest import DataFileContent
from pyiceberg.partitioning import PartitionField
from pyiceberg.schema import Schema
from pyiceberg.table import Table

from sparkmv.storage import iceberg_manifests, partition_values


@dataclass(frozen=True)
class PartitionInfo:
    """One partition of a table's current snapshot (from Iceberg partition metadata).

    Attributes:
        value: identity partition value as text (None for NULL / unpartitioned).
        last_updated_snapshot_id: the snapshot that last changed this partition.
        last_updated_at: epoch seconds of that change.
        record_count: rows; size_bytes: bytes of data files.
    """

    value: str | None
    last_updated_snapshot_id: int
    last_updated_at: float | None
    record_count: int
    size_bytes: int


def _partition_value(schema: Schema, field: PartitionField, raw: Any) -> Any:
    """A partition field's stored value (days, microseconds) as the typed value the one text
    form is made from (:func:`sparkmv.storage.partition_values.from_iceberg_physical`)."""
    if raw is None:
        return None
    return partition_values.from_iceberg_physical(raw, field.transform.result_type(schema.find_type(field.source_id)))


def partitions(table: Table, snapshot_id: int | None = None) -> list[PartitionInfo]:
    """Per-partition metadata of a snapshot (default: current), as pyiceberg's
    ``inspect.partitions`` gives it, read from the manifests' entries without pyarrow (a
    read-only process such as the web UI then never loads pyarrow): data files' rows and
    bytes per partition; the last change is the newest snapshot that added a live data or
    delete file of the partition. Manifests already read by this process are not read again
    (:mod:`sparkmv.storage.iceberg_manifests`)."""
    snapshot = table.snapshot_by_id(snapshot_id) if snapshot_id is not None else table.current_snapshot()
    if snapshot is None:
        return []
    specs = table.metadata.specs()
    schema = table.schema()
    rows: dict[tuple[Any, ...], dict[str, Any]] = {}
    made: dict[int, Any] = {}
    keys: dict[tuple[int, tuple[Any, ...]], tuple[tuple[str, Any], ...]] = {}
    for entry in iceberg_manifests.live_files(table, snapshot):
        key = keys.get((entry.spec_id, entry.partition))
        if key is None:
            fields = specs[entry.spec_id].fields
            values = [_partition_value(schema, f, entry.partition[i]) for i, f in enumerate(fields)]
            key = keys[(entry.spec_id, entry.partition)] = tuple(
                (f.name, v) for f, v in zip(fields, values, strict=True)
            )
        row = rows.setdefault(key, {"value": key[0][1] if key else None, "records": 0, "bytes": 0})
        if entry.snapshot_id is not None and entry.snapshot_id not in made:
            made[entry.snapshot_id] = table.snapshot_by_id(entry.snapshot_id)
        by = made.get(entry.snapshot_id) if entry.snapshot_id is not None else None
        if by is not None and ("at" not in row or row["at"] < by.timestamp_ms):
            row["at"], row["snapshot"] = by.timestamp_ms, by.snapshot_id
        if entry.content == DataFileContent.DATA.value:
            row["records"] += entry.record_count
            row["bytes"] += entry.size_bytes
    return [
        PartitionInfo(
            value=partition_values.to_text(r["value"]),
            last_updated_snapshot_id=int(r.get("snapshot") or 0),
            last_updated_at=r["at"] / 1000 if "at" in r else None,
            record_count=r["records"],
            size_bytes=r["bytes"],
        )
        for r in rows.values()
    ]
