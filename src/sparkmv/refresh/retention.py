"""``partition_retention_condition``, evaluated by Spark or not at all.

The condition is a Spark SQL predicate on the MV's partition column (StarRocks' example:
``dt >= current_date() - interval 1 month``). It is evaluated by Spark over a tiny
DataFrame holding the partition values, typed as the MV's partition column, so every
Spark expression works. A condition Spark cannot evaluate is refused at CREATE / ALTER
with Spark's error, and a refresh that cannot evaluate it fails: it is never skipped.
"""

from __future__ import annotations

import pyarrow as pa
from pyspark.errors import PySparkException
from pyspark.sql import SparkSession
from pyspark.sql.types import BooleanType, DataType, IntegerType, StructField, StructType

from sparkmv.errors import InvalidPropertyError
from sparkmv.storage.partition_values import PartitionText, kind_of_spark_type, parse
from sparkmv.storage.schema import arrow_to_spark

_INDEX = "__smv_i"


def retained(
    spark: SparkSession, condition: str, column: str, dtype: DataType, values: set[PartitionText]
) -> set[PartitionText]:
    """The partition values (text form) that satisfy ``condition``.

    Args:
        condition: Spark SQL predicate on ``column``.
        column: the MV partition column; dtype: its Spark type.
        values: MV partition values in their text form.

    Raises:
        InvalidPropertyError: when Spark cannot evaluate the condition (the message
            gives Spark's reason) or it is not a boolean.
    """
    ordered = sorted(values, key=lambda v: (v is not None, v or ""))
    kind = kind_of_spark_type(dtype.simpleString())
    schema = StructType([StructField(column, dtype, True), StructField(_INDEX, IntegerType(), False)])
    rows = [(parse(v, kind), i) for i, v in enumerate(ordered)]
    df = spark.createDataFrame(rows, schema)
    try:
        kept = df.where(_checked(spark, df, condition)).select(_INDEX).collect()
    except PySparkException as exc:
        raise InvalidPropertyError(_message(condition, exc)) from exc
    return {ordered[r[0]] for r in kept}


def _checked(spark: SparkSession, df, condition: str):  # type: ignore[no-untyped-def]
    """The condition as a Column, after checking it is a boolean expression."""
    from pyspark.sql import functions as F

    expr = F.expr(condition)
    dtype = df.select(expr.alias("c")).schema.fields[0].dataType
    if not isinstance(dtype, BooleanType):
        raise InvalidPropertyError(
            f"property 'partition_retention_condition' must be a boolean condition, "
            f"not {condition!r} (of type {dtype.simpleString()})"
        )
    return expr


def check_condition(spark: SparkSession, condition: str, column: str | None, dtype: DataType | None) -> None:
    """Refuse a ``partition_retention_condition`` Spark cannot evaluate on the MV's
    partition column (at CREATE / ALTER, before anything is stored).

    Raises:
        InvalidPropertyError: on an unpartitioned MV, or with Spark's reason.
    """
    if column is None or dtype is None:
        raise InvalidPropertyError("property 'partition_retention_condition' needs a partitioned materialized view")
    retained(spark, condition, column, dtype, set())


def check_condition_in(spark: SparkSession, condition: str, column: str | None, schema: pa.Schema) -> None:
    """:func:`check_condition` with the partition column's type read from the MV table's
    Arrow schema (``column`` matched case-insensitively).

    Raises:
        InvalidPropertyError: as :func:`check_condition`.
    """
    fields = arrow_to_spark(schema).fields
    field = next((f for f in fields if column and f.name.lower() == column.lower()), None)
    check_condition(spark, condition, column, field.dataType if field else None)


def _message(condition: str, exc: BaseException) -> str:
    from sparkmv.storage.spark_log import spark_error_text

    return f"property 'partition_retention_condition' {condition!r} cannot be evaluated: {spark_error_text(exc)}"
