"""Storage: Spark-written files committed with IcebergStore.publish and read back;
replacing a partition; a failed write leaves the table as it was."""

from __future__ import annotations

import datetime as dt
import itertools
import re
from pathlib import Path
from typing import Any

import pytest
from pyiceberg.table import Table
from pyiceberg.table.snapshots import Operation
from pyspark.sql import DataFrame, SparkSession

from sparkmv.errors import StorageError
from sparkmv.names import ObjectName
from sparkmv.storage.file_stats import column_ranges
from sparkmv.storage.files import read_files, write_staged
from sparkmv.storage.iceberg import RUN_ID_PROPERTY, IcebergStore
from sparkmv.storage.schema import spark_to_arrow
from tests.helpers import rows_of

pytestmark = pytest.mark.spark

T = ObjectName("default", "t")
SCHEMA = "m string, k int, amount double, ts timestamp, d date"
TS = dt.datetime(2024, 1, 2, 3, 4, 5, 678901)
DAY = dt.date(2024, 1, 2)


def _df(spark: SparkSession, rows: list[tuple[Any, ...]]) -> DataFrame:
    return spark.createDataFrame(rows, SCHEMA)


def _rows(m: str, n: int, base: int = 0) -> list[tuple[Any, ...]]:
    return [(m, base + i, float(base + i) / 2, TS, DAY) for i in range(n)]


def _contents(spark: SparkSession, store: IcebergStore, table: Table | None = None) -> list[tuple[Any, ...]]:
    table = table or store.load(T)
    files = [f.path for f in store.data_files(table)]
    schema = _df(spark, []).schema
    return rows_of(read_files(spark, files, schema))


def _create(store: IcebergStore, spark: SparkSession, partition: str | None = "m") -> Table:
    return store.create_table(T, spark_to_arrow(_df(spark, []).schema), partition)


def test_publish_spark_files_and_read_back(spark: SparkSession, store: IcebergStore, tmp_path: Path) -> None:
    table = _create(store, spark)
    assert store.partition_column(table) == "m"
    assert store.data_files(table) == []
    rows = _rows("a", 3) + _rows("b", 2, 10) + [(None, 99, 0.0, None, None)]
    staged = write_staged(_df(spark, rows), tmp_path / "staging" / "r1", "m")
    assert (staged.rows, len(staged.files)) == (6, 3)
    snapshot = store.publish(T, 1, staged.files, None)
    table = store.load(T)
    assert snapshot == table.current_snapshot().snapshot_id  # type: ignore[union-attr]
    assert store.snapshot_of_run(table, 1) == snapshot
    assert table.current_snapshot().summary[RUN_ID_PROPERTY] == "1"  # type: ignore[union-attr]
    assert _contents(spark, store) == rows_of(_df(spark, rows))
    files = store.data_files(table)
    assert sorted((f.partition is None, f.partition, f.record_count) for f in files) == [
        (False, "a", 3),
        (False, "b", 2),
        (True, None, 1),
    ]
    parts = {p.value: p.record_count for p in store.partitions(table)}
    assert parts == {"a": 3, "b": 2, None: 1}
    # The timestamp came back with its microseconds (TIMESTAMP_MICROS, no INT96).
    assert {r[3] for r in _contents(spark, store) if r[0] == "a"} == {TS}


def test_replace_one_partition(spark: SparkSession, store: IcebergStore, tmp_path: Path) -> None:
    _create(store, spark)
    first = write_staged(_df(spark, _rows("a", 3) + _rows("b", 2)), tmp_path / "s1", "m")
    store.publish(T, 1, first.files, None)
    table = store.load(T)
    a_before = {f.path for f in store.data_files(table) if f.partition == "a"}
    b_updated = {p.value: p.last_updated_snapshot_id for p in store.partitions(table)}["b"]

    second = write_staged(_df(spark, _rows("b", 4, 100)), tmp_path / "s2", "m")
    snapshot = store.publish(T, 2, second.files, ["b"])
    table = store.load(T)
    assert _contents(spark, store) == rows_of(_df(spark, _rows("a", 3) + _rows("b", 4, 100)))
    assert {f.path for f in store.data_files(table) if f.partition == "a"} == a_before
    parts = {p.value: p for p in store.partitions(table)}
    assert {v: p.record_count for v, p in parts.items()} == {"a": 3, "b": 4}
    assert parts["b"].last_updated_snapshot_id == snapshot != b_updated
    assert parts["a"].last_updated_snapshot_id == store.snapshot_of_run(table, 1)
    assert store.snapshot_of_run(table, 2) == snapshot
    # One snapshot per publish: an overwrite when it removes files, an append when it only adds.
    assert [(s.summary.operation, s.summary[RUN_ID_PROPERTY]) for s in table.snapshots()] == [  # type: ignore[union-attr]
        (Operation.APPEND, "1"),
        (Operation.OVERWRITE, "2"),
    ]
    assert table.current_snapshot().summary["deleted-data-files"] == "1"  # type: ignore[union-attr]
    third = write_staged(_df(spark, _rows("c", 1)), tmp_path / "s3", "m")
    store.publish(T, 3, third.files, ["c"])
    assert store.load(T).current_snapshot().summary.operation == Operation.APPEND  # type: ignore[union-attr]


