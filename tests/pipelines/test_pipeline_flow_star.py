"""Streaming tables with several SQL flows selecting ``*`` (``INSERT INTO t BY NAME SELECT *
FROM STREAM(src)``): folded once the sources' schemas are known, columns matched by name; a
column one flow lacks is NULL in its rows and a column of two types is refused, as Spark's SDP
infers the table's schema from its flows. Tables are compared with DuckDB over the same files."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from sparkmv.names import ObjectName
from sparkmv.pipeline.project import load_project
from sparkmv.pipeline.run import RunResult, run_pipeline
from tests.oracle import assert_mv_matches
from tests.pipelines.test_pipeline_sql import write_project

pytestmark = [pytest.mark.spark]

FLOWS = """CREATE STREAMING TABLE events TBLPROPERTIES ('refresh_mode' = 'INCREMENTAL');
CREATE FLOW from_web AS INSERT INTO events BY NAME SELECT * FROM STREAM(web);
CREATE FLOW from_shop AS INSERT INTO events BY NAME SELECT * FROM STREAM(shop);

CREATE STREAMING TABLE sparse;
CREATE FLOW sparse_web AS INSERT INTO sparse BY NAME SELECT * FROM STREAM(web) WHERE amount > 1;
CREATE FLOW sparse_counts AS INSERT INTO sparse BY NAME SELECT id, n FROM STREAM(counts);
"""
EVENTS = "SELECT id, kind, amount FROM web UNION ALL SELECT id, kind, amount FROM shop"
SPARSE = (
    "SELECT id, kind, amount, CAST(NULL AS BIGINT) AS n FROM web WHERE amount > 1 "
    "UNION ALL SELECT id, CAST(NULL AS STRING) AS kind, CAST(NULL AS DOUBLE) AS amount, n FROM counts"
)


def _write(root: Path, name: str, columns: dict[str, list[Any]]) -> None:
    root.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.table(columns), root / name)


def _web(root: Path, ids: range, name: str = "part-0.parquet") -> None:
    kinds = ["ab"[i % 2] for i in ids]
    _write(root / "web", name, {"id": list(ids), "kind": kinds, "amount": [i * 0.5 for i in ids]})


def _shop(root: Path, ids: range, name: str = "part-0.parquet") -> None:  # the same columns, another order
    _write(root / "shop", name, {"amount": [i * 2.0 for i in ids], "kind": ["s"] * len(ids), "id": list(ids)})


def _results(result: RunResult) -> dict[str, tuple[str, str | None]]:
    return {r.name.name: (r.state, r.technique) for r in result.results}


def test_flows_selecting_star_are_unioned_by_name_and_appended_incrementally(client: Any, tmp_path: Path) -> None:
    data = tmp_path / "data"
    _web(data, range(0, 6))
    _shop(data, range(100, 104))
    _write(data / "counts", "part-0.parquet", {"n": [7, 8], "id": [500, 501]})
    for table in ("web", "shop", "counts"):
        client.sql(f"CREATE EXTERNAL TABLE {table} USING parquet LOCATION '{data / table}'")
    spec = write_project(tmp_path / "p", {"flows.sql": FLOWS})

    first = run_pipeline(client, load_project(spec))
    assert _results(first) == {"events": ("SUCCESS", "FULL"), "sparse": ("SUCCESS", "FULL")}
    assert list(client.table("events").columns) == ["id", "kind", "amount"]
    assert_mv_matches(client, "events", EVENTS)
    assert_mv_matches(client, "sparse", SPARSE)
    events = next(r for r in first.results if r.name.name == "events")
    assert events.rows == 6 + 4 and (events.reason or "").startswith("flows from_web, from_shop; created")
    with client.runtime.catalog.read() as s:  # each * expanded in place: the union reads its tables directly
        stored = client.runtime.catalog.objects.find(s, ObjectName("default", "events")).definition
    assert stored == "SELECT `id`, `kind`, `amount` FROM web UNION ALL SELECT `id`, `kind`, `amount` FROM shop"

    # appends to both sources: each new row once, by the INCREMENTAL technique
    _web(data, range(6, 9), "part-1.parquet")
    _shop(data, range(104, 106), "part-1.parquet")
    second = run_pipeline(client, load_project(spec))
    assert _results(second)["events"] == ("SUCCESS", "INCREMENTAL")
    assert next(r for r in second.results if r.name.name == "events").rows == 9 + 6
    assert_mv_matches(client, "events", EVENTS)
    assert_mv_matches(client, "sparse", SPARSE)
    assert tuple(client.sql("SELECT count(*), count(DISTINCT id) FROM events").collect()[0]) == (15, 15)

    third = run_pipeline(client, load_project(spec))
    assert _results(third) == {"events": ("SKIPPED", "SKIP"), "sparse": ("SKIPPED", "SKIP")}


MISMATCH = """CREATE STREAMING TABLE mixed;
CREATE FLOW mixed_web AS INSERT INTO mixed BY NAME SELECT * FROM STREAM(web);
CREATE FLOW mixed_codes AS INSERT INTO mixed BY NAME SELECT * FROM STREAM(codes);

