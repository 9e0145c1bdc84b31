"""The footers a chunk read when it listed its staged files serve the publish of the same
process: the Iceberg data-file entries (partition, record count, column statistics) are
exactly those read back from the files, and a file not kept, or changed, is read."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
from pyiceberg.io.pyarrow import parquet_file_to_data_file

from sparkmv.names import ObjectName
from sparkmv.storage import footers
from sparkmv.storage.files import collect_staged, write_arrow_staged
from sparkmv.storage.iceberg import IcebergStore
from tests.storage.test_files import SCHEMA, _rows

T = ObjectName("default", "t")


def _entry(data_file: Any) -> tuple[Any, ...]:
    return (
        data_file.file_path,
        data_file.partition,
        data_file.record_count,
        data_file.file_size_in_bytes,
        data_file.column_sizes,
        data_file.value_counts,
        data_file.null_value_counts,
        data_file.nan_value_counts,
        data_file.lower_bounds,
        data_file.upper_bounds,
        data_file.split_offsets,
    )


def test_kept_footers_give_the_entries_read_from_the_files(store: IcebergStore, tmp_path: Path) -> None:
    table = store.create_table(T, SCHEMA, "m")
    write_arrow_staged(_rows(["a", None, "b", "a"]), tmp_path / "s", "m", SCHEMA)
    staged = collect_staged(tmp_path / "s")  # keeps the footers
    assert len(staged.files) == 3
    kept = [footers.data_file(table.io, table.metadata, f) for f in staged.files]
    assert all(footers.take(f) is None for f in staged.files)  # each footer is used once
    read = [parquet_file_to_data_file(table.io, table.metadata, f) for f in staged.files]
    assert [_entry(d) for d in kept] == [_entry(d) for d in read]
    assert sorted((d.partition[0] or "", d.record_count) for d in kept) == [("", 1), ("a", 2), ("b", 1)]


def test_a_file_not_kept_or_of_another_size_is_read(store: IcebergStore, tmp_path: Path) -> None:
    table = store.create_table(T, SCHEMA, "m")
    staged = write_arrow_staged(_rows(["a"]), tmp_path / "s", "m", SCHEMA)
    [uri] = staged.files
    expected = _entry(parquet_file_to_data_file(table.io, table.metadata, uri))
    assert _entry(footers.data_file(table.io, table.metadata, uri)) == expected  # not kept
    other = pq.read_metadata(uri.removeprefix("file://"))
    footers.remember(uri, staged.bytes + 1, other)  # a stale entry: the size differs
    assert _entry(footers.data_file(table.io, table.metadata, uri)) == expected
    assert footers.take(uri) is None


def test_publish_commits_the_kept_entries(store: IcebergStore, tmp_path: Path) -> None:
    store.create_table(T, SCHEMA, "m")
    write_arrow_staged(_rows(["a", "b", "b"]), tmp_path / "s", "m", SCHEMA)
    staged = collect_staged(tmp_path / "s")
    store.publish(T, 1, staged.files, None)
    assert all(footers.take(f) is None for f in staged.files)
    files = sorted((f.partition, f.record_count) for f in store.data_files(store.load(T)))
    assert files == [("a", 1), ("b", 2)]
