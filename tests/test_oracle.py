"""The MV check (:func:`tests.helpers.assert_mv_matches`, a DuckDB oracle) bites: it fails on
an MV that lost a column of its query and on a bug in sparkmv's reading of base tables,
which a check recomputing the query through sparkmv itself would share and pass."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa
import pyarrow.orc as orc
import pytest

from sparkmv.demo.oracle import _file_scan, _orc
from sparkmv.sources import parquet
from tests.helpers import assert_mv_matches, rows_of, write_partition

QUERY = "SELECT day, k, sum(v) AS s FROM events GROUP BY day, k"


def _setup(client: Any, root: Path) -> None:
    """``events``: two day partitions, the first of two files (4 + 2 rows)."""
    write_partition(root, "day", "2024-01-01", {"k": ["a", "b", "a", "b"], "v": [1, 2, 3, 4]}, file="f1.parquet")
    write_partition(root, "day", "2024-01-01", {"k": ["a", "c"], "v": [10, 20]}, file="f2.parquet")
    write_partition(root, "day", "2024-01-02", {"k": ["a"], "v": [5]}, file="f1.parquet")
    client.sql(f"CREATE EXTERNAL TABLE events USING parquet LOCATION '{root}'")
    client.sql(f"CREATE MATERIALIZED VIEW mv PARTITION BY day AS {QUERY}")
    client.refresh("mv")


@pytest.mark.spark
def test_fails_on_an_mv_missing_a_column_of_its_query(client: Any, tmp_path: Path) -> None:
    """The MV holds ``day, k, s`` (and hidden incremental state, excluded); checked against
    a query with one more column ``n`` (an MV that lost it), the check names the column
    lists (the old check selected only the MV's columns from the query and passed)."""
    _setup(client, tmp_path / "events")
    cmp = assert_mv_matches(client, "mv", QUERY)
    assert (cmp.mv_columns, cmp.rows, cmp.hidden_columns) == (["day", "k", "s"], 4, ["__smv_count", "__smv_nn_2"])
    wider = "SELECT day, k, sum(v) AS s, count(*) AS n FROM events GROUP BY day, k"
    with pytest.raises(
        AssertionError, match=r"columns differ: MV \['day', 'k', 's'\] vs query \['day', 'k', 's', 'n'\]"
    ):
        assert_mv_matches(client, "mv", wider)


@pytest.mark.spark
def test_fails_on_a_base_table_reading_bug(client: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A planted reading bug (pinning a Parquet table drops the last file of every
    partition holding two) makes the MV miss rows of ``f2.parquet``; sparkmv's own
    recomputation misses them too, DuckDB reading the directory does not."""
    real_pin = parquet.pin

    def dropping_pin(*args: Any, **kwargs: Any) -> Any:
        pinned = real_pin(*args, **kwargs)
        parts = {
            k: dataclasses.replace(p, files=p.files[:-1]) if len(p.files) > 1 else p
            for k, p in pinned.partitions.items()
        }
        return dataclasses.replace(pinned, partitions=parts)

    monkeypatch.setattr(parquet, "pin", dropping_pin)
    _setup(client, tmp_path / "events")
    # the bug is planted: the MV lacks key c and the 10 of f2.parquet
    assert [r[1:] for r in rows_of(client.table("mv"))] == [("a", 4), ("b", 6), ("a", 5)]
    with pytest.raises(AssertionError) as failure:
        assert_mv_matches(client, "mv", QUERY)
    message = str(failure.value)
    assert "1 rows only in the MV: [(datetime.date(2024, 1, 1), 'a', 4)]" in message
    assert "rows only in the query result (DuckDB): [(datetime.date(2024, 1, 1), 'a', 14), " in message
    assert "'c', 20)" in message


def test_file_readers_take_hive_partitions_and_skip_hidden_files(tmp_path: Path) -> None:
    """CSV through DuckDB and ORC through Arrow: partition columns from the directory names
    (NULL from Hive's default partition), ``_``/``.`` files and ``.crc`` checksums skipped."""
    for fmt in ("csv", "orc"):
        root = tmp_path / fmt
        for day, k in (("2024-01-01", "a"), ("__HIVE_DEFAULT_PARTITION__", "b")):
            (root / f"day={day}").mkdir(parents=True)
            path = root / f"day={day}" / f"part.{fmt}"
            if fmt == "csv":
                path.write_text(f"k,v\n{k},1\n")
            else:
                orc.write_table(pa.table({"k": [k], "v": [1]}), str(path))
        (root / "day=2024-01-01" / "_SUCCESS").write_text("")
        (root / "day=2024-01-01" / ".part.crc").write_text("x")
    con = duckdb.connect()
    got = con.execute(
        f"SELECT k, v, CAST(day AS VARCHAR) FROM {_file_scan('csv', str(tmp_path / 'csv'), {'header': 'true'})}"
    )
    assert sorted(got.fetchall(), key=str) == [("a", 1, "2024-01-01"), ("b", 1, None)]
    table = _orc(str(tmp_path / "orc"))
    assert sorted(zip(*table.to_pydict().values(), strict=True), key=str) == [("a", 1, "2024-01-01"), ("b", 1, None)]