def test_replace_date_partitions(spark: SparkSession, store: IcebergStore, tmp_path: Path) -> None:
    """Replaced partitions are matched as typed values of the partition column."""
    store.create_table(T, spark_to_arrow(_df(spark, []).schema), "d")
    days = [(f"r{i}", i, 1.0, TS, DAY + dt.timedelta(days=i % 3)) for i in range(6)]
    store.publish(T, 1, write_staged(_df(spark, days), tmp_path / "s1", "d").files, None)
    again = [("new", 9, 2.0, TS, DAY + dt.timedelta(days=1))]
    store.publish(T, 2, write_staged(_df(spark, again), tmp_path / "s2", "d").files, ["2024-01-03", "2024-01-09"])
    kept = [r for r in days if r[4] != DAY + dt.timedelta(days=1)]
    assert _contents(spark, store) == rows_of(_df(spark, kept + again))


def test_replace_with_new_and_null_partition(spark: SparkSession, store: IcebergStore, tmp_path: Path) -> None:
    _create(store, spark)
    null1, null7 = (None, 1, 1.0, TS, DAY), (None, 7, 7.0, TS, DAY)
    store.publish(T, 1, write_staged(_df(spark, [*_rows("a", 1), null1]), tmp_path / "s1", "m").files, None)
    staged = write_staged(_df(spark, [*_rows("c", 2), null7]), tmp_path / "s2", "m")
    store.publish(T, 2, staged.files, [None, "c"])
    assert _contents(spark, store) == rows_of(_df(spark, [*_rows("a", 1), *_rows("c", 2), null7]))


def test_full_replace_unpartitioned(spark: SparkSession, store: IcebergStore, tmp_path: Path) -> None:
    table = _create(store, spark, None)
    assert store.partition_column(table) is None
    store.publish(T, 1, write_staged(_df(spark, _rows("a", 5)), tmp_path / "s1", None).files, None)
    store.publish(T, 2, write_staged(_df(spark, _rows("z", 2)), tmp_path / "s2", None).files, None)
    assert _contents(spark, store) == rows_of(_df(spark, _rows("z", 2)))
    # Publishing nothing over nothing-to-replace changes nothing.
    before = store.load(T).current_snapshot().snapshot_id  # type: ignore[union-attr]
    assert store.publish(T, 3, [], []) == before


def test_publish_missing_file_leaves_table_unchanged(spark: SparkSession, store: IcebergStore, tmp_path: Path) -> None:
    _create(store, spark)
    store.publish(T, 1, write_staged(_df(spark, _rows("a", 3) + _rows("b", 2)), tmp_path / "s1", "m").files, None)
    before_snapshot = store.load(T).current_snapshot().snapshot_id  # type: ignore[union-attr]
    before_rows = _contents(spark, store)
    missing = (tmp_path / "nope" / "part-0.parquet").absolute().as_uri()
    good = write_staged(_df(spark, _rows("b", 9)), tmp_path / "s2", "m").files
    with pytest.raises(StorageError, match=r"^commit of run 2 to default\.t failed: .*nope/part-0\.parquet"):
        store.publish(T, 2, [*good, missing], ["b"])
    table = store.load(T)
    assert table.current_snapshot().snapshot_id == before_snapshot  # type: ignore[union-attr]
    assert store.snapshot_of_run(table, 2) is None
    assert _contents(spark, store) == before_rows


