"""What the semi-join reduced delta terms read of the other base tables, from Iceberg's
per-file min/max statistics (no data read).

The term of a changed table ``Ti`` reads another table ``Tj`` filtered by the values of
``ΔTi``'s join column (:mod:`sparkmv.refresh.incremental.semijoin`); Spark pushes the filter
into the Parquet scan, which skips the row groups (and so files) whose min/max statistics of
the column miss the values' range. So the term's read of ``Tj`` is about the bytes of its
files whose bounds of the join column overlap the delta's range of the source column,
and that range is the union of the bounds of ``ΔTi``'s appended files as the manifests
record them (``DataFile.lower_bounds`` / ``upper_bounds``). Where a table is not Iceberg,
or a file carries no bounds, or the change is signed, the whole table is counted as before.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from pyiceberg.conversions import from_bytes
from pyiceberg.expressions import AlwaysTrue, And, BooleanExpression, GreaterThanOrEqual, LessThanOrEqual
from pyiceberg.table import Table
from pyiceberg.types import PrimitiveType

from sparkmv.analysis.incremental import IvmAnalysis, branches_reading
from sparkmv.analysis.query import parse_query
from sparkmv.analysis.semijoin import INTEGER_TYPES, Reduction, reductions
from sparkmv.names import ObjectName
from sparkmv.sources.changes import APPEND, BaseChange
from sparkmv.sources.pinned import PinnedTable

if TYPE_CHECKING:
    from sparkmv.refresh.runtime import Runtime

Loader = Callable[[PinnedTable], Table | None]

UNCLUSTERED = 0.5
"""A target column whose files each span more than this share of its whole range (the
median file, :func:`~sparkmv.refresh.incremental.pruned.column_spread`) is not reduced: no
file or row group can be skipped by a filter on it, and a broadcast join with the small
delta filters its rows as cheaply as the filter would, without the Spark job collecting
the delta's values (TPC-H's ``o_custkey``, ``l_partkey``, ``ps_suppkey``: about 1 s per
term at SF 1)."""

"""Loads the Iceberg table of a pinned base table (None: not Iceberg)."""


@dataclass(frozen=True)
class Joined:
    """The bytes the delta terms join of the other base tables.

    Attributes:
        bytes: what the terms read of the other tables (pruned where statistics allow).
        whole: what they would read unpruned (the other tables' bytes).
        pruned_on: the join columns whose min/max statistics pruned files.
    """

    bytes: int
    whole: int
    pruned_on: tuple[str, ...]


def joined_bytes(
    analysis: IvmAnalysis,
    pinned: dict[str, PinnedTable],
    changed: dict[str, BaseChange],
    load: Loader,
    emptied: Mapping[tuple[str, str], int] | None = None,
) -> Joined:
    """The :class:`Joined` bytes of the terms of the ``changed`` base tables; a table whose
    statistics cannot be read counts whole (an estimate never fails a refresh), and so do
    the key queries of an affected-key recomputation (``analysis.keyed``), which are not
    reduced. ``emptied``: ``(changed table, other table)`` -> the bytes a probe read of the
    other table, which the term then reads nothing (or a change's few retracted rows) of
    (:mod:`sparkmv.refresh.incremental.probe`)."""
    from sparkmv.refresh.incremental import semijoin  # imports pyspark: EXPLAIN of a SELECT must not

    total = whole = 0
    pruned_on: set[str] = set()
    reduced = semijoin.ENABLED and analysis.keyed is None
    query = parse_query(analysis.merged_sql or analysis.augmented_sql) if reduced else None
    for table, change in sorted(changed.items()):
        others = [o for o in sorted(pinned) if o != table]
        whole_here = sum(pinned[o].total_bytes() for o in others)
        whole += whole_here
        found = _reductions(query, table, pinned) if query is not None else []
        for other in others:
            if emptied is not None and (table, other) in emptied:
                total += emptied[(table, other)]
                continue
            mine = [r for r in found if r.target == ObjectName.parse(other, allow_reserved=True)]
            size = _pruned(change, pinned[other], mine, load) if mine else None
            if size is None:
                total += pinned[other].total_bytes()
            else:
                total += size
                if size < pinned[other].total_bytes():
                    pruned_on.update(r.source for r in mine)
    return Joined(total, whole, tuple(sorted(pruned_on)))


def _reductions(query: Any, table: str, pinned: dict[str, PinnedTable]) -> list[Reduction]:
    name = ObjectName.parse(table, allow_reserved=True)
    term = branches_reading(query, name)
    if term is None:
        return []
    return reductions(term, name, column_types(pinned))


def column_types(pinned: dict[str, PinnedTable]) -> dict[ObjectName, dict[str, Any]]:
    """Base table -> its column (lower case) -> Spark JSON type, as
    :func:`~sparkmv.analysis.semijoin.reductions` takes them."""
    from sparkmv.storage.schema import schema_from_json  # imports pyspark: only when estimating

    return {
        ObjectName.parse(t, allow_reserved=True): {
            f.name.lower(): f.dataType.jsonValue() for f in schema_from_json(p.schema_json).fields
        }
        for t, p in pinned.items()
    }


def _overlapping(target: Table, ranges: list[tuple[str, tuple[Any, ...]]]) -> BooleanExpression:
    """The filter "every ``(column, (min, max))`` of ``ranges`` holds", against which a
    scan plan keeps the files whose bounds overlap them."""
    cond: BooleanExpression = AlwaysTrue()
    for column, (low, high) in ranges:
        name = target.schema().find_field(column, case_sensitive=False).name
        cond = And(cond, And(GreaterThanOrEqual(name, low), LessThanOrEqual(name, high)))  # type: ignore[call-arg, arg-type]
    return cond


def bytes_within(target: Table, snapshot_id: int | None, ranges: list[tuple[str, tuple[Any, ...]]]) -> int:
    """Bytes of ``target``'s files (at ``snapshot_id``) whose bounds overlap every
    ``(column, (min, max))`` of ``ranges``, from the manifests (no data read)."""
    scan = target.scan(row_filter=_overlapping(target, ranges), snapshot_id=snapshot_id)
    return sum(t.file.file_size_in_bytes for t in scan.plan_files())


def files_within(load: Loader, pinned: PinnedTable, ranges: list[tuple[str, tuple[Any, ...]]]) -> PinnedTable:
    """``pinned`` (an Iceberg base table) with only the data files whose bounds overlap
    every ``(column, (min, max))`` of ``ranges`` (a semi-join reduction's integer columns),
    so Spark does not open the others only to skip their row groups (TPC-H RF1 at SF 1:
    170 files of ``lineitem`` opened for 3,149 rows). Exact: a file outside a range holds
    no row the reduction's filter keeps. Partitions with delete files are kept whole (their
    deletes are matched to each of their files). ``pinned`` unchanged when there is nothing
    to prune by, it is not Iceberg, its file lists are not stored, or its snapshot's
    manifests do not list exactly its files (expired, or spelled otherwise)."""
    ranges = [(c, b) for c, b in ranges if b != ()]  # an empty range is a FALSE filter: Spark reads nothing
    parts = pinned.partitions
    if not ranges or pinned.snapshot_id is None or any(not p.files for p in parts.values()):
        return pinned

    def listed() -> frozenset[str] | None:
        try:
            table = load(pinned)
            scan = None if table is None else table.scan(snapshot_id=pinned.snapshot_id)
            return None if scan is None else frozenset(t.file.file_path for t in scan.plan_files())
        except Exception:
            return None

    def compute() -> frozenset[str] | None:
        # Once per snapshot (not per range): do its manifests list exactly the pinned files?
        every = cached(("files", pinned.name, pinned.snapshot_id), listed)
        if every is None or every != {f for p in parts.values() for f in p.files}:
            return None
        try:
            table = load(pinned)
            if table is None:
                return None
            scan = table.scan(row_filter=_overlapping(table, ranges), snapshot_id=pinned.snapshot_id)
            return frozenset(t.file.file_path for t in scan.plan_files())
        except Exception:
            return None

    keep = cached(("within", pinned.name, pinned.snapshot_id, tuple(ranges)), compute)
    if keep is None:
        return pinned
    kept = {k: p if p.delete_files else replace(p, files=[f for f in p.files if f in keep]) for k, p in parts.items()}
    return replace(pinned, partitions={k: p for k, p in kept.items() if p.files})


def _pruned(change: BaseChange, other: PinnedTable, found: list[Reduction], load: Loader) -> int | None:
    """Bytes of ``other``'s files whose bounds overlap the delta's range on every reduced
    column; None when unknown."""
    if change.kind != APPEND or change.delta is None:
        return None
    try:
        source, target = load(change.delta), load(other)
        if source is None or target is None:
            return None
        ranges = []
        for r in found:
            bounds = _range(source, change.delta, r.source)
            if bounds is None:
                return None
            if bounds == ():
                return 0  # no non-NULL key in the delta: the term joins nothing
            ranges.append((r.column, bounds))
        return bytes_within(target, other.snapshot_id, ranges)
    except Exception:
        return None


def _range(table: Table, delta: PinnedTable, column: str) -> tuple[Any, ...] | None:
    """(min, max) of ``column`` over the delta's files from their manifest bounds; ``()``
    when every file holds only NULLs there; None when a file has no bounds."""
    wanted = {f for p in delta.partitions.values() for f in p.files}
    field = table.schema().find_field(column, case_sensitive=False)
    lows: list[Any] = []
    highs: list[Any] = []
    seen = 0
    for task in table.scan(snapshot_id=delta.snapshot_id).plan_files():
        f = task.file
        if f.file_path not in wanted:
            continue
        seen += 1
        nulls, count = (f.null_value_counts or {}).get(field.field_id), f.record_count
        if nulls is not None and nulls == count:
            continue
        low, high = (f.lower_bounds or {}).get(field.field_id), (f.upper_bounds or {}).get(field.field_id)
        if low is None or high is None:
            return None
        kind = field.field_type
        if not isinstance(kind, PrimitiveType):
            return None
        lows.append(from_bytes(kind, low))
        highs.append(from_bytes(kind, high))
    if seen != len(wanted):
        return None
    return (min(lows), max(highs)) if lows else ()


def iceberg_table(rt: Runtime, pinned: PinnedTable) -> Table | None:
    """The Iceberg table of a pinned base table (of sparkmv's catalog or an external one);
    None for other kinds."""
    if pinned.kind not in ("iceberg", "refreshable") or pinned.snapshot_id is None:
        return None
    name = ObjectName.parse(pinned.name, allow_reserved=True)
    if pinned.catalog_properties is not None:
        from sparkmv.sources.external import load_table

        return load_table(name, pinned.catalog_properties)
    return rt.iceberg.load(name)


def column_spread(table: Table, snapshot_id: int | None, column: str) -> tuple[float, Any, Any] | None:
    """How unclustered ``column`` is in ``table``'s files (at ``snapshot_id``), from the
    manifests' bounds: the median over its files of the share of the column's whole range
    ``[min, max]`` that one file's ``[min, max]`` covers, with that min and max. Near 0:
    each file holds a narrow range (a filter on the column skips most files); near 1: every
    file holds values from everywhere (TPC-H's ``l_partkey`` or ``o_custkey``), so only a
    filter outside ``[min, max]`` skips a file. None for a column that is not an integer,
    decimal or date, or when a file has no bounds."""
    field = table.schema().find_field(column, case_sensitive=False)
    kind = field.field_type
    if not isinstance(kind, PrimitiveType) or str(kind).split("(")[0] not in ("int", "long", "decimal", "date"):
        return None
    spans: list[tuple[Any, Any]] = []
    for task in table.scan(snapshot_id=snapshot_id).plan_files():
        low = (task.file.lower_bounds or {}).get(field.field_id)
        high = (task.file.upper_bounds or {}).get(field.field_id)
        if low is None or high is None:
            return None
        spans.append((from_bytes(kind, low), from_bytes(kind, high)))
    if not spans:
        return None
    low, high = min(lo for lo, _ in spans), max(h for _, h in spans)
    if high == low:
        return 1.0, low, high
    shares = sorted(float((h - lo) / (high - low)) for lo, h in spans)
    return shares[len(shares) // 2], low, high


def appended_range(delta: PinnedTable, column: str, load: Loader) -> tuple[Any, ...] | None:
    """(min, max) of ``column`` over an append's files (``delta``, from the manifests; ``()``:
    NULLs only); None when unknown (not an Iceberg append, no statistics, an error reading
    the manifests). Planned once per process for the same files (:func:`cached`): AUTO's
    estimate and the run's semi-join reduction ask for the same ranges."""
    files = frozenset(f for p in delta.partitions.values() for f in p.files)
    key = ("range", delta.name, delta.snapshot_id, hash(files), len(files), column.lower())

    def compute() -> tuple[Any, ...] | None:
        try:
            table = load(delta)
            return None if table is None else _range(table, delta, column)
        except Exception:
            return None

    return cached(key, compute)  # type: ignore[no-any-return]


def cached_spread(load: Loader, pinned: PinnedTable, column: str) -> tuple[float, Any, Any] | None:
    """:func:`column_spread` of ``column`` in ``pinned`` (once per snapshot and column);
    None when not an Iceberg table or on an error reading its manifests."""

    def compute() -> tuple[float, Any, Any] | None:
        try:
            table = load(pinned)
            return None if table is None else column_spread(table, pinned.snapshot_id, column)
        except Exception:
            return None

    return cached(("spread", pinned.name, pinned.snapshot_id, column.lower()), compute)  # type: ignore[no-any-return]


_CACHE: dict[tuple[Any, ...], Any] = {}
"""Ranges, spreads and overlapping bytes already planned in this process (each costs a scan
plan of the table's manifests; one estimate and one run ask for the same several times).
Keys hold the snapshot ids and files, which never change in place."""


def cached(key: tuple[Any, ...], compute: Callable[[], Any]) -> Any:
    """``compute()`` once per ``key`` in this process (at most ~512 kept)."""
    if key not in _CACHE:
        if len(_CACHE) > 512:
            _CACHE.clear()
        _CACHE[key] = compute()
    return _CACHE[key]


def prunes(
    load: Loader, pinned: Mapping[str, PinnedTable], change: PinnedTable, table: str, column: str, source: str
) -> bool:
    """False when filtering base table ``table`` (as ``pinned`` holds it) on ``column`` by
    the values of the delta's (``change``'s) ``source`` column cannot skip a file of it:
    the column is spread over more than :data:`UNCLUSTERED` of its range in its files
    (:func:`~sparkmv.refresh.incremental.pruned.column_spread`) and the delta's values may
    fall inside that range (an append's range from its manifests: TPC-H RF1's new order keys
    lie above every old one, and prune every old file). True when unknown (a virtual input,
    not Iceberg, no statistics)."""
    target = pinned.get(table)
    if target is None or target.snapshot_id is None:
        return True
    layout = cached_spread(load, target, column)
    if layout is None or layout[0] <= UNCLUSTERED:
        return True
    appended = appended_range(change, source, load) if change.kind == "iceberg" else None
    if appended is None:
        return False
    if appended == () or appended[1] < layout[1] or appended[0] > layout[2]:
        return True
    # The range overlaps the table's, which may hold the appended files themselves (the
    # term reads it at its new position: TPC-H RF1's lineitem holds the new orders' rows):
    # reduce when the files whose bounds overlap the range are at most UNCLUSTERED of it.
    within = overlapping_bytes(load, target, column, appended)
    return within is not None and within <= UNCLUSTERED * target.total_bytes()


def overlapping_bytes(load: Loader, pinned: PinnedTable, column: str, bounds: tuple[Any, ...]) -> int | None:
    """Bytes of ``pinned``'s files whose bounds of ``column`` overlap ``bounds`` (min, max),
    from its manifests (:func:`bytes_within`, once per snapshot, column and bounds); None
    when not an Iceberg table or on an error reading its manifests."""

    def compute() -> int | None:
        try:
            table = load(pinned)
            return None if table is None else bytes_within(table, pinned.snapshot_id, [(column, bounds)])
        except Exception:
            return None

    key = ("overlap", pinned.name, pinned.snapshot_id, column.lower(), bounds)
    return cached(key, compute)  # type: ignore[no-any-return]


def known_range(load: Loader, change: PinnedTable, column: str, kind: object) -> tuple[Any, ...] | None:
    """(min, max) of an integer ``column`` (Spark JSON type ``kind``) over an Iceberg
    append's files (``change``), from their manifests (``()``: NULLs only), so a semi-join
    reduction filters by it without a Spark job collecting the delta's values; None for
    another kind of change or type, or when unknown. Beyond
    ``spark.sql.parquet.pushdown.inFilterThreshold`` (10) values Spark pushes an IN list
    into the Parquet scan as its min/max range anyway, so the range skips the same row
    groups."""
    if change.kind != "iceberg" or kind not in INTEGER_TYPES:
        return None
    return appended_range(change, column, load)
