"""SQL constructs of SDP definition files run by ``sparkmv pipeline run``: ``format.`path```
references, persisted views, column lists, several partition columns, ``CLUSTER BY``,
``SET`` and ``${key}``, ``USE SCHEMA``; each table compared with DuckDB over the same files
or with the rows expected."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import duckdb
import pytest

from sparkmv.names import ObjectName, path_table_name
from sparkmv.pipeline.model import PipelineDefinitionError
from sparkmv.pipeline.project import load_project
from sparkmv.pipeline.run import run_pipeline
from tests.helpers import monthly_sales, write_partition
from tests.pipelines.test_against_spark_pipelines import _sdp, work  # noqa: F401  (work: a fixture)

pytestmark = [pytest.mark.spark]

SPEC = 'name: c\nstorage: {root}/storage\nconfiguration:\n  factor: "3"\nlibraries:\n  - glob:\n      include: t/**\n'


def project(root: Path, files: dict[str, str]) -> Path:
    (root / "t").mkdir(parents=True)
    (root / "spark-pipeline.yml").write_text(SPEC.format(root=root))
    for name, text in files.items():
        (root / "t" / name).write_text(text)
    return root / "spark-pipeline.yml"


def rows(client: Any, table: str, columns: list[str]) -> list[tuple[Any, ...]]:
    return sorted(tuple(r[c] for c in columns) for r in client.table(table).collect())


def duck(sql: str) -> list[tuple[Any, ...]]:
    return sorted(duckdb.sql(sql).fetchall())


def states(result: Any) -> dict[str, tuple[str, str | None]]:
    return {r.name.display: (r.state, r.technique) for r in result.results}


def test_path_references_views_columns_and_partitions(client: Any, tmp_path: Path) -> None:
    sales = monthly_sales(tmp_path / "sales", 3, 20)
    events = tmp_path / "events"
    events.mkdir()
    (events / "a.json").write_text("".join(json.dumps({"k": i, "tag": "ab"[i % 2]}) + "\n" for i in range(6)))
    notes = tmp_path / "notes"
    notes.mkdir()
    (notes / "a.csv").write_text("1,x\n2,y\n")
    sql = f"""CREATE TEMPORARY VIEW s AS SELECT * FROM parquet.`{sales}`;
CREATE MATERIALIZED VIEW by_month (m STRING COMMENT 'the month', Total DOUBLE, n BIGINT NOT NULL)
  PARTITIONED BY (m, n) CLUSTER BY (m)
AS SELECT m, sum(amount) AS total, count(*) AS n FROM s GROUP BY m;
CREATE VIEW tags (tag COMMENT 'the tag', hits) AS SELECT tag, count(*) AS hits FROM json.`{events}/` GROUP BY tag;
CREATE MATERIALIZED VIEW noted AS SELECT * FROM csv.`{notes}` c;
"""
    spec = project(tmp_path / "p", {"a.sql": sql})
    first = run_pipeline(client, load_project(spec))
    assert states(first) == {n: ("SUCCESS", "FULL") for n in ("by_month", "tags", "noted")}, first
    files = f"read_parquet('{sales}/*/*.parquet', hive_partitioning=true)"
    by_month = f"SELECT m, sum(amount), count(*) FROM {files} GROUP BY m"
    assert rows(client, "by_month", ["m", "Total", "n"]) == duck(by_month)
    assert [f.name for f in client.table("by_month").schema.fields] == ["m", "Total", "n"]
    assert rows(client, "tags", ["tag", "hits"]) == [("a", 3), ("b", 3)]
    assert rows(client, "noted", ["_c0", "_c1"]) == [("1", "x"), ("2", "y")]  # as Spark reads csv.`path`
    with client.runtime.catalog.read() as s:
        row = client.runtime.catalog.objects.find(s, ObjectName("default", "by_month"))
        assert row is not None and row.partition_by == "m"
        table = client.runtime.catalog.objects.find(s, path_table_name("default", "parquet", str(sales)))
        assert table is not None and (table.format, table.location) == ("parquet", str(sales))

    # an outside writer appends to one month of the path: only that month is recomputed
    write_partition(sales, "m", "2024-02", {"id": [900, 901], "amount": [5.0, 6.0]}, "part-1.parquet")
    second = run_pipeline(client, load_project(spec))
    result = next(r for r in second.results if r.name.name == "by_month")
    assert result.state == "SUCCESS" and result.technique in ("PCT", "INCREMENTAL"), result
    assert states(second)["noted"] == ("SKIPPED", "SKIP")
    assert rows(client, "by_month", ["m", "Total", "n"]) == duck(by_month)


def test_set_use_schema_and_variables(client: Any, tmp_path: Path) -> None:
    client.sql("CREATE EXTERNAL TABLE sales USING parquet LOCATION '" + str(monthly_sales(tmp_path / "s", 2, 5)) + "'")
    a = """CREATE MATERIALIZED VIEW plain AS SELECT m, count(*) * ${factor} AS n FROM sales GROUP BY m;