CREATE MATERIALIZED VIEW fine AS SELECT id FROM web;
"""


def test_a_column_of_two_types_is_refused_and_nothing_is_written(client: Any, tmp_path: Path) -> None:
    data = tmp_path / "data"
    _web(data, range(0, 3))
    _write(data / "codes", "part-0.parquet", {"id": ["x1", "x2"], "kind": ["c", "c"]})
    for table in ("web", "codes"):
        client.sql(f"CREATE EXTERNAL TABLE {table} USING parquet LOCATION '{data / table}'")
    spec = write_project(tmp_path / "p", {"mixed.sql": MISMATCH})

    result = run_pipeline(client, load_project(spec))
    assert result.state == "FAILED"
    assert _results(result) == {"mixed": ("FAILED", None), "fine": ("SUCCESS", "FULL")}
    mixed = next(r for r in result.results if r.name.name == "mixed")
    assert mixed.reason == (
        f"{tmp_path / 'p' / 'transformations' / 'mixed.sql'}:3: flow mixed_codes gives column id as STRING, "
        "but flow mixed_web gives it as BIGINT: the schema of streaming table mixed cannot be inferred from "
        'its flows (UNABLE_TO_INFER_PIPELINE_TABLE_SCHEMA: Failed to merge incompatible data types "BIGINT" '
        'and "STRING")'
    )
    assert [s.name for s in client.status()] == ["fine"]
    assert not client.runtime.iceberg.exists(ObjectName("default", "mixed"))


def _fields(ddl: str) -> list[Any]:
    """``name TYPE, ...`` (BIGINT, STRING, DOUBLE) as Spark fields, without a SparkSession."""
    from pyspark.sql.types import DoubleType, LongType, StringType, StructField

    types = {"BIGINT": LongType(), "STRING": StringType(), "DOUBLE": DoubleType()}
    return [StructField(n.strip("`"), types[t]) for n, t in (f.rsplit(" ", 1) for f in ddl.split(", "))]


@pytest.mark.parametrize(
    ("query", "ddl", "expected"),
    [
        (  # t.* of a join expanded in place, a missing column a typed NULL
            "SELECT w.*, c.n FROM web AS w JOIN counts AS c ON w.id = c.id",
            "id BIGINT, amount DOUBLE, n BIGINT",
            "SELECT w.`id`, CAST(NULL AS STRING) AS `kind`, w.`amount`, c.n FROM web AS w JOIN counts AS c "
            "ON w.id = c.id",
        ),
        (  # GROUP BY: read as a derived table (its select list is not reordered)
            "SELECT count(*) AS n, id FROM web GROUP BY 2",
            "n BIGINT, id BIGINT",
            "SELECT `id`, CAST(NULL AS STRING) AS `kind`, CAST(NULL AS DOUBLE) AS `amount`, `n` FROM "
            "(SELECT COUNT(*) AS n, id FROM web GROUP BY 2) AS __smv_flow",
        ),
    ],
)
def test_a_flow_branch_gives_the_table_columns_in_order(query: str, ddl: str, expected: str) -> None:
    from sparkmv.analysis.query import DIALECT, parse_query
    from sparkmv.pipeline.sql_flows import _branch

    columns = [(f.name, f.dataType) for f in _fields("id BIGINT, kind STRING, amount DOUBLE, n BIGINT")]
    assert _branch(parse_query(query), _fields(ddl), columns).sql(DIALECT) == expected


PYTHON = """from pyspark import pipelines as dp
from pyspark.sql import DataFrame, SparkSession

spark = SparkSession.active()
dp.create_streaming_table("feed")


@dp.append_flow(target="feed")
def web_flow() -> DataFrame:
    return spark.readStream.format("parquet").schema("id BIGINT, kind STRING, amount DOUBLE").load("{data}/web")


@dp.append_flow(target="feed")
def shop_flow() -> DataFrame:
    return spark.readStream.format("parquet").schema("amount DOUBLE, kind STRING, id BIGINT").load("{data}/shop")


@dp.append_flow(target="feed")
def count_flow() -> DataFrame:
    return spark.readStream.format("parquet").schema("n BIGINT, id BIGINT").load("{data}/counts")
"""


def _duckdb_feed(data: Path) -> list[tuple[Any, ...]]:
    import duckdb

    query = f"""SELECT id, kind, amount, NULL::BIGINT AS n FROM read_parquet('{data}/web/*.parquet')
    UNION ALL SELECT id, kind, amount, NULL FROM read_parquet('{data}/shop/*.parquet')
    UNION ALL SELECT id, NULL, NULL, n FROM read_parquet('{data}/counts/*.parquet')"""
    return sorted(duckdb.sql(query).fetchall(), key=repr)


def test_python_flows_of_all_columns_are_unioned_by_name(client: Any, tmp_path: Path) -> None:
    data = tmp_path / "data"
    _web(data, range(0, 4))
    _shop(data, range(100, 103))
    _write(data / "counts", "part-0.parquet", {"n": [7], "id": [500]})
    spec = write_project(tmp_path / "p", {"feed.py": PYTHON.replace("{data}", str(data))})
    load = lambda: load_project(spec, lambda: client.spark)  # noqa: E731

    first = run_pipeline(client, load())
    assert _results(first) == {"feed": ("SUCCESS", "FULL")}
    assert list(client.table("feed").columns) == ["id", "kind", "amount", "n"]
    rows = lambda: sorted((tuple(r) for r in client.table("feed").collect()), key=repr)  # noqa: E731
    assert rows() == _duckdb_feed(data)

    _web(data, range(4, 6), "part-1.parquet")
    _shop(data, range(103, 104), "part-1.parquet")
    second = run_pipeline(client, load())
    assert _results(second) == {"feed": ("SUCCESS", "INCREMENTAL")}
    assert (
        second.results[0].reason
        == "flows web_flow, shop_flow, count_flow: appended 3 rows (web_flow 2, shop_flow 1, count_flow 0)"
    )
    assert rows() == _duckdb_feed(data) and len(rows()) == 6 + 4 + 1