def test_exception_mid_transaction_leaves_table_unchanged(
    spark: SparkSession, store: IcebergStore, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The removal of the replaced partition is staged, then adding the files fails: nothing lands."""
    from pyiceberg.table.update.snapshot import _SnapshotProducer

    _create(store, spark)
    store.publish(T, 1, write_staged(_df(spark, _rows("a", 3) + _rows("b", 2)), tmp_path / "s1", "m").files, None)
    before_snapshot = store.load(T).current_snapshot().snapshot_id  # type: ignore[union-attr]
    before_rows = _contents(spark, store)
    staged = write_staged(_df(spark, _rows("b", 9)), tmp_path / "s2", "m")

    def boom(*_args: object, **_kwargs: object) -> None:
        raise OSError("disk full")

    monkeypatch.setattr(_SnapshotProducer, "append_data_file", boom)
    with pytest.raises(StorageError, match=r"^commit of run 2 to default\.t failed: disk full$"):
        store.publish(T, 2, staged.files, ["b"])
    monkeypatch.undo()
    assert store.load(T).current_snapshot().snapshot_id == before_snapshot  # type: ignore[union-attr]
    assert _contents(spark, store) == before_rows


def test_publish_with_stale_expected_snapshot_fails(spark: SparkSession, store: IcebergStore, tmp_path: Path) -> None:
    _create(store, spark)
    first = store.publish(T, 1, write_staged(_df(spark, _rows("a", 1)), tmp_path / "s1", "m").files, None)
    store.publish(T, 2, write_staged(_df(spark, _rows("a", 2)), tmp_path / "s2", "m").files, ["a"])
    staged = write_staged(_df(spark, _rows("a", 3)), tmp_path / "s3", "m")
    with pytest.raises(StorageError, match=r"^table default\.t changed since run 3 planned its publish$"):
        store.publish(T, 3, staged.files, ["a"], expected_snapshot_id=first)
    assert _contents(spark, store) == rows_of(_df(spark, _rows("a", 2)))


def test_create_load_drop(spark: SparkSession, store: IcebergStore, tmp_path: Path) -> None:
    table = _create(store, spark)
    location = Path(table.location().removeprefix("file://"))
    assert location.is_dir()
    assert store.exists(T) and store.list_tables() == [T]
    with pytest.raises(StorageError, match=r"^Iceberg table default\.t already exists$"):
        _create(store, spark)
    store.publish(T, 1, write_staged(_df(spark, _rows("a", 1)), tmp_path / "s1", "m").files, None)
    store.drop_table(T)
    assert not store.exists(T) and store.list_tables() == []
    assert not location.exists()
    with pytest.raises(StorageError, match=r"^Iceberg table default\.t does not exist$"):
        store.load(T)
    store.drop_table(T)  # dropping a missing table is a no-op
    # Round trip: the same name again is a new, empty table.
    table = _create(store, spark)
    assert store.data_files(table) == []


def test_replacing_keeps_no_manifest_without_live_files(
    spark: SparkSession, store: IcebergStore, tmp_path: Path
) -> None:
    """Only the committing snapshot's own manifest of deleted entries stays: repeated
    replacements do not pile up manifests for readers to scan."""
    _create(store, spark)
    store.publish(T, 1, write_staged(_df(spark, _rows("a", 1) + _rows("b", 1)), tmp_path / "s1", "m").files, None)
    for run in range(2, 6):
        staged = write_staged(_df(spark, _rows("ab"[run % 2], 1, run)), tmp_path / f"s{run}", "m")
        store.publish(T, run, staged.files, ["ab"[run % 2]])
    table = store.load(T)
    current = table.current_snapshot()
    assert current is not None
    dead = [m for m in current.manifests(table.io) if not (m.has_added_files() or m.has_existing_files())]
    assert [m.added_snapshot_id for m in dead] == [current.snapshot_id]
    assert _contents(spark, store) == rows_of(_df(spark, _rows("a", 1, 4) + _rows("b", 1, 5)))


def test_replace_listed_files_and_cluster_by_key(spark: SparkSession, store: IcebergStore, tmp_path: Path) -> None:
    table = store.create_table(T, spark_to_arrow(_df(spark, []).schema), None, ["k"])
    assert store.sort_columns(table) == ["k"]
    # Three files of consecutive k ranges, sorted within each.
    staged = write_staged(_df(spark, _rows("a", 30)), tmp_path / "s1", None, cluster_by=["k"], files=3)
    store.publish(T, 1, staged.files, None)
    table = store.load(T)
    ranges = column_ranges(table, table.current_snapshot().snapshot_id, "k")  # type: ignore[union-attr]
    ranges.sort(key=lambda r: r.lower)
    assert len(ranges) == 3 and ranges[0].lower == 0 and ranges[-1].upper == 29
    assert all(a.upper < b.lower for a, b in itertools.pairwise(ranges))
    # Replace exactly the middle file: the other two stay, one commit.
    middle = ranges[1]
    new = write_staged(_df(spark, _rows("z", 1, base=middle.lower)), tmp_path / "s2", None).files
    store.publish(T, 2, new, [], replace_files=[middle.path])
    after = {f.path for f in store.data_files(store.load(T))}
    assert after == {ranges[0].path, ranges[2].path, *new}
    summary = store.load(T).current_snapshot().summary  # type: ignore[union-attr]
    assert summary["operation"] == Operation.OVERWRITE
    assert (summary["deleted-data-files"], summary["added-data-files"]) == ("1", "1")
    # A file no longer in the snapshot: nothing is committed.
    before = store.load(T).current_snapshot().snapshot_id  # type: ignore[union-attr]
    message = f"commit of run 3 to default.t failed: data file {middle.path} to replace is not in the current snapshot"
    with pytest.raises(StorageError, match=f"^{re.escape(message)}$"):
        store.publish(T, 3, [], [], replace_files=[middle.path])
    assert store.load(T).current_snapshot().snapshot_id == before  # type: ignore[union-attr]
