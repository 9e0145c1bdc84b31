"""Key filters written as SQL text (sparkmv.refresh.incremental.literals): each literal is its
value of exactly its column's type, the filters keep exactly the rows ``isin`` / ``eqNullSafe``
keep, and Spark still pushes the IN list into the Parquet scan."""

from __future__ import annotations

import datetime
import decimal
import re
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import functions as F
from pyspark.sql import types as T

from sparkmv.refresh.incremental.literals import any_row_sql, in_list_sql, sql_literal
from sparkmv.refresh.incremental.merge_rows import any_of

D = decimal.Decimal
Day = datetime.date
CASES: list[tuple[T.DataType, list[Any], Any]] = [
    (T.ByteType(), [-128, 0, 127], 5),
    (T.ShortType(), [-32768, 7, 32767], 5),
    (T.IntegerType(), [-(2**31), 42, 2**31 - 1], 5),
    (T.LongType(), [-(2**63), 2**40 + 3, 2**63 - 1], 5),
    (T.DecimalType(15, 2), [D("-0.01"), D("1E+2"), D("9999999999999.99")], D("0.02")),
    (T.DecimalType(38, 10), [D("1234567890123456789012345678.0123456789")], D("1")),
    (T.StringType(), ["it's", "back\\slash", "", "ünï €", "new\nline", "x' OR TRUE --"], "y"),
    (T.DateType(), [Day(1, 1, 1), Day(1998, 12, 1), Day(9999, 12, 31)], Day(2000, 1, 1)),
    (T.BooleanType(), [True], False),
    (T.DoubleType(), [0.1, -1e308, float("nan"), float("inf")], 0.2),
    (T.FloatType(), [0.10000000149011612, 3.4028234663852886e38], 0.5),  # float32 values
]


def _canonical(value: Any) -> str:
    return repr(value.normalize() if isinstance(value, decimal.Decimal) else value)


@pytest.mark.parametrize(("dtype", "values", "other"), CASES, ids=[c[0].simpleString() for c in CASES])
def test_each_literal_is_its_value_of_the_columns_type(
    spark: Any, dtype: T.DataType, values: list[Any], other: Any
) -> None:
    literals = [sql_literal(v, dtype.jsonValue()) for v in values]
    assert None not in literals
    got = spark.sql("SELECT " + ", ".join(f"{t} AS c{i}" for i, t in enumerate(literals)))
    row = got.first()
    assert all(f.dataType == dtype for f in got.schema.fields)
    for i, v in enumerate(values):
        assert row[i] == v or (v != v and row[i] != row[i])  # NaN equals itself in Spark only

    frame = spark.createDataFrame([(v,) for v in [*values, other, None]], T.StructType([T.StructField("c", dtype)]))
    sql = in_list_sql("c", values, dtype.jsonValue())
    assert sql is not None
    kept = frame.where(F.expr(sql)).collect()
    assert sorted(map(_canonical, (r[0] for r in kept))) == sorted(map(_canonical, values))


def test_values_without_an_exact_literal_give_none() -> None:
    assert sql_literal(128, "byte") is None
    assert sql_literal(2**63, "long") is None
    assert sql_literal("1", "integer") is None
    assert sql_literal(True, "integer") is None
    assert sql_literal(datetime.datetime(2020, 1, 1), "date") is None
    assert sql_literal(datetime.datetime(2020, 1, 1), "timestamp") is None
    assert sql_literal(1, {"type": "struct", "fields": []}) is None
    assert in_list_sql("c", [1, "x"], "integer") is None
    # a decimal that the column's type cannot hold exactly: no literal (it would round, or
    # overflow, which ANSI mode makes an error)
    assert sql_literal(D("1.255"), "decimal(15,2)") is None
    assert sql_literal(D("12345"), "decimal(5,2)") is None


def test_any_of_keeps_the_rows_the_null_safe_comparison_keeps(spark: Any) -> None:
    schema = T.StructType([T.StructField("a", T.LongType()), T.StructField("b", T.StringType())])
    rows = [(1, "x"), (1, None), (None, "y"), (None, None), (2, "x'"), (3, "z")]
    frame = spark.createDataFrame(rows, schema)
    for keys, found in (
        (["a", "b"], [(1, None), (None, None), (2, "x'")]),
        (["a"], [(1,), (None,)]),
        (["b"], [("x'",), ("z",)]),
    ):
        types = [schema[k].dataType for k in keys]
        written = any_row_sql(keys, found, [t.jsonValue() for t in types])
        assert written is not None
        by_sql = sorted(map(repr, frame.where(any_of(keys, found, types)).collect()))
        by_columns = sorted(map(repr, frame.where(any_of(keys, found)).collect()))
        assert by_sql == by_columns
        assert by_sql == sorted(repr(r) for r in frame.collect() if tuple(getattr(r, k) for k in keys) in found)


def test_the_in_list_is_pushed_into_the_parquet_scan(spark: Any, tmp_path: Path) -> None:
    path = str(tmp_path / "t")
    spark.range(0, 1000).select(F.col("id").alias("k"), F.col("id").cast("string").alias("s")).write.parquet(path)
    frame = spark.read.parquet(path)
    for column, kind, values in (("k", "long", list(range(0, 200, 3))), ("s", "string", ["1", "2", "x"])):
        sql = in_list_sql(column, values, kind)
        assert sql is not None
        plan = frame.where(F.expr(sql))._jdf.queryExecution().executedPlan().toString()
        assert re.search(rf"PushedFilters: \[[^\]]*In\({column},", plan), plan
