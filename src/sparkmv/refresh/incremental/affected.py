"""The MV data files an incremental refresh reads and rewrites: only those that may hold a
touched key.

An MV with a key (:attr:`~sparkmv.analysis.ivm.IvmAnalysis.key_columns`) has its data files
clustered by it (:func:`sparkmv.storage.files.write_staged`), so each file's column
statistics of the first key column (:mod:`sparkmv.storage.file_stats`) give a narrow range.
The touched values of that column (the distinct values of the delta rows or touched keys;
their min/max range when more than :data:`MAX_TOUCHED_VALUES`) select the files whose
range may hold one; a file with NULLs in the column may hold a NULL key; a file without
statistics is always selected. Every row with a touched key is therefore in a selected file,
and a merge over the selected files' rows equals a merge over the whole MV for those keys;
the other files are kept as they are.

A partitioned MV rewrites the affected partitions (:func:`affected_partitions`); an MV
without a key, or whose key column has no usable statistics, rewrites all its files.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from sparkmv.analysis.lineage import Lineage
from sparkmv.sources.pinned import PinnedTable
from sparkmv.storage.file_stats import FileRange, column_ranges
from sparkmv.storage.iceberg import IcebergStore
from sparkmv.storage.partition_values import PartitionValueError, canonical, sort_key

APPENDED_KINDS = frozenset({"parquet", "csv", "json", "orc", "text", "iceberg", "delta"})
"""Kinds of a base table whose delta (:attr:`IncrementalInput.delta`) is files appended to
known partitions (``signed`` and ``changelog`` deltas carry retractions read elsewhere)."""
MAX_TOUCHED_VALUES = 10_000
"""At most this many distinct touched values are collected to the driver and matched one
by one; more are matched as their min/max range."""


@dataclass(frozen=True)
class Affected:
    """The MV data files a refresh reads and replaces.

    Attributes:
        files: their paths (as the snapshot lists them).
        bytes: their total size in bytes (what the rewrite will be about).
        detail: how the publish replaces them, stored in the chunk's outcome:
            ``{"replace_files": [...]}`` (exactly ``files``), ``{"replace": [...]}``
            (identity partition values) or ``{"replace_all": True}``.
    """

    files: list[str]
    bytes: int
    detail: dict[str, Any]


@dataclass(frozen=True)
class Touched:
    """The touched values of one key column, in the domain of its decoded statistics.

    Attributes:
        values: sorted distinct non-NULL values, or None when only ``span`` is known.
        span: ``(min, max)`` of the non-NULL values (None: no non-NULL value).
        null: True when a NULL key is touched.
    """

    values: list[Any] | None
    span: tuple[Any, Any] | None
    null: bool

    def may_be_in(self, r: FileRange) -> bool:
        """True when file ``r`` may hold a touched value (always, when its range is unknown).

        >>> t = Touched([3, 9], (3, 9), False)
        >>> f = lambda lo, hi, nulls=False: FileRange("p", 1, 1, lo, hi, nulls, False)
        >>> [t.may_be_in(f(1, 2)), t.may_be_in(f(4, 8)), t.may_be_in(f(8, 12)), t.may_be_in(f(None, None))]
        [False, False, True, True]
        >>> Touched(None, (3, 9), True).may_be_in(f(10, 11, nulls=True))
        True
        """
        if self.null and r.nulls:
            return True
        if r.only_nulls:
            return False
        if not r.ranged:
            return True
        if self.span is None:
            return False
        if self.values is None:
            return bool(self.span[0] <= r.upper and r.lower <= self.span[1])
        i = bisect_left(self.values, r.lower)
        return i < len(self.values) and bool(self.values[i] <= r.upper)


def affected_files(table: Any, mv_snapshot: int | None, rows: DataFrame, keys: Sequence[str]) -> Affected:
    """The data files of the unpartitioned MV ``table`` at ``mv_snapshot`` that may hold a
    key of ``rows`` (delta rows or touched keys, with the MV's column names): selected by
    the first of ``keys`` (module docstring); all files when ``keys`` is empty or the key's
    type has no comparable statistics."""
    if mv_snapshot is None:
        return Affected([], 0, {"replace_all": True})
    column = _column(rows, keys[0]) if keys else None
    value = _stats_value(rows, column) if column is not None else None
    if column is None or value is None:
        files = IcebergStore.data_files(table, mv_snapshot)
        return Affected([f.path for f in files], sum(f.size_bytes for f in files), {"replace_all": True})
    ranges = column_ranges(table, mv_snapshot, column)
    # One file (a small MV): it is rewritten whatever the keys; no Spark job to collect them.
    if len(ranges) > 1:
        touched = touched_values(rows, value)
        ranges = [r for r in ranges if touched.may_be_in(r)]
    paths = [r.path for r in ranges]
    return Affected(paths, sum(r.size_bytes for r in ranges), {"replace_files": paths})


def affected_partitions(
    partition_by: str, rows: DataFrame, table: Any, mv_snapshot: int | None
) -> tuple[list[str], list[str | None], int]:
    """The MV's data files of the partitions the delta ``rows`` touch, those partitions, and
    the files' bytes.

    The partition values are read back as Spark's text of the value (session time zone
    UTC) and put in the one text form of their kind, never through Python datetimes (which
    PySpark converts with the machine's local time zone)."""
    files = IcebergStore.data_files(table, mv_snapshot) if mv_snapshot is not None else []
    column = next(f.name for f in rows.schema.fields if f.name.lower() == partition_by.lower())
    kind = IcebergStore.partition_kind(table) or "string"
    texts = rows.select(F.col(f"`{column}`").cast("string")).distinct().collect()
    wanted = {canonical(r[0], kind) for r in texts}
    chosen = [f for f in files if f.partition in wanted]
    return [f.path for f in chosen], sorted(wanted, key=lambda v: sort_key(v, kind)), sum(f.size_bytes for f in chosen)


def delta_partitions(lineage: Lineage, deltas: Mapping[str, PinnedTable | None], kind: str) -> list[str] | None:
    """The MV partitions (text of ``kind``, sorted) the delta rows of an append can touch,
    known without a Spark job from the partitions of the appended files, or None when they
    cannot be known so.

    They are known when the MV's partition lineage is complete (every row's MV partition is
    the image of a reference partition, no outer join) and every base table with a delta is
    a reference table whose delta is appended files (not signed rows, not a changelog) in
    partitions of its mapped column: a delta-rule term reads the changed table's delta rows,
    and the MV partition of each of its rows is the mapping of that row's base partition
    (also through a join on the partition column). The list may hold partitions to which no
    delta row goes (every row filtered out): their MV files are then read and rewritten
    unchanged. A NULL partition value is never assumed: None.

    >>> from sparkmv.analysis.lineage import IDENTITY, PartitionMapping
    >>> lin = Lineage({"d.t": PartitionMapping("d.t", "m", IDENTITY)}, complete=True)
    >>> from sparkmv.sources.pinned import PinnedPartition
    >>> delta = PinnedTable("d.t", "parquet", '{"type": "struct", "fields": []}', ["m"],
    ...                     {"m=1995-06": PinnedPartition(["f.parquet"], "v")})
    >>> delta_partitions(lin, {"d.t": delta, "d.u": None}, "string")
    ['1995-06']
    >>> delta_partitions(Lineage(lin.mappings, complete=False), {"d.t": delta}, "string") is None
    True
    >>> delta_partitions(lin, {"d.u": delta}, "string") is None  # not a reference table
    True
    """
    if not lineage.complete:
        return None
    wanted: set[str] = set()
    for table, delta in deltas.items():
        if delta is None:
            continue
        mapping = lineage.mappings.get(table)
        columns = [c.lower() for c in delta.partition_columns]
        if mapping is None or delta.kind not in APPENDED_KINDS or mapping.base_column.lower() not in columns:
            return None
        for path in (path for path, part in delta.partitions.items() if part.files):
            try:
                value = canonical(mapping.transform.apply(delta.value(path, mapping.base_column)), kind)
            except PartitionValueError:
                return None
            if value is None:
                return None
            wanted.add(value)
    return sorted(wanted, key=lambda v: sort_key(v, kind))


def partition_files(table: Any, mv_snapshot: int | None, partitions: Sequence[str]) -> tuple[list[str], int]:
    """The paths and total bytes of the MV's data files in ``partitions`` at ``mv_snapshot``."""
    files = IcebergStore.data_files(table, mv_snapshot) if mv_snapshot is not None else []
    chosen = [f for f in files if f.partition in set(partitions)]
    return [f.path for f in chosen], sum(f.size_bytes for f in chosen)


def touched_values(rows: DataFrame, value: Column) -> Touched:
    """The distinct values of ``value`` over ``rows``: their min/max, whether one is NULL
    and about how many there are (one job over every partition of ``rows`` at once), then
    the values themselves when about at most :data:`MAX_TOUCHED_VALUES` (a second job).

    Not ``distinct().limit(n)``: Spark runs a limit as jobs over 1, 4, 16, ... partitions
    in turn, which for the union of a join's delta terms was 11 jobs and ~5 s at TPC-H
    SF 1 (Q10 after RF1, bench/RESULTS.md, TPC-H refresh)."""
    k = F.col("k")
    keys = rows.select(value.alias("k"))
    row = keys.agg(F.min(k), F.max(k), F.max(k.isNull().cast("int")), F.approx_count_distinct(k)).first()
    assert row is not None
    span = (row[0], row[1]) if row[0] is not None else None
    if row[3] > MAX_TOUCHED_VALUES:
        return Touched(None, span, bool(row[2]))
    values = sorted(r[0] for r in keys.where(k.isNotNull()).distinct().collect())
    return Touched(values, span, bool(row[2]))


def _column(rows: DataFrame, name: str) -> str | None:
    """The column of ``rows`` named ``name`` (case-insensitive), or None."""
    return next((f.name for f in rows.schema.fields if f.name.lower() == name.lower()), None)


def _stats_value(rows: DataFrame, column: str) -> Column | None:
    """``column`` as the values its decoded Iceberg statistics compare with (dates as days,
    timestamps as microseconds since the epoch), or None for a type without them."""
    data_type = rows.schema[column].dataType
    col = F.col(f"`{column}`")
    if isinstance(data_type, T.DateType):
        return F.unix_date(col)
    if isinstance(data_type, T.TimestampType):
        return F.unix_micros(col)
    plain = (T.ByteType, T.ShortType, T.IntegerType, T.LongType, T.StringType, T.DecimalType, T.BooleanType)
    return col if isinstance(data_type, plain) else None
