"""Python materialized views whose DataFrame plan translates to SQL are kept as SQL MVs: after
an append, AUTO refreshes them by PCT or INCREMENTAL, and each equals DuckDB's result of the
same query over the same files; a plan that cannot be translated (a Python UDF, a LIMIT) is
recomputed whole, with the reason."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from sparkmv.pipeline.project import load_project
from sparkmv.pipeline.run import run_pipeline
from tests.helpers import monthly_sales, write_partition
from tests.oracle import assert_mv_matches
from tests.pipelines.test_pipeline_sql import states, write_project

pytestmark = [pytest.mark.spark]

DEFS = """from pyspark import pipelines as dp
from pyspark.sql import DataFrame, SparkSession, Window
from pyspark.sql import functions as F

spark = SparkSession.active()

@dp.materialized_view(partition_cols=["m"])
def big_sales() -> DataFrame:
    return spark.table("sales").filter(F.col("amount") > 1).select("m", "id", (F.col("amount") * 2).alias("twice"))

@dp.materialized_view(partition_cols=["m"])
def named_sales() -> DataFrame:
    return spark.table("sales").join(spark.table("dim"), "id").select("m", "id", "label", "amount")

@dp.materialized_view(partition_cols=["m"])
def per_month() -> DataFrame:
    return spark.table("sales").groupBy("m").agg(F.sum("amount").alias("total"), F.count("*").alias("n"))

@dp.materialized_view(partition_cols=["m"])
def both() -> DataFrame:
    small = spark.table("sales").filter("amount < 2").select("m", "id")
    return spark.table("sales").filter("amount >= 5").select("m", "id").unionAll(small)

@dp.materialized_view(partition_cols=["m"])
def ranked() -> DataFrame:
    w = Window.partitionBy("m").orderBy(F.desc("amount"), F.asc("id"))
    return spark.table("sales").withColumn("r", F.row_number().over(w))

@dp.materialized_view
def with_udf() -> DataFrame:
    plus = F.udf(lambda x: x + 1, "double")
    return spark.table("sales").select("m", plus("amount").alias("a1"))

@dp.materialized_view
def first_rows() -> DataFrame:
    return spark.table("sales").orderBy("id").limit(5)
"""
EXPECTED = {
    "big_sales": "SELECT m, id, amount * 2 AS twice FROM sales WHERE amount > 1",
    "named_sales": "SELECT s.m, s.id, d.label, s.amount FROM sales AS s JOIN dim AS d ON s.id = d.id",
    "per_month": "SELECT m, sum(amount) AS total, count(*) AS n FROM sales GROUP BY m",
    "both": "SELECT m, id FROM sales WHERE amount >= 5 UNION ALL SELECT m, id FROM sales WHERE amount < 2",
    "ranked": "SELECT id, amount, m, row_number() OVER (PARTITION BY m ORDER BY amount DESC, id) AS r FROM sales",
}


@pytest.fixture
def project(client: Any, tmp_path: Path) -> Path:
    sales = monthly_sales(tmp_path / "sales", 3, 40)
    dim = tmp_path / "dim"
    write_partition(dim, "g", "a", {"id": [0, 1, 100, 203, 900], "label": ["x", "y", "z", "w", "new"]})
    client.sql(f"CREATE EXTERNAL TABLE sales USING parquet LOCATION '{sales}'")
    client.sql(f"CREATE EXTERNAL TABLE dim USING parquet LOCATION '{dim}'")
    return write_project(tmp_path / "py", {"defs.py": DEFS})


def test_translated_python_mvs_refresh_incrementally(client: Any, project: Path, tmp_path: Path) -> None:
    first = run_pipeline(client, load_project(project, lambda: client.spark))
    assert first.state == "COMPLETED", [(r.name, r.reason) for r in first.results]
    assert {r.technique for r in first.results} == {"FULL"}
    kinds = {s.name: s for s in client.status()}
    assert set(EXPECTED) <= set(kinds)  # kept as sparkmv MVs
    assert "with_udf" not in kinds and "first_rows" not in kinds  # plain tables, as before
    for name, query in EXPECTED.items():
        assert_mv_matches(client, name, query)

    again = run_pipeline(client, load_project(project, lambda: client.spark))
    assert {r.name.name: r.state for r in again.results} == dict.fromkeys(
        [*EXPECTED, "with_udf", "first_rows"], "SKIPPED"
    )

    write_partition(tmp_path / "sales", "m", "2024-02", {"id": [900, 901], "amount": [6.5, 0.5]}, "part-1.parquet")
    third = run_pipeline(client, load_project(project, lambda: client.spark))
    got = {r.name.name: r for r in third.results}
    for name, query in EXPECTED.items():
        assert got[name].state == "SUCCESS" and got[name].technique in ("PCT", "INCREMENTAL"), (name, got[name].reason)
        assert got[name].source == "python"
        assert_mv_matches(client, name, query)
    assert states(third)["with_udf"] == ("SUCCESS", "FULL")
    assert got["with_udf"].reason == (
        "an input changed (plan, code or input files); recomputed whole: a user-defined function (<lambda>) "
        "is not incrementally maintainable: sparkmv cannot write it as SQL"
    )
    assert got["first_rows"].technique == "FULL"
    assert (got["first_rows"].reason or "").endswith(
        "recomputed whole: LIMIT is not incrementally maintainable: which rows it keeps depends on every row "
        "of its input"
    )
    udf_rows = sorted((r["m"], r["a1"]) for r in client.table("with_udf").collect())
    assert udf_rows == sorted((r["m"], r["amount"] + 1) for r in client.sql("SELECT m, amount FROM sales").collect())


SWITCH_SQL = """from pyspark import pipelines as dp
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

