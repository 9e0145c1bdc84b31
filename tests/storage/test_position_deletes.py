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


def _reported(spark, files: list[str]) -> set[str]:  # type: ignore[no-untyped-def]
    rows = spark.read.schema(_schema()).parquet(*files).select("_metadata.file_path").distinct().collect()
    return {r[0] for r in rows}


@pytest.mark.parametrize("spelling", ["file-uri", "absolute-path"])
def test_spellings_are_what_spark_reports_learned_from_its_listing(
    spark, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, spelling: str
) -> None:
    monkeypatch.setattr(position_deletes, "_SPELLINGS", {})
    monkeypatch.setattr(position_deletes, "_PREFIXES", {})
    files = _files(tmp_path)
    if spelling == "absolute-path":
        files = [f.removeprefix("file://") for f in files]
    spellings = position_deletes.spark_spellings(spark, files, _schema())
    assert set(spellings.values()) == _reported(spark, files)
    assert all("a%20b+c%25d" in s for s in spellings.values())
    assert position_deletes._PREFIXES == {"file": ("file://", "file:")}  # learned from one file


def test_a_scheme_whose_prefix_is_not_learned_is_read_by_a_job(
    spark, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(position_deletes, "_SPELLINGS", {})
    monkeypatch.setattr(position_deletes, "_PREFIXES", {"file": ("file://elsewhere", "file:")})
    files = _files(tmp_path)
    read: list[list[str]] = []
    job = position_deletes._read_spellings
    monkeypatch.setattr(position_deletes, "_read_spellings", lambda s, f, sc: read.append(f) or job(s, f, sc))
    spellings = position_deletes.spark_spellings(spark, files, _schema())
    assert read == [files]
    assert set(spellings.values()) == _reported(spark, files)
    deleted = pa.table({"file_path": [files[1]], "pos": pa.array([0], pa.int64())})
    rows = position_deletes.read_applying(spark, files, _schema(), deleted)
    assert sorted(r.k for r in rows.collect()) == [0, 1, 2, 3, 4, 101, 102, 103, 104]
