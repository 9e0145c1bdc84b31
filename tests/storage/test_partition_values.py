"""Typed partition values and their one text form (no Spark)."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta, timezone

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sparkmv.storage.iceberg import IcebergStore, partition_text
from sparkmv.storage.partition_values import (
    PartitionValueError,
    canonical,
    check_range,
    from_iceberg_physical,
    iceberg_value,
    kind_of_spark_type,
    parse,
    sort_key,
    spark_literal,
    to_text,
)


@given(st.datetimes(min_value=datetime(1900, 1, 1), max_value=datetime(2200, 1, 1)))
def test_timestamp_text_round_trips(value: datetime) -> None:
    assert parse(to_text(value), "timestamp") == value
    assert parse(to_text(value), "timestamptz") == value


@given(st.dates())
def test_date_text_round_trips(value: date) -> None:
    assert parse(to_text(value), "date") == value


@given(st.integers(min_value=-(2**63), max_value=2**63 - 1))
def test_integer_text_round_trips(value: int) -> None:
    assert parse(to_text(value), "integer") == value


def test_zoned_and_naive_timestamps_share_one_text_form() -> None:
    # pyiceberg's inspect.partitions() gives UTC-aware datetimes, manifests give micros.
    aware = datetime(2024, 1, 1, tzinfo=UTC)
    physical = from_iceberg_physical(1704067200000000, _iceberg("timestamptz"))
    assert to_text(aware) == to_text(physical) == partition_text(aware) == "2024-01-01 00:00:00"
    other_zone = datetime(2024, 1, 1, 1, 0, tzinfo=timezone(timedelta(hours=1)))
    assert to_text(other_zone) == "2024-01-01 00:00:00"
    assert from_iceberg_physical(19723, _iceberg("date")) == date(2024, 1, 1)


def test_canonical_forms() -> None:
    assert canonical("2024-01-01T10:00", "timestamp") == "2024-01-01 10:00:00"
    assert canonical("2024-01-01 10:00:00.120000", "timestamp") == "2024-01-01 10:00:00.12"
    assert canonical("2024-01-01", "timestamp") == "2024-01-01 00:00:00"
    assert canonical("2024-01-01 00:00:00", "date") == "2024-01-01"
    assert canonical("TRUE", "boolean") == "true"
    assert canonical(None, "date") is None
    assert canonical("x y", "string") == "x y"


@pytest.mark.parametrize(
    ("text", "kind", "message"),
    [
        ("2024-01", "date", "'2024-01' is not a date (yyyy-MM-dd)"),
        ("2024-01-01 10:00:00", "date", "'2024-01-01 10:00:00' is not a date (yyyy-MM-dd)"),
        ("abc", "integer", "'abc' is not an integer"),
        ("yes", "boolean", "'yes' is not a boolean (true or false)"),
        (
            "2024-01-01T00:00:00+01:00",
            "timestamp",
            "'2024-01-01T00:00:00+01:00' is not a timestamp (yyyy-MM-dd HH:mm:ss)",
        ),
    ],
)
def test_parse_refuses_text_of_another_kind(text: str, kind: str, message: str) -> None:
    with pytest.raises(PartitionValueError) as info:
        parse(text, kind)
    assert str(info.value) == message


def test_kinds_of_spark_and_iceberg_types() -> None:
    assert [kind_of_spark_type(t) for t in ("string", "int", "date", "timestamp", "timestamp_ntz", "boolean")] == [
        "string",
        "integer",
        "date",
        "timestamptz",
        "timestamp",
        "boolean",
    ]


def test_sort_key_orders_typed_values() -> None:
    assert sorted(["10", "9", None, "-1"], key=lambda v: sort_key(v, "integer")) == [None, "-1", "9", "10"]
    stamps = ["2024-01-01 10:00:00.5", "2024-01-01 10:00:00", None]
    assert sorted(stamps, key=lambda v: sort_key(v, "timestamp")) == [None, "2024-01-01 10:00:00", stamps[0]]


def test_spark_literals_are_typed() -> None:
    assert spark_literal("2024-01-01", "date") == "DATE '2024-01-01'"
    assert spark_literal("2024-01-01 00:00:00", "timestamptz") == "TIMESTAMP '2024-01-01 00:00:00'"
    assert spark_literal("true", "boolean") == "TRUE"
    assert spark_literal("007", "integer") == "7"


def test_publish_predicates_use_typed_literals() -> None:
    pred = IcebergStore._replace_predicate("ts", ["2024-01-01 00:00:00"], "timestamptz")
    assert repr(pred) == "EqualTo(term=Reference(name='ts'), literal=TimestampLiteral(1704067200000000))"
    assert iceberg_value("2024-01-01 00:00:00", "timestamptz") == datetime(2024, 1, 1, tzinfo=UTC)
    assert repr(IcebergStore._replace_predicate("n", ["5"], "integer")) == (
        "EqualTo(term=Reference(name='n'), literal=LongLiteral(5))"
    )


@pytest.mark.parametrize(
    ("start", "end", "kind", "message"),
    [
        (
            "2024-05",
            "2024-01",
            "string",
            "PARTITION START ('2024-05') must be before END ('2024-01') of materialized view 'm' "
            "(START is inclusive, END exclusive)",
        ),
        (
            "10",
            "9",
            "integer",
            "PARTITION START ('10') must be before END ('9') of materialized view 'm' "
            "(START is inclusive, END exclusive)",
        ),
        ("", None, "string", "PARTITION START ('') of materialized view 'm' is empty"),
        (None, " ", "date", "PARTITION END (' ') of materialized view 'm' is empty"),
        ("x", None, "integer", "PARTITION START ('x') of materialized view 'm': 'x' is not an integer"),
    ],
)
def test_check_range_refuses(start: str | None, end: str | None, kind: str, message: str) -> None:
    with pytest.raises(PartitionValueError) as info:
        check_range(start, end, kind, "m")
    assert str(info.value) == message


def test_check_range_accepts() -> None:
    check_range("2024-01-01", "2024-01-02", "date", "m")
    check_range("9", "10", "integer", "m")
    check_range(None, "2024-01", "string", "m")


def _iceberg(kind: str):  # type: ignore[no-untyped-def]
    from pyiceberg.types import DateType, TimestamptzType

    return {"date": DateType(), "timestamptz": TimestamptzType()}[kind]
