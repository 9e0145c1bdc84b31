"""The Spark schema JSON of an Iceberg schema, in plain Python (no pyspark, no pyarrow).

Pinning an Iceberg table records its schema as Spark schema JSON; a read-only process (the
web UI) pins tables to decide freshness and must not load pyspark for it. The text is the one
:func:`sparkmv.storage.schema.schema_to_json` gives for
:func:`~sparkmv.storage.schema.arrow_to_spark` of the schema's Arrow form (a test checks that
for every type mapped here); a type not mapped here raises :class:`NotImplementedError`, and
the caller then converts through Spark.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from pyiceberg.schema import Schema
from pyiceberg.types import (
    BinaryType,
    BooleanType,
    DateType,
    DecimalType,
    DoubleType,
    FixedType,
    FloatType,
    IcebergType,
    IntegerType,
    ListType,
    LongType,
    MapType,
    NestedField,
    StringType,
    StructType,
    TimestampType,
    TimestamptzType,
)

_PRIMITIVES: dict[type[IcebergType], str] = {
    BooleanType: "boolean",
    IntegerType: "integer",
    LongType: "long",
    FloatType: "float",
    DoubleType: "double",
    StringType: "string",
    BinaryType: "binary",
    FixedType: "binary",
    DateType: "date",
    TimestampType: "timestamp_ntz",
    TimestamptzType: "timestamp",
}


def _type(kind: IcebergType) -> Any:
    if isinstance(kind, DecimalType):
        return f"decimal({kind.precision},{kind.scale})"
    name = _PRIMITIVES.get(type(kind))
    if name is not None:
        return name
    if isinstance(kind, ListType):
        return {"containsNull": not kind.element_required, "elementType": _type(kind.element_type), "type": "array"}
    if isinstance(kind, MapType):
        return {
            "keyType": _type(kind.key_type),
            "type": "map",
            "valueContainsNull": not kind.value_required,
            "valueType": _type(kind.value_type),
        }
    if isinstance(kind, StructType):
        return _struct(kind.fields)
    raise NotImplementedError(f"no plain mapping of Iceberg type {kind} to Spark")


def _struct(fields: Iterable[NestedField]) -> dict[str, Any]:
    return {
        "fields": [
            {"metadata": {}, "name": f.name, "nullable": not f.required, "type": _type(f.field_type)} for f in fields
        ],
        "type": "struct",
    }


def iceberg_schema_json(schema: Schema, fields: Iterable[NestedField] | None = None) -> str:
    """Spark schema JSON of ``schema`` (of its ``fields`` only, in their order, when given).

    >>> from pyiceberg.types import NestedField, StringType
    >>> iceberg_schema_json(Schema(NestedField(1, "k", StringType(), required=False)))
    '{"fields":[{"metadata":{},"name":"k","nullable":true,"type":"string"}],"type":"struct"}'

    Raises:
        NotImplementedError: a type mapped only through Spark (time, uuid, nanosecond timestamps...).
    """
    chosen = schema.fields if fields is None else fields
    return json.dumps(_struct(chosen), separators=(",", ":"), sort_keys=True)
