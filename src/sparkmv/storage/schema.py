"""Conversions between Spark, Arrow and Iceberg schemas.

Iceberg has no 8- or 16-bit integers, no NULL type and no intervals, so a materialized
view's output is normalised before it is written: ``tinyint``/``smallint`` become ``int``,
``char``/``varchar`` become ``string``, a NULL-typed column becomes ``string``.
"""

from __future__ import annotations

import inspect
import json
from typing import Any

import pyarrow as pa
from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql.pandas.types import from_arrow_schema, to_arrow_schema
from pyspark.sql.types import (
    ByteType,
    CharType,
    DataType,
    IntegerType,
    NullType,
    ShortType,
    StringType,
    StructField,
    StructType,
    VarcharType,
)

from sparkmv.errors import AnalysisError


def _normal_type(dtype: DataType) -> DataType | None:
    if isinstance(dtype, ByteType | ShortType):
        return IntegerType()
    if isinstance(dtype, CharType | VarcharType | NullType):
        return StringType()
    return None


_UTC_TIMESTAMPS: dict[str, Any] = (
    {"timezone": "UTC"} if "timezone" in inspect.signature(to_arrow_schema).parameters else {}
)
"""pyspark 4.3's ``to_arrow_schema`` takes the zone of ``TIMESTAMP`` columns; 4.1's is UTC."""


def normalize_for_iceberg(df: DataFrame) -> DataFrame:
    """Cast the columns Iceberg cannot store to the nearest type it can.

    Raises:
        AnalysisError: for duplicate output column names (Iceberg needs unique names).
    """
    names = [f.name.lower() for f in df.schema.fields]
    dupes = sorted({n for n in names if names.count(n) > 1})
    if dupes:
        raise AnalysisError(f"duplicate output column name(s): {', '.join(dupes)}; give them aliases")
    casts = {f.name: _normal_type(f.dataType) for f in df.schema.fields}
    if not any(casts.values()):
        return df
    return df.select(
        *[F.col(f"`{name}`").cast(t).alias(name) if t else F.col(f"`{name}`") for name, t in casts.items()]
    )


def spark_to_arrow(schema: StructType) -> pa.Schema:
    """Arrow schema of a Spark schema, every field nullable (files may be stricter); a Spark
    ``TIMESTAMP`` is an Arrow timestamp in UTC (Iceberg ``timestamptz``), as pyspark 4.1's
    default ``timestamp_utc=True`` gives it; pyspark 4.3 asks for the zone (``timezone``)."""
    arrow = to_arrow_schema(schema, **_UTC_TIMESTAMPS)
    return pa.schema([f.with_nullable(True) for f in arrow])


def arrow_to_spark(schema: pa.Schema) -> StructType:
    """Spark schema of an Arrow schema; a timestamp without time zone (Iceberg
    ``timestamp``) is Spark's ``TIMESTAMP_NTZ``, one with a zone (``timestamptz``) Spark's
    ``TIMESTAMP``. Arrow's view and large string and binary types (tpchgen-cli and
    delta-rs write ``string_view``) are Spark's ``STRING`` and ``BINARY``.

    >>> arrow_to_spark(pa.schema([("s", pa.string_view()), ("b", pa.large_binary())])).simpleString()
    'struct<s:string,b:binary>'
    """
    plain = pa.schema([f.with_type(_plain_type(f.type)) for f in schema], metadata=schema.metadata)
    return from_arrow_schema(plain, prefer_timestamp_ntz=True)


def _plain_type(kind: pa.DataType) -> pa.DataType:
    """``kind`` with view and large string / binary types made plain (what PySpark maps)."""
    if pa.types.is_string_view(kind) or pa.types.is_large_string(kind):
        return pa.string()
    if pa.types.is_binary_view(kind) or pa.types.is_large_binary(kind):
        return pa.binary()
    return kind


def schema_to_json(schema: StructType) -> str:
    """Spark schema as JSON text (stored in the catalog)."""
    return schema.json()


def schema_from_json(text: str) -> StructType:
    """Spark schema from :func:`schema_to_json` text."""
    parsed = StructType.fromJson(json.loads(text))
    return StructType([StructField(f.name, f.dataType, True, f.metadata) for f in parsed.fields])
