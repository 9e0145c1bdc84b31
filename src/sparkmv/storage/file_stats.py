"""Per-file column statistics of an Iceberg snapshot: the value range of one column in each
data file, read from the manifests (pyiceberg ``DataFile.lower_bounds`` / ``upper_bounds``,
field id -> bytes in Iceberg's single-value serialization).

An incremental refresh uses them to find the MV data files that may hold a touched key
(:mod:`sparkmv.refresh.incremental.affected`). Values are decoded into comparable Python
values: integers (also dates, as days since 1970-01-01, and timestamps, as microseconds
since the epoch), strings, decimals and booleans; any other type has no usable range.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pyiceberg.conversions import from_bytes
from pyiceberg.table import Table
from pyiceberg.types import (
    BooleanType,
    DateType,
    DecimalType,
    IntegerType,
    LongType,
    PrimitiveType,
    StringType,
    TimestampType,
    TimestamptzType,
)

from sparkmv.errors import StorageError

RANGED_TYPES = (BooleanType, DateType, DecimalType, IntegerType, LongType, StringType, TimestampType, TimestamptzType)
"""Iceberg types whose bounds decode to values ordered as the column's values are."""


@dataclass(frozen=True)
class FileRange:
    """The range of one column in one data file.

    Attributes:
        path: the data file's URI, as the snapshot lists it.
        size_bytes: file size in bytes; record_count: rows.
        lower, upper: the smallest and largest non-NULL value (bounds: a string's upper bound
            may be longer-than-exact, truncated and incremented by the writer), or None when
            unknown (no statistics, or the column is NULL in every row).
        nulls: True when the file may hold a NULL in the column (NULL count > 0 or unknown).
        only_nulls: True when every value of the column in the file is NULL.
    """

    path: str
    size_bytes: int
    record_count: int
    lower: Any
    upper: Any
    nulls: bool
    only_nulls: bool

    @property
    def ranged(self) -> bool:
        """True when both bounds are known."""
        return self.lower is not None and self.upper is not None


def column_ranges(table: Table, snapshot_id: int, column: str) -> list[FileRange]:
    """The range of ``column`` (case-insensitive) in every data file of ``snapshot_id``.

    A file without statistics for the column, or a column of a type outside
    :data:`RANGED_TYPES`, gets ``lower = upper = None`` and ``nulls = True``.

    Raises:
        StorageError: when the snapshot has delete files (sparkmv never writes any), or the
            column does not exist.
    """
    schema = table.schema()
    try:
        field = schema.find_field(column, case_sensitive=False)
    except ValueError as exc:
        raise StorageError(f"table {table.name()} has no column {column}") from exc
    field_type = field.field_type if isinstance(field.field_type, RANGED_TYPES) else None
    out: list[FileRange] = []
    for task in table.scan(snapshot_id=snapshot_id).plan_files():
        if task.delete_files:
            raise StorageError(f"table {table.name()} has delete files; sparkmv reads only data files")
        f = task.file
        lower = _decode(field_type, (f.lower_bounds or {}).get(field.field_id))
        upper = _decode(field_type, (f.upper_bounds or {}).get(field.field_id))
        null_count = (f.null_value_counts or {}).get(field.field_id)
        value_count = (f.value_counts or {}).get(field.field_id)
        out.append(
            FileRange(
                path=f.file_path,
                size_bytes=f.file_size_in_bytes,
                record_count=f.record_count,
                lower=lower,
                upper=upper,
                nulls=null_count is None or null_count > 0,
                only_nulls=null_count is not None and null_count == (value_count or f.record_count),
            )
        )
    return out


def _decode(field_type: PrimitiveType | None, raw: bytes | None) -> Any:
    """The Python value of a serialized bound (None when absent or not ranged); dates and
    timestamps stay integers (days, microseconds)."""
    if field_type is None or raw is None:
        return None
    return from_bytes(field_type, raw)
