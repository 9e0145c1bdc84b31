"""Deleting Iceberg rows merge-on-read, as Spark, Trino or Flink do with
``write.delete.mode = merge-on-read``: an outside writer for the demo, the benchmarks and the
tests. pyiceberg 0.12 deletes only by copy-on-write (rewriting every data file holding a
deleted row), so the delete files are written with pyarrow in the Iceberg spec's format and
committed through pyiceberg's transaction API in a delete manifest."""

from __future__ import annotations

import os
import uuid
from collections.abc import Sequence
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from pyiceberg.manifest import (
    DataFile,
    DataFileContent,
    FileFormat,
    ManifestContent,
    ManifestEntry,
    ManifestEntryStatus,
    ManifestFile,
    ManifestWriterV2,
)
from pyiceberg.table import Table
from pyiceberg.table.snapshots import Operation
from pyiceberg.table.update.snapshot import _FastAppendFiles

# Reserved field ids of a position delete file (Iceberg spec, "Position Delete Files").
_SCHEMA = pa.schema(
    [
        pa.field("file_path", pa.string(), nullable=False, metadata={"PARQUET:field_id": "2147483546"}),
        pa.field("pos", pa.int64(), nullable=False, metadata={"PARQUET:field_id": "2147483545"}),
    ]
)


class _DeleteManifestWriter(ManifestWriterV2):
    def content(self) -> ManifestContent:  # type: ignore[override]
        return ManifestContent.DELETES


class _AddDeletes(_FastAppendFiles):
    """A snapshot that adds delete files (in their own delete manifest) and keeps every
    manifest of its parent."""

    deletes: list[DataFile]

    def _manifests(self) -> list[ManifestFile]:
        spec = self._transaction.table_metadata.spec()
        writer = _DeleteManifestWriter(spec, self.schema(), self.new_manifest_output(), self._snapshot_id, "deflate")
        with writer:
            for f in self.deletes:
                writer.add_entry(
                    ManifestEntry.from_args(
                        status=ManifestEntryStatus.ADDED,
                        snapshot_id=self._snapshot_id,
                        sequence_number=None,
                        file_sequence_number=None,
                        data_file=f,
                    )
                )
        return [writer.to_manifest_file(), *self._existing_manifests()]


def commit_deletes(table: Table, deletes: list[DataFile]) -> None:
    """Commit delete files (position or equality) in one ``delete`` snapshot."""
    with table.transaction() as tx:
        producer = _AddDeletes(Operation.DELETE, tx, table.io)
        producer.deletes = deletes
        producer.commit()


def equality_delete(table: Table, column: str, field_id: int, values: pa.Array, partition: Any) -> None:
    """Commit one equality delete file deleting the rows whose ``column`` is in ``values``
    in the partition ``partition`` (a pyiceberg Record) of ``table``."""
    out = table.location().removeprefix("file://") + f"/data/eq-delete-{uuid.uuid4().hex}.parquet"
    schema = pa.schema([pa.field(column, values.type, metadata={"PARQUET:field_id": str(field_id)})])
    pq.write_table(pa.table([values], schema=schema), out)
    commit_deletes(
        table,
        [
            DataFile.from_args(
                content=DataFileContent.EQUALITY_DELETES,
                file_path="file://" + out,
                file_format=FileFormat.PARQUET,
                partition=partition,
                record_count=len(values),
                file_size_in_bytes=os.path.getsize(out),
                equality_ids=[field_id],
                spec_id=table.spec().spec_id,
            )
        ],
    )


def delete_rows(table: Table, predicate: Any, columns: Sequence[str] | None = None, per_partition: bool = False) -> int:
    """Delete the rows of ``table`` where ``predicate(arrow_table) -> boolean mask`` holds
    (the table's ``columns`` only, when given: all by default), in one ``delete`` snapshot of
    position delete files: one per data file holding such rows, or with ``per_partition``
    one per partition covering all its data files (as Spark's merge-on-read writes them).
    Returns the rows deleted."""
    found: dict[Any, list[tuple[Any, pa.Table]]] = {}
    deleted = 0
    for task in table.scan().plan_files():
        path = task.file.file_path
        rows = pq.read_table(path.removeprefix("file://"), columns=list(columns) if columns else None)
        positions = pc.indices_nonzero(predicate(rows)).cast(pa.int64())
        if len(positions) == 0:
            continue
        part = pa.table([pa.array([path] * len(positions)), positions], schema=_SCHEMA)
        key: Any = (task.file.spec_id, str(task.file.partition)) if per_partition else path
        found.setdefault(key, []).append((task.file, part))
        deleted += len(positions)
    commit_deletes(table, [_position_file(table, entries) for entries in found.values()])
    return deleted


def _position_file(table: Table, entries: list[tuple[Any, pa.Table]]) -> DataFile:
    """One position delete file of the deleted positions of ``entries`` (data file, its
    positions), sorted by file and position as the spec requires."""
    out = table.location().removeprefix("file://") + f"/data/delete-{uuid.uuid4().hex}.parquet"
    rows = pa.concat_tables([p for _, p in entries]).sort_by([("file_path", "ascending"), ("pos", "ascending")])
    pq.write_table(rows, out)
    first = entries[0][0]
    return DataFile.from_args(
        content=DataFileContent.POSITION_DELETES,
        file_path="file://" + out,
        file_format=FileFormat.PARQUET,
        partition=first.partition,
        record_count=rows.num_rows,
        file_size_in_bytes=os.path.getsize(out),
        spec_id=first.spec_id,
    )
