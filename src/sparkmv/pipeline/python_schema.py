"""``schema=`` of a Python table (``@dp.table``, ``@dp.materialized_view``,
``dp.create_streaming_table``): the declared columns, applied to the rows its flows give.

As Spark's SDP does, the declared schema is the table's: its columns in its order, with its
types. The flows' columns must be the declared ones (names compared case-insensitively, as
Spark's default analysis does); each value is cast to the declared type. A flow whose columns
are not the declared ones fails with Spark's condition name
(``USER_SPECIFIED_AND_INFERRED_SCHEMA_NOT_COMPATIBLE``). Nullability is not enforced (Iceberg
columns written by sparkmv are optional).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from sparkmv.errors import SparkMvError
from sparkmv.pipeline.model import PipelineDefinitionError

if TYPE_CHECKING:
    from pyspark.sql import DataFrame
    from pyspark.sql.types import StructType


def parse_schema(value: Any, where: str) -> StructType:
    """``value`` (a DDL string such as ``"a INT, b STRING"``, or a ``StructType``) as a
    ``StructType``; a string is parsed by the active SparkSession.

    Raises:
        PipelineDefinitionError: ``<where>: schema ...: <Spark's reason>`` for a string that
            does not parse, or a value of another type.
    """
    from pyspark.sql import SparkSession
    from pyspark.sql.types import StructType

    if isinstance(value, StructType):
        return value
    if not isinstance(value, str):
        kind = type(value).__name__
        raise PipelineDefinitionError(f"{where}: schema must be a DDL string or a StructType, not {kind}")
    spark = SparkSession.getActiveSession()
    if spark is None:  # pragma: no cover - Python files load with the session active
        raise PipelineDefinitionError(f"{where}: schema {value!r}: no active SparkSession to parse it")
    try:
        return spark.createDataFrame([], value).schema
    except Exception as exc:
        from sparkmv.storage.spark_log import spark_error_line

        raise PipelineDefinitionError(f"{where}: schema {value!r}: {spark_error_line(exc)}") from None


def apply_schema(df: DataFrame, schema: StructType, table: str) -> DataFrame:
    """``df``'s columns in ``schema``'s order, each cast to its declared type.

    Raises:
        SparkMvError: ``USER_SPECIFIED_AND_INFERRED_SCHEMA_NOT_COMPATIBLE: ...`` when ``df``'s
            column names are not the declared ones (naming both lists).
    """
    from pyspark.sql import functions as F

    given = {c.lower(): c for c in df.columns}
    declared = [f.name for f in schema.fields]
    if sorted(given) != sorted(n.lower() for n in declared):
        raise SparkMvError(
            f"USER_SPECIFIED_AND_INFERRED_SCHEMA_NOT_COMPATIBLE: table {table} declares columns "
            f"({', '.join(declared)}) but its query gives ({', '.join(df.columns)})"
        )
    return df.select(*[F.col(f"`{given[f.name.lower()]}`").cast(f.dataType).alias(f.name) for f in schema.fields])
