"""Iceberg base tables: materialized views (nested MVs) and any table of the catalog.

The version of a partition is the id of the snapshot that last updated it (Iceberg
partition metadata), as StarRocks tracks Iceberg base tables.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from pyiceberg.table import Table

from sparkmv.names import is_hidden_column
from sparkmv.sources.pinned import UNPARTITIONED, PinnedPartition, PinnedTable, partition_path
from sparkmv.storage.iceberg import DataFile, IcebergStore
from sparkmv.storage.lazy import lazy_module
from sparkmv.storage.spark_json import iceberg_schema_json

if TYPE_CHECKING:
    import pyarrow as pa
else:  # imported where rows are read: a read-only process never loads them
    pa = lazy_module("pyarrow")


if TYPE_CHECKING:  # pyspark only where a DataFrame is made: pinning needs no Spark
    from pyspark.sql import DataFrame, SparkSession


def pin(name: str, table: Table, hidden: bool = False) -> PinnedTable:
    """Pin the current snapshot of ``table``: its files grouped by partition; the schema
    leaves out an MV's hidden state columns unless ``hidden`` (query rewrite reads them)."""
    # Hidden state columns of an MV are not part of what it holds for its readers.
    schema = table.schema()
    try:  # in plain Python: pinning (the web UI's freshness) needs no Spark
        schema_json = iceberg_schema_json(schema, [f for f in schema.fields if hidden or not is_hidden_column(f.name)])
    except NotImplementedError:
        from sparkmv.storage.schema import arrow_to_spark, schema_to_json

        arrow = schema.as_arrow()
        visible = pa.schema([f for f in arrow if hidden or not is_hidden_column(f.name)])
        schema_json = schema_to_json(arrow_to_spark(visible))
    column = IcebergStore.partition_column(table)
    snap = table.current_snapshot()
    if snap is None:
        return PinnedTable(name, "iceberg", schema_json, [column] if column else [], {}, snapshot_id=None)
    infos = {p.value: p for p in IcebergStore.partitions(table)}
    files = group_files(column, IcebergStore.data_files(table))
    partitions: dict[str, PinnedPartition] = {}
    for value, info in infos.items():
        key = partition_key(column, value)
        partitions[key] = PinnedPartition(
            files=sorted(f.path for f in files.get(key, [])),
            version=str(info.last_updated_snapshot_id),
            changed_at=info.last_updated_at,
            bytes=info.size_bytes,
            rows=info.record_count,
        )
    return PinnedTable(
        name, "iceberg", schema_json, [column] if column else [], partitions, snapshot_id=snap.snapshot_id
    )


def partition_key(column: str | None, value: str | None) -> str:
    """The partition path of an identity partition value of ``column`` (``""`` when the
    table is unpartitioned).

    >>> partition_key("d", "2024-01-01"), partition_key("d", None), partition_key(None, None)
    ('d=2024-01-01', 'd=__HIVE_DEFAULT_PARTITION__', '')
    """
    return partition_path(column, value) if column else UNPARTITIONED


def group_files(column: str | None, files: Iterable[DataFile]) -> dict[str, list[DataFile]]:
    """Data files by partition path (:func:`partition_key`), in the order given."""
    out: dict[str, list[DataFile]] = {}
    for f in files:
        out.setdefault(partition_key(column, f.partition), []).append(f)
    return out


def read(spark: SparkSession, pinned: PinnedTable, partitions: set[str] | None = None) -> DataFrame:
    """A DataFrame over the pinned snapshot's files (of ``partitions`` only, when given)."""
    files = [f for key, p in pinned.partitions.items() if partitions is None or key in partitions for f in p.files]
    from sparkmv.storage.files import read_files
    from sparkmv.storage.schema import schema_from_json

    return read_files(spark, files, schema_from_json(pinned.schema_json))
