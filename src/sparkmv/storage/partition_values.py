"""Typed partition values and their one text form.

A partition value is a *typed* value of a partition column: a string, an integer, a date,
a timestamp, a boolean, or NULL (``None``). Every layer of sparkmv (pinning, the version
map, lineage transforms, the planner, publish predicates, ``PARTITION START/END`` bounds,
TTL and retention, system tables) converts between typed values and text only through
this module, so a value has exactly one text form everywhere:

========================  ===========================  ===============================
kind                      Python value                 text form
========================  ===========================  ===============================
``string``                ``str``                      the string itself
``integer``               ``int``                      decimal digits (``-12``)
``date``                  ``datetime.date``            ``yyyy-MM-dd``
``timestamp``             naive ``datetime``           ``yyyy-MM-dd HH:mm:ss[.fraction]``
``timestamptz``           ``datetime`` (UTC)           the same, in UTC, no offset
``boolean``               ``bool``                     ``true`` / ``false``
NULL (any kind)           ``None``                     ``None`` (no text; ``__HIVE_DEFAULT_PARTITION__`` in paths)
========================  ===========================  ===============================

Timestamps follow Spark's ``CAST(ts AS STRING)``: the fraction of a second is printed
only when it is not zero, without trailing zeros. ``timestamp`` is a value without time
zone (Spark ``TIMESTAMP_NTZ``); ``timestamptz`` is an instant (Spark ``TIMESTAMP``, Iceberg
``timestamptz``) whose text is its UTC wall-clock time, since sparkmv's Spark session
runs in UTC. The kind says which.

>>> to_text(datetime(2024, 1, 1, tzinfo=UTC))
'2024-01-01 00:00:00'
>>> to_text(datetime(2024, 1, 1, 10, 30, 0, 500000))
'2024-01-01 10:30:00.5'
>>> parse("2024-01-01 10:30:00.5", "timestamp")
datetime.datetime(2024, 1, 1, 10, 30, 0, 500000)
>>> to_text(parse("2024-01-01T00:00:00+01:00", "timestamptz"))
'2023-12-31 23:00:00'
>>> to_text(date(2024, 2, 29)), to_text(True), to_text(-7), to_text(None)
('2024-02-29', 'true', '-7', None)
"""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta
from typing import Any

from sparkmv.errors import SparkMvError

PartitionText = str | None
"""A partition value in its text form (None for NULL)."""

KINDS = ("string", "integer", "date", "timestamp", "timestamptz", "boolean")

_SPARK_KINDS = {
    "string": "string",
    "varchar": "string",
    "char": "string",
    "int": "integer",
    "bigint": "integer",
    "smallint": "integer",
    "tinyint": "integer",
    "integer": "integer",
    "long": "integer",
    "short": "integer",
    "byte": "integer",
    "date": "date",
    "timestamp_ntz": "timestamp",
    "timestamp": "timestamptz",
    "boolean": "boolean",
}


class PartitionValueError(SparkMvError, ValueError):
    """A text is not a value of the partition column's kind."""


def kind_of_spark_type(type_name: str) -> str:
    """The kind of a Spark type (``simpleString`` or JSON type name); unknown types are
    compared as strings.

    >>> kind_of_spark_type("timestamp_ntz"), kind_of_spark_type("timestamp"), kind_of_spark_type("bigint")
    ('timestamp', 'timestamptz', 'integer')
    >>> kind_of_spark_type("decimal(10,2)")
    'string'
    """
    return _SPARK_KINDS.get(type_name.lower().split("(")[0], "string")


def kind_of_iceberg_type(field_type: Any) -> str:
    """The kind of a pyiceberg primitive type."""
    from pyiceberg.types import (
        BooleanType,
        DateType,
        IntegerType,
        LongType,
        TimestampType,
        TimestamptzType,
    )

    if isinstance(field_type, BooleanType):
        return "boolean"
    if isinstance(field_type, IntegerType | LongType):
        return "integer"
    if isinstance(field_type, DateType):
        return "date"
    if isinstance(field_type, TimestamptzType):
        return "timestamptz"
    if isinstance(field_type, TimestampType):
        return "timestamp"
    return "string"


