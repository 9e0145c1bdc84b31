"""Partition metadata read from the manifests equals pyiceberg's ``inspect.partitions``
(through pyarrow), for identity partitions of every typed kind, after appends, an overwrite
of one partition and a delete."""

from __future__ import annotations

from datetime import UTC, date, datetime
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from pyiceberg.catalog.sql import SqlCatalog
from pyiceberg.expressions import EqualTo
from pyiceberg.partitioning import PartitionField, PartitionSpec
from pyiceberg.schema import Schema
from pyiceberg.transforms import IdentityTransform
from pyiceberg.types import DateType, IcebergType, LongType, NestedField, StringType, TimestampType, TimestamptzType

from sparkmv.storage.iceberg import partition_text
from sparkmv.storage.iceberg_partitions import partitions

KINDS: list[tuple[IcebergType, pa.DataType, list[Any]]] = [
    (StringType(), pa.large_string(), ["a", "b", None]),
    (LongType(), pa.int64(), [1, 2, None]),
    (DateType(), pa.date32(), [date(2024, 1, 1), date(2024, 2, 29), None]),
    (TimestampType(), pa.timestamp("us"), [datetime(2024, 1, 1, 10), datetime(2024, 1, 2, 11, 30), None]),
    (
        TimestamptzType(),
        pa.timestamp("us", "UTC"),
        [datetime(2024, 1, 1, 10, tzinfo=UTC), datetime(2024, 3, 1, tzinfo=UTC), None],
    ),
]


def _inspected(table: Any) -> list[tuple[Any, ...]]:
    """What IcebergStore.partitions returned before: from ``inspect.partitions``."""
    out = []
    for r in table.inspect.partitions().to_pylist():
        part = r.get("partition") or {}
        updated = r.get("last_updated_at")
        out.append(
            (
                partition_text(next(iter(part.values()))) if part else None,
                int(r.get("last_updated_snapshot_id") or 0),
                updated.replace(tzinfo=UTC).timestamp() if updated else None,
                int(r["record_count"]),
                int(r["total_data_file_size_in_bytes"]),
            )
        )
    return sorted(out, key=str)


@pytest.mark.parametrize("kind", KINDS, ids=[str(k[0]) for k in KINDS])
def test_equal_to_inspect_partitions(tmp_path: Path, kind: tuple[IcebergType, pa.DataType, list[Any]]) -> None:
    iceberg_type, arrow_type, values = kind
    catalog = SqlCatalog("t", uri=f"sqlite:///{tmp_path / 'c.db'}", warehouse=tmp_path.as_uri())
    catalog.create_namespace("db")
    schema = Schema(NestedField(1, "p", iceberg_type, required=False), NestedField(2, "n", LongType(), required=False))
    table = catalog.create_table(
        ("db", "t"), schema=schema, partition_spec=PartitionSpec(PartitionField(1, 1000, IdentityTransform(), "p"))
    )
    arrow = pa.schema([("p", arrow_type), ("n", pa.int64())])

    def rows(ps: list[Any], n: int) -> pa.Table:
        return pa.Table.from_pylist([{"p": p, "n": n + i} for i, p in enumerate(ps)], schema=arrow)

    table.append(rows(values, 0))
    table.append(rows(values[:2], 10))
    table.overwrite(rows([values[0]], 20), overwrite_filter=EqualTo("p", values[0]))
    table.delete(EqualTo("n", 11))
    table = catalog.load_table(("db", "t"))
    ours = sorted(
        (
            (p.value, p.last_updated_snapshot_id, p.last_updated_at, p.record_count, p.size_bytes)
            for p in partitions(table)
        ),
        key=str,
    )
    assert ours == _inspected(table)
    # a: overwritten by 1 row; b: 2 appended, 1 deleted; NULL: 1
    assert sorted(((p[0], p[3]) for p in ours), key=str) == sorted([(partition_text(v), 1) for v in values], key=str)
    first = table.snapshots()[0].snapshot_id
    assert sorted(((p.value, p.record_count) for p in partitions(table, first)), key=str) == sorted(
        [(partition_text(v), 1) for v in values], key=str
    )