SET spark.sql.ansi.enabled = false;
CREATE MATERIALIZED VIEW lenient AS SELECT CAST('abc' AS INT) AS bad, '${nope}' AS kept;
USE SCHEMA other;
CREATE MATERIALIZED VIEW there AS SELECT m FROM default.plain;
CREATE MATERIALIZED VIEW here AS SELECT m FROM there;
"""
    b = "CREATE MATERIALIZED VIEW strict AS SELECT CAST('abc' AS INT) AS bad"
    spec = project(tmp_path / "p", {"a.sql": a, "b.sql": b})
    loaded = load_project(spec)
    assert loaded.graph.datasets[ObjectName("default", "lenient")].conf == {"spark.sql.ansi.enabled": "false"}
    assert loaded.graph.datasets[ObjectName("default", "strict")].conf == {}  # a SET ends with its file
    result = run_pipeline(client, loaded)
    got = states(result)
    assert got["strict"][0] == "FAILED"  # ANSI: the cast fails, as in SDP
    assert {k: v for k, v in got.items() if k != "strict"} == {
        n: ("SUCCESS", "FULL") for n in ("plain", "lenient", "other.there", "other.here")
    }
    assert rows(client, "plain", ["m", "n"]) == [("2024-01", 15), ("2024-02", 15)]
    assert rows(client, "lenient", ["bad", "kept"]) == [(None, "")]  # an unknown ${key} is empty, as in Spark
    assert rows(client, "other.here", ["m"]) == [("2024-01",), ("2024-02",)]
    assert client.spark.conf.get("spark.sql.ansi.enabled") != "false"  # put back after the dataset


@pytest.mark.parametrize(
    ("sql", "message"),
    [
        (
            "SELECT 1;\nCREATE MATERIALIZED VIEW a (x COMMENT 'c') AS SELECT 1 AS x",
            "expected a type for column x (a materialized view's column list gives types), found 'COMMENT'",
        ),
        ("USE CATALOG lake", "USE CATALOG lake: not a statement of a pipeline's SQL file"),
        ("SET CATALOG lake", "catalog `lake` is not supported"),
        ("SET spark.sql.ansi.enabled", "SET spark.sql.ansi.enabled: a SET in a pipeline's SQL file needs a value"),
        ("CREATE MATERIALIZED VIEW a PARTITIONED BY (year(d)) AS SELECT 1 AS d", "SDP partitions by plain columns"),
        ("CREATE TEMPORARY VIEW s.v AS SELECT 1", "INVALID_TEMP_OBJ_QUALIFIER"),
    ],
)
def test_refused_constructs_name_file_and_line(tmp_path: Path, sql: str, message: str) -> None:
    first = "CREATE MATERIALIZED VIEW ok AS SELECT 1 AS one;\n"
    spec = project(tmp_path / "p", {"a.sql": first + sql.replace("SELECT 1;\n", "")})
    with pytest.raises(PipelineDefinitionError) as info:
        load_project(spec)
    text = str(info.value)
    assert text.startswith(f"{tmp_path / 'p' / 't' / 'a.sql'}: ") and message in text, text
    assert "line 2" in text, text


def test_column_list_type_mismatch_fails_the_dataset_before_it_is_built(client: Any, tmp_path: Path) -> None:
    sql = (
        "CREATE MATERIALIZED VIEW typed (id INT, extra STRING) AS SELECT id FROM range(3);\n"
        "CREATE MATERIALIZED VIEW ok (id BIGINT) AS SELECT id FROM range(2)"
    )
    result = run_pipeline(client, load_project(project(tmp_path / "p", {"a.sql": sql})))
    typed = next(r for r in result.results if r.name.name == "typed")
    assert typed.state == "FAILED"
    assert "USER_SPECIFIED_AND_INFERRED_SCHEMA_NOT_COMPATIBLE" in (typed.reason or ""), typed
    assert "column id is bigint, declared int; declared column extra is not in the query" in (typed.reason or "")
    assert [s.name for s in client.status()] == ["ok"]
    assert rows(client, "ok", ["id"]) == [(0,), (1,)]


def test_plain_sql_reads_a_path_reference(client: Any, tmp_path: Path) -> None:
    sales = monthly_sales(tmp_path / "sales", 2, 4)
    client.sql(f"CREATE MATERIALIZED VIEW t AS SELECT m, count(*) AS n FROM parquet.`{sales}` GROUP BY m")
    assert rows(client, "t", ["m", "n"]) == [("2024-01", 4), ("2024-02", 4)]
    with pytest.raises(Exception, match="does not exist"):
        client.sql(f"CREATE MATERIALIZED VIEW u AS SELECT * FROM parquet.`{tmp_path / 'none'}`")


SDP_SQL = """CREATE TEMPORARY VIEW s AS SELECT * FROM parquet.`{sales}`;
CREATE MATERIALIZED VIEW by_month (m STRING COMMENT 'the month', total DOUBLE, n BIGINT)
  PARTITIONED BY (m, n) AS SELECT m, sum(amount) AS total, count(*) AS n FROM s GROUP BY m;