def to_text(value: Any) -> PartitionText:
    """The text form of a typed partition value (None for NULL).

    Time-zone-aware datetimes are converted to UTC and printed without offset.

    >>> to_text(date(1995, 2, 14)), to_text(datetime(1995, 2, 14, 7, 5, 3))
    ('1995-02-14', '1995-02-14 07:05:03')
    """
    if value is None:
        return None
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, datetime):
        if value.tzinfo is not None:
            value = value.astimezone(UTC).replace(tzinfo=None)
        text = value.strftime("%Y-%m-%d %H:%M:%S")
        if value.microsecond:
            text += f".{value.microsecond:06d}".rstrip("0")
        return text
    if isinstance(value, date):
        return value.isoformat()
    return str(value)


def parse(text: PartitionText, kind: str) -> Any:
    """The typed value of ``text`` for a column of ``kind`` (None stays None).

    Dates accept ``yyyy-MM-dd`` (a timestamp text keeps its date part only when it is
    midnight); timestamps accept ``yyyy-MM-dd[ HH:mm[:ss[.fraction]]]`` with ``T`` or a
    space and an optional offset (converted to UTC for ``timestamptz``, refused for
    ``timestamp``).

    Raises:
        PartitionValueError: when ``text`` is not a value of ``kind``.

    >>> parse("42", "integer"), parse("true", "boolean"), parse("2024-01-31", "date")
    (42, True, datetime.date(2024, 1, 31))
    >>> parse("2024-01", "date")
    Traceback (most recent call last):
    ...
    sparkmv.storage.partition_values.PartitionValueError: '2024-01' is not a date (yyyy-MM-dd)
    """
    if text is None:
        return None
    try:
        if kind == "integer":
            return int(text.strip())
        if kind == "boolean":
            low = text.strip().lower()
            if low not in ("true", "false"):
                raise ValueError(text)
            return low == "true"
        if kind == "date":
            return _parse_date(text)
        if kind in ("timestamp", "timestamptz"):
            return _parse_timestamp(text, kind)
    except (ValueError, OverflowError) as exc:
        raise PartitionValueError(f"{text!r} is not {_described(kind)}") from exc
    return text


def _described(kind: str) -> str:
    return {
        "integer": "an integer",
        "boolean": "a boolean (true or false)",
        "date": "a date (yyyy-MM-dd)",
        "timestamp": "a timestamp (yyyy-MM-dd HH:mm:ss)",
        "timestamptz": "a timestamp (yyyy-MM-dd HH:mm:ss)",
    }.get(kind, "a string")


def _parse_date(text: str) -> date:
    stripped = text.strip()
    if len(stripped) == 10:
        return date.fromisoformat(stripped)
    ts = _parse_timestamp(stripped, "timestamp")
    if ts.time() != datetime.min.time():
        raise ValueError(text)
    return ts.date()


def _parse_timestamp(text: str, kind: str) -> datetime:
    stripped = text.strip()
    if len(stripped) < 10:
        raise ValueError(text)
    value = datetime.fromisoformat(stripped.replace(" ", "T", 1) if len(stripped) > 10 else stripped)
    if value.tzinfo is not None:
        if kind == "timestamp":
            raise ValueError(text)
        value = value.astimezone(UTC).replace(tzinfo=None)
    return value


def canonical(text: PartitionText, kind: str) -> PartitionText:
    """``text`` in the one text form of ``kind`` (parse, then print).

    >>> canonical("2024-01-01T00:00:00+00:00", "timestamptz"), canonical("007", "integer")
    ('2024-01-01 00:00:00', '7')
    """
    return to_text(parse(text, kind))


