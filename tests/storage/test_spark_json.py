"""The plain Spark schema JSON of Iceberg schemas equals the one made through Arrow and pyspark."""

from __future__ import annotations

import pytest
from pyiceberg.schema import Schema
from pyiceberg.types import (
    BinaryType,
    BooleanType,
    DateType,
    DecimalType,
    DoubleType,
    FixedType,
    FloatType,
    IntegerType,
    ListType,
    LongType,
    MapType,
    NestedField,
    StringType,
    StructType,
    TimestampType,
    TimestamptzType,
    TimeType,
)

from sparkmv.storage.schema import arrow_to_spark, schema_to_json
from sparkmv.storage.spark_json import iceberg_schema_json

EVERY_TYPE = Schema(
    NestedField(1, "b", BooleanType(), required=False),
    NestedField(2, "i", IntegerType(), required=True),
    NestedField(3, "l", LongType(), required=False),
    NestedField(4, "f", FloatType(), required=False),
    NestedField(5, "d", DoubleType(), required=False),
    NestedField(6, "dec", DecimalType(12, 2), required=False),
    NestedField(7, "s", StringType(), required=False),
    NestedField(8, "bin", BinaryType(), required=False),
    NestedField(9, "fx", FixedType(4), required=False),
    NestedField(10, "day", DateType(), required=False),
    NestedField(11, "ts", TimestampType(), required=False),
    NestedField(12, "tz", TimestamptzType(), required=False),
    NestedField(13, "arr", ListType(20, LongType(), element_required=False), required=False),
    NestedField(14, "arr_req", ListType(21, StringType(), element_required=True), required=False),
    NestedField(15, "m", MapType(22, StringType(), 23, DoubleType(), value_required=False), required=False),
    NestedField(
        16,
        "st",
        StructType(NestedField(24, "x", IntegerType(), required=True), NestedField(25, "y", DateType())),
        required=False,
    ),
    NestedField(17, "__smv_hidden", LongType(), required=False),
)


def test_every_mapped_type_equals_the_pyspark_json() -> None:
    assert iceberg_schema_json(EVERY_TYPE) == schema_to_json(arrow_to_spark(EVERY_TYPE.as_arrow()))


def test_a_subset_of_fields() -> None:
    fields = [f for f in EVERY_TYPE.fields if not f.name.startswith("__")]
    arrow = EVERY_TYPE.as_arrow()
    expected = schema_to_json(arrow_to_spark(arrow.remove(arrow.get_field_index("__smv_hidden"))))
    assert iceberg_schema_json(EVERY_TYPE, fields) == expected


def test_unmapped_type_is_left_to_spark() -> None:
    with pytest.raises(NotImplementedError, match="no plain mapping of Iceberg type time to Spark"):
        iceberg_schema_json(Schema(NestedField(1, "t", TimeType(), required=False)))
