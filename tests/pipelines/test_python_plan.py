"""The plan → SQL translation of Python materialized views: the SQL returns exactly the
DataFrame's rows and columns; constructs without an exact SQL form are refused by name."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from sparkmv.pipeline.python_plan import Translation, translate
from tests.helpers import rows_of

pytestmark = [pytest.mark.spark]


@pytest.fixture
def views(spark: Any, tmp_path: Path) -> Any:
    spark.range(20).selectExpr(
        "id",
        "id % 3 AS k",
        "CAST(id * 1.5 AS DECIMAL(10,2)) AS amt",
        "date_add(DATE'2024-01-01', CAST(id AS INT)) AS d",
    ).write.parquet(str(tmp_path / "t1"))
    spark.range(3).selectExpr("id AS k", "concat('n', id) AS name").write.parquet(str(tmp_path / "t2"))
    spark.read.parquet(str(tmp_path / "t1")).createOrReplaceTempView("pt_sales")
    spark.read.parquet(str(tmp_path / "t2")).createOrReplaceTempView("pt_dim")
    yield spark
    spark.catalog.dropTempView("pt_sales")
    spark.catalog.dropTempView("pt_dim")


TABLES = {"pt_sales": "default.pt_sales", "pt_dim": "default.pt_dim"}


def shapes(spark: Any) -> dict[str, Callable[[], Any]]:
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    s, d = spark.table("pt_sales"), spark.table("pt_dim")
    return {
        "filter": lambda: s.filter(F.col("amt") > 2).select("id", (F.col("amt") * 2).alias("Twice")),
        "join": lambda: s.join(d, "k").select("id", "name", s.k),
        "left": lambda: s.join(d.filter("k > 0"), s.k == d.k, "left").select(s.id, d.name),
        "anti": lambda: s.join(d.filter("k = 1"), "k", "left_anti"),
        "aggregate": lambda: s.join(d, "k").groupBy("name").agg(F.sum("amt").alias("total"), F.avg("id")),
        "union": lambda: s.select("id", "k").unionByName(s.select("k", "id")),
        "distinct": lambda: s.select("k").distinct(),
        "window": lambda: s.withColumn("r", F.rank().over(Window.partitionBy("k").orderBy(F.desc("amt")))),
        "self join": lambda: s.alias("a").join(s.alias("b"), F.col("a.id") == F.col("b.k")).select("a.id", "b.d"),
        "sql": lambda: spark.sql("SELECT k, count(*) AS n FROM pt_sales WHERE d >= DATE'2024-01-05' GROUP BY k"),
        "case": lambda: s.select(F.when(s.k == 1, "one").otherwise("other").alias("w"), F.lit(10**12).alias("b")),
    }


@pytest.mark.parametrize(
    "shape",
    ["filter", "join", "left", "anti", "aggregate", "union", "distinct", "window", "self join", "sql", "case"],
)
def test_translated_sql_returns_the_dataframes_rows(views: Any, shape: str) -> None:
    df = shapes(views)[shape]()
    translated = translate(df, TABLES)
    assert translated.reason is None and translated.query is not None
    assert "default.pt_sales" in translated.query
    over_views = views.sql(translated.query.replace("default.pt_sales", "pt_sales").replace("default.pt_dim", "pt_dim"))
    assert over_views.columns == df.columns
    assert [f.dataType for f in over_views.schema.fields] == [f.dataType for f in df.schema.fields]
    assert rows_of(over_views) == rows_of(df) and rows_of(df)


def test_the_same_dataframe_gives_the_same_text(views: Any) -> None:
    first = translate(shapes(views)["aggregate"](), TABLES).query
    assert first == translate(shapes(views)["aggregate"](), TABLES).query
    assert first == (
        "SELECT pt_dim.name AS name, SUM(pt_sales.amt) AS total, AVG(pt_sales.id) AS `avg(id)` "
        "FROM default.pt_sales AS pt_sales JOIN default.pt_dim AS pt_dim ON (pt_sales.k = pt_dim.k) "
        "GROUP BY pt_dim.name"
    )


def test_untranslatable_plans_name_the_construct(views: Any, tmp_path: Path) -> None:
    from pyspark.sql import functions as F

    s = views.table("pt_sales")
    refused = {
        "LIMIT is not incrementally maintainable: which rows it keeps depends on every row of its input": s.limit(3),
        "a user-defined function (plus) is not incrementally maintainable: sparkmv cannot write it as SQL": s.select(
            _named_udf("plus")("id").alias("x")
        ),
        "rand is not incrementally maintainable: it is not deterministic": s.select(F.rand().alias("r")),
        "dropDuplicates on some columns is not incrementally maintainable: which row of each group it keeps is "
        "arbitrary": s.dropDuplicates(["k"]),
        "rows made on the driver (createDataFrame, an RDD) is not incrementally maintainable: they are not a "
        "table sparkmv tracks": views.createDataFrame([(1,)], "x INT"),
        "a file read (spark.read...) is not incrementally maintainable: it is not a sparkmv table (register it "
        "with CREATE EXTERNAL TABLE and read it by name)": views.read.parquet(str(tmp_path / "t1")),
        "explode / a generator is not incrementally maintainable: sparkmv does not translate generators to SQL": (
            s.select(F.explode(F.array("id", "k")).alias("v"))
        ),
    }
    for reason, df in refused.items():
        assert translate(df, TABLES) == Translation(None, reason), reason


def _named_udf(name: str) -> Any:
    from pyspark.sql import functions as F

    def plus(x: int) -> int:
        return x + 1

    plus.__name__ = name
    return F.udf(plus, "long")