def sort_key(text: PartitionText, kind: str | None = None) -> tuple[int, Any]:
    """Order partition values: NULL first, then by typed value.

    Without a kind, numbers compare numerically and other text lexically (dates and
    timestamps in their text form sort by time).

    >>> sorted(["10", "9", None], key=sort_key)
    [None, '9', '10']
    >>> sorted(["2024-01-02 00:00:00", "2024-01-01 10:00:00"], key=lambda v: sort_key(v, "timestamp"))
    ['2024-01-01 10:00:00', '2024-01-02 00:00:00']
    """
    if text is None:
        return (0, 0)
    if kind is not None and kind != "string":
        try:
            value = parse(text, kind)
            return (1, value) if not isinstance(value, bool) else (1, int(value))
        except PartitionValueError:
            return (2, text)
    try:
        return (1, float(text))
    except ValueError:
        return (2, text)


def spark_literal(text: PartitionText, kind: str) -> str:
    """A Spark SQL literal of the typed value (``NULL`` for None).

    >>> spark_literal("2024-01-01", "date"), spark_literal("2024-01-01 00:00:00", "timestamp")
    ("DATE '2024-01-01'", "TIMESTAMP_NTZ '2024-01-01 00:00:00'")
    >>> spark_literal("it's", "string"), spark_literal("5", "integer"), spark_literal(None, "date")
    ("'it\\\\'s'", '5', 'NULL')
    """
    value = parse(text, kind)
    if value is None:
        return "NULL"
    canon = to_text(value)
    assert canon is not None
    if kind == "integer":
        return canon
    if kind == "boolean":
        return canon.upper()
    quoted = "'" + canon.replace("\\", "\\\\").replace("'", "\\'") + "'"
    prefix = {"date": "DATE ", "timestamp": "TIMESTAMP_NTZ ", "timestamptz": "TIMESTAMP "}.get(kind, "")
    return prefix + quoted


def iceberg_value(text: PartitionText, kind: str) -> Any:
    """The Python value a pyiceberg expression literal is built from (``timestamptz``
    values are UTC-aware datetimes)."""
    value = parse(text, kind)
    if kind == "timestamptz" and isinstance(value, datetime):
        return value.replace(tzinfo=UTC)
    return value


def from_iceberg_physical(raw: Any, field_type: Any) -> Any:
    """A manifest's physical partition value (days, microseconds) as a typed value."""
    from pyiceberg.types import DateType, TimestampType, TimestamptzType

    if raw is None:
        return None
    if isinstance(field_type, DateType) and isinstance(raw, int):
        return date(1970, 1, 1) + timedelta(days=raw)
    if isinstance(field_type, TimestampType | TimestamptzType) and isinstance(raw, int):
        return datetime(1970, 1, 1) + timedelta(microseconds=raw)
    return raw


def check_range(start: PartitionText, end: PartitionText, kind: str, mv: str) -> None:
    """Check a ``PARTITION START (..) END (..)`` range of an MV partitioned by ``kind``.

    Raises:
        PartitionValueError: for an empty bound, a bound that is not of ``kind``, or
            START not before END (the range is start inclusive, end exclusive).

    >>> try:
    ...     check_range("2024-05", "2024-01", "string", "m")
    ... except PartitionValueError as exc:
    ...     print(str(exc).replace(" of materialized view 'm'", ""))
    PARTITION START ('2024-05') must be before END ('2024-01') (START is inclusive, END exclusive)
    """
    for what, bound in (("START", start), ("END", end)):
        if bound is not None and not bound.strip():
            raise PartitionValueError(f"PARTITION {what} ('{bound}') of materialized view '{mv}' is empty")
        try:
            parse(bound, kind)
        except PartitionValueError as exc:
            raise PartitionValueError(f"PARTITION {what} ('{bound}') of materialized view '{mv}': {exc}") from None
    if start is not None and end is not None and sort_key(start, kind) >= sort_key(end, kind):
        raise PartitionValueError(
            f"PARTITION START ('{start}') must be before END ('{end}') of materialized view '{mv}' "
            "(START is inclusive, END exclusive)"
        )
