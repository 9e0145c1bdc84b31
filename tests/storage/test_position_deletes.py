"""Merge-on-read scans in Spark: data files with their deleted positions applied, and the
rows at given positions, over paths Spark spells differently from Iceberg."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from sparkmv.storage import position_deletes
from sparkmv.storage.schema import arrow_to_spark

pytestmark = pytest.mark.spark


def _files(tmp_path: Path) -> list[str]:
    """Two data files in a directory whose name needs escaping in a URL (blank, '+', '%')."""
    folder = tmp_path / "a b+c%d"
    folder.mkdir()
    out = []
    for n, start in (("one.parquet", 0), ("two.parquet", 100)):
        pq.write_table(pa.table({"k": pa.array(range(start, start + 5), pa.int64())}), folder / n)
        out.append("file://" + str(folder / n))
    return out


def _schema():  # type: ignore[no-untyped-def]
    return arrow_to_spark(pa.schema([pa.field("k", pa.int64())]))


def test_read_applying_removes_exactly_the_deleted_positions(spark, tmp_path: Path) -> None:
    one, two = _files(tmp_path)
    deleted = pa.table({"file_path": [one, one, two], "pos": pa.array([0, 3, 4], pa.int64())})
    rows = position_deletes.read_applying(spark, [one, two], _schema(), deleted)
    assert sorted(r.k for r in rows.collect()) == [1, 2, 4, 100, 101, 102, 103]
    assert rows.columns == ["k"]


def test_read_at_returns_the_rows_at_the_positions_with_their_columns(spark, tmp_path: Path) -> None:
    one, two = _files(tmp_path)
    positions = pa.table(
        {"file_path": [one, two], "pos": pa.array([2, 1], pa.int64()), "s": pa.array([-1, 1], pa.int32())}
    )
    rows = position_deletes.read_at(spark, [one, two], _schema(), positions)
    assert sorted((r.k, r.s) for r in rows.collect()) == [(2, -1), (101, 1)]


def test_no_deleted_positions_reads_the_files_plainly(spark, tmp_path: Path) -> None:
    files = _files(tmp_path)
    empty = pa.table({"file_path": pa.array([], pa.string()), "pos": pa.array([], pa.int64())})
    assert position_deletes.read_applying(spark, files, _schema(), empty).count() == 10