CREATE VIEW big (m, big_total COMMENT 'x') AS SELECT m, total FROM by_month WHERE total > 10;
CREATE MATERIALIZED VIEW over_big AS SELECT * FROM big;
SET spark.sql.ansi.enabled = false;
CREATE MATERIALIZED VIEW scaled AS SELECT m, total * ${{factor}} AS t3 FROM by_month;
"""
SDP_TABLES = {"by_month": ["m", "total", "n"], "over_big": ["m", "total"], "scaled": ["m", "t3"]}


@pytest.mark.slow
@pytest.mark.long
def test_constructs_give_the_tables_spark_pipelines_gives(client: Any, work: Path) -> None:  # noqa: F811
    """Both tools run the same project on their copy of the data (``work``: the fixture of
    :mod:`tests.pipelines.test_against_spark_pipelines`, its SQL and Python files replaced)."""
    import pyarrow.dataset as pads

    for tool in ("sdp", "sparkmv"):
        (work / tool / "transformations" / "shop.sql").write_text(SDP_SQL.format(sales=work / f"{tool}-sales"))
        (work / tool / "transformations" / "events.py").unlink()
        spec = work / tool / "spark-pipeline.yml"
        spec.write_text(spec.read_text().replace("libraries:", 'configuration:\n  factor: "3"\nlibraries:'))
    _sdp(work, "spark-pipelines", "run", "--remote", "local[2]")
    result = run_pipeline(client, load_project(work / "sparkmv" / "spark-pipeline.yml"))
    assert result.state == "COMPLETED", result
    for table, columns in SDP_TABLES.items():
        data = pads.dataset(str(work / "warehouse" / table), format="parquet", partitioning="hive").to_table()
        expected = sorted(tuple(str(r[c]) for c in columns) for r in data.to_pylist())
        assert sorted(tuple(str(r[c]) for c in columns) for r in client.table(table).collect()) == expected, table


def test_relative_path_and_stream_without_parentheses(client: Any, tmp_path: Path) -> None:
    """A relative ``format.`path``` is read from the spec's folder (where ``spark-pipelines``
    runs), and ``FROM STREAM t`` (the programming guide's spelling) reads stream ``t``."""
    root = tmp_path / "p"
    sql = (
        "CREATE MATERIALIZED VIEW by_month AS SELECT m, count(*) AS n FROM parquet.`data/sales` GROUP BY m;\n"
        "CREATE STREAMING TABLE feed AS SELECT m, id FROM STREAM by_month_src WHERE id > 1;\n"
        "CREATE MATERIALIZED VIEW by_month_src AS SELECT m, id FROM parquet.`data/sales`;\n"
    )
    spec = project(root, {"a.sql": sql})
    sales = monthly_sales(root / "data" / "sales", 2, 3)
    result = run_pipeline(client, load_project(spec))
    assert result.state == "COMPLETED", result
    assert rows(client, "by_month", ["m", "n"]) == duck(
        f"SELECT m, count(*) FROM read_parquet('{sales}/*/*.parquet', hive_partitioning = true) GROUP BY m"
    )
    assert rows(client, "feed", ["m", "id"]) == duck(
        f"SELECT m, id FROM read_parquet('{sales}/*/*.parquet', hive_partitioning = true) WHERE id > 1"
    )