spark = SparkSession.active()

@dp.materialized_view(partition_cols=["m"])
def totals() -> DataFrame:
    return spark.table("sales").groupBy("m").agg(F.sum("amount").alias("total"))
"""
SWITCH_UDF = SWITCH_SQL.replace('F.sum("amount")', 'F.sum(F.udf(lambda x: x, "double")("amount"))')


def test_python_mv_switches_between_table_and_sql_mv_atomically(client: Any, project: Path, tmp_path: Path) -> None:
    spec = write_project(tmp_path / "sw", {"defs.py": SWITCH_UDF})
    defs = tmp_path / "sw" / "transformations" / "defs.py"
    first = run_pipeline(client, load_project(spec, lambda: client.spark))
    assert states(first) == {"totals": ("SUCCESS", "FULL")}
    assert "totals" not in {s.name for s in client.status()}

    defs.write_text(SWITCH_SQL)  # now translatable: the plain table is replaced by a SQL MV
    second = run_pipeline(client, load_project(spec, lambda: client.spark))
    assert states(second) == {"totals": ("SUCCESS", "FULL")}
    assert (second.results[0].reason or "").startswith("its table replaced by a SQL materialized view of its plan")
    assert "totals" in {s.name for s in client.status()}
    assert_mv_matches(client, "totals", "SELECT m, sum(amount) AS total FROM sales GROUP BY m")

    write_partition(tmp_path / "sales", "m", "2024-03", {"id": [950], "amount": [4.0]}, "part-1.parquet")
    third = run_pipeline(client, load_project(spec, lambda: client.spark))
    assert third.results[0].technique in ("PCT", "INCREMENTAL"), third.results[0].reason
    assert_mv_matches(client, "totals", "SELECT m, sum(amount) AS total FROM sales GROUP BY m")

    defs.write_text(SWITCH_UDF)  # back to a UDF: the MV is replaced by a plain table
    fourth = run_pipeline(client, load_project(spec, lambda: client.spark))
    assert states(fourth) == {"totals": ("SUCCESS", "FULL")}
    assert (fourth.results[0].reason or "").startswith("no longer kept as a SQL materialized view (a user-defined")
    assert "totals" not in {s.name for s in client.status()}
    expected = sorted(tuple(r) for r in client.sql("SELECT m, sum(amount) FROM sales GROUP BY m").collect())
    assert sorted(tuple(r) for r in client.table("totals").collect()) == expected
