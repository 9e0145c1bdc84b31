"""External CSV, JSON and ORC tables: CREATE with reader OPTIONS, an MV over each, an outside
writer's new file in one partition, and PCT refreshing exactly the MV partition it feeds.
The MV is compared with its query recomputed without sparkmv: DuckDB over the CSV/JSON
files, pyarrow's ORC reader for ORC."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.orc as orc
import pytest

from sparkmv.errors import SourceError
from tests.helpers import rows_of

pytestmark = [pytest.mark.spark]

QUERY = "SELECT d, k, sum(v) AS total, count(*) AS n FROM t GROUP BY d, k"
Rows = list[tuple[str, int]]


def _write(root: Path, fmt: str, day: str, rows: Rows, file: str) -> None:
    """One file of ``rows`` (k, v) in partition ``d=day`` (an outside writer)."""
    directory = root / f"d={day}"
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"{file}.{fmt}"
    if fmt == "csv":
        path.write_text("k;v\n" + "".join(f"{k};{v}\n" for k, v in rows))
    elif fmt == "json":
        path.write_text("".join(f'{{"k": "{k}", "v": {v}}}\n' for k, v in rows))
    else:
        orc.write_table(pa.table({"k": [k for k, _ in rows], "v": [v for _, v in rows]}), str(path))


def _expected(root: Path, fmt: str) -> list[tuple[Any, ...]]:
    """The MV's query over the files, computed without sparkmv or Spark."""
    import duckdb

    if fmt == "orc":
        tables = []
        for path in sorted(root.rglob("*.orc")):
            data = orc.read_table(str(path))
            tables.append(data.append_column("d", pa.array([path.parent.name.split("=", 1)[1]] * data.num_rows)))
        rel = pa.concat_tables(tables)  # noqa: F841 - read by DuckDB by name
        sql = "SELECT d, k, sum(v), count(*) FROM rel GROUP BY d, k"
    elif fmt == "csv":
        sql = (
            f"SELECT d, k, sum(v), count(*) FROM read_csv('{root}/*/*.csv', delim=';', header=true, "
            "hive_partitioning=true, hive_types={'d': 'VARCHAR'}) GROUP BY d, k"
        )
    else:
        sql = (
            f"SELECT d, k, sum(v), count(*) FROM read_json_auto('{root}/*/*.json', hive_partitioning=true, "
            "hive_types={'d': 'VARCHAR'}) GROUP BY d, k"
        )
    got = duckdb.sql(sql).fetchall()
    return sorted((str(d), k, int(total), int(n)) for d, k, total, n in got)


def _mv_rows(client: Any) -> list[tuple[Any, ...]]:
    return sorted((str(d), k, int(total), int(n)) for d, k, total, n in rows_of(client.table("mv")))


def _chunk_partitions(client: Any, run_id: int) -> list[Any]:
    return [p for c in client.chunks(run_id) for p in c["partitions"]]


@pytest.mark.parametrize("fmt", ["csv", "json", "orc"])
def test_external_table_outside_append_refreshes_one_partition(
    make_client: Callable[..., Any], tmp_path: Path, fmt: str
) -> None:
    root = tmp_path / "data"
    _write(root, fmt, "2024-01-01", [("a", 1), ("b", 2)], "f0")
    _write(root, fmt, "2024-01-02", [("a", 10)], "f0")
    client = make_client()
    options = " OPTIONS ('header' = 'true', 'delimiter' = ';')" if fmt == "csv" else ""
    msg = client.execute(f"CREATE EXTERNAL TABLE t USING {fmt}{options} LOCATION '{root}'").message
    assert msg == f"created external table 't' ({fmt}) partitioned by d"
    assert [tuple(r) for r in client.sql("DESCRIBE t").collect()] == [
        ("k", "string", False),
        ("v", "bigint" if fmt != "csv" else "int", False),
        ("d", "date", True),
    ]
    client.sql(f"CREATE MATERIALIZED VIEW mv PARTITION BY d AS {QUERY}")
    assert (
        _mv_rows(client)
        == _expected(root, fmt)
        == [
            ("2024-01-01", "a", 1, 1),
            ("2024-01-01", "b", 2, 1),
            ("2024-01-02", "a", 10, 1),
        ]
    )

    _write(root, fmt, "2024-01-02", [("a", 5), ("c", 7)], "f1")  # an outside append
    run = client.refresh("mv")
    assert (run.state, run.mode) == ("SUCCESS", "PCT"), run
    assert [str(p) for p in _chunk_partitions(client, run.run_id)] == ["2024-01-02"]
    assert _mv_rows(client) == _expected(root, fmt)
    assert ("2024-01-02", "a", 15, 2) in _mv_rows(client)
    assert client.refresh("mv").state == "SKIPPED"


def test_csv_options_are_used_for_every_read(make_client: Callable[..., Any], tmp_path: Path) -> None:
    """Unpartitioned CSV with a header and a delimiter; a file added later is read with the
    same options and the schema stored at CREATE."""
    root = tmp_path / "csv"
    root.mkdir()
    (root / "a.csv").write_text("k|v\nx|1\n")
    client = make_client()
    client.sql(f"CREATE EXTERNAL TABLE t USING csv OPTIONS (header = 'true', delimiter = '|') LOCATION '{root}'")
    client.sql("CREATE MATERIALIZED VIEW mv AS SELECT k, sum(v) AS total FROM t GROUP BY k")
    (root / "b.csv").write_text("k|v\nx|2\ny|3\n")
    run = client.refresh("mv")
    assert run.state == "SUCCESS", run
    assert rows_of(client.table("mv")) == [("x", 3), ("y", 3)]


def test_orc_location_without_orc_files_is_refused(make_client: Callable[..., Any], tmp_path: Path) -> None:
    root = tmp_path / "notorc"
    root.mkdir()
    (root / "a.orc").write_text("k,v\n")
    client = make_client()
    with pytest.raises(SourceError, match=rf"^LOCATION '{root}' holds no ORC files$"):
        client.sql(f"CREATE EXTERNAL TABLE t USING orc LOCATION '{root}'")
    with client.runtime.catalog.read() as s:
        assert client.runtime.catalog.objects.list(s) == []


def test_an_outside_append_to_a_json_table_is_applied_incrementally(
    make_client: Callable[..., Any], tmp_path: Path
) -> None:
    root = tmp_path / "data"
    _write(root, "json", "2024-01-01", [("a", 1), ("b", 2)], "f0")
    client = make_client()
    client.sql(f"CREATE EXTERNAL TABLE t USING json LOCATION '{root}'")
    client.sql(f"CREATE MATERIALIZED VIEW mv PARTITION BY d PROPERTIES ('refresh_mode' = 'INCREMENTAL') AS {QUERY}")
    _write(root, "json", "2024-01-01", [("a", 5)], "f1")
    run = client.refresh("mv")
    assert (run.state, run.mode) == ("SUCCESS", "INCREMENTAL"), run
    assert _mv_rows(client) == _expected(root, "json") == [("2024-01-01", "a", 6, 2), ("2024-01-01", "b", 2, 1)]
