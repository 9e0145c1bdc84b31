"""Writing a position delete file the way Spark, Trino or Flink do (merge-on-read), for
tests: pyiceberg 0.12 deletes only by copy-on-write, so the delete file is written with
pyarrow in the Iceberg spec's format and committed through pyiceberg's transaction API in a
delete manifest."""

from __future__ import annotations

import uuid
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
        writer = _DeleteManifestWriter(spec, self.schema(), self.new_manifest_output(), self._snapshot_id, "gzip")
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
                file_size_in_bytes=pq.ParquetFile(out).metadata.serialized_size,
                equality_ids=[field_id],
                spec_id=table.spec().spec_id,
            )
        ],
    )


def delete_rows(table: Table, predicate: Any) -> int:
    """Delete the rows of ``table`` where ``predicate(arrow_table) -> boolean mask`` holds,
    by one position delete file per data file holding such rows. Returns rows deleted."""
    deletes: list[DataFile] = []
    deleted = 0
    for task in table.scan().plan_files():
        path = task.file.file_path
        rows = pq.read_table(path.removeprefix("file://"))
        mask = predicate(rows)
        positions = pc.indices_nonzero(mask).cast(pa.int64())
        if len(positions) == 0:
            continue
        out = table.location().removeprefix("file://") + f"/data/delete-{uuid.uuid4().hex}.parquet"
        pq.write_table(pa.table([pa.array([path] * len(positions)), positions], schema=_SCHEMA), out)
        deletes.append(
            DataFile.from_args(
                content=DataFileContent.POSITION_DELETES,
                file_path="file://" + out,
                file_format=FileFormat.PARQUET,
                partition=task.file.partition,
                record_count=len(positions),
                file_size_in_bytes=pq.ParquetFile(out).metadata.serialized_size,
                spec_id=task.file.spec_id,
            )
        )
        deleted += len(positions)
    commit_deletes(table, deletes)
    return deleted
