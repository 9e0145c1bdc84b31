"""The touched keys of a correlation key (:mod:`sparkmv.analysis.correlated`) as far as they
are known without Spark, and what reading the bound tables filtered to them costs: AUTO's
estimate of :mod:`sparkmv.refresh.incremental.correlated` (which imports pyspark; this does not).
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from sparkmv.analysis.correlated import CorrelatedPlan
from sparkmv.analysis.semijoin import INTEGER_TYPES
from sparkmv.refresh.incremental import probe
from sparkmv.refresh.incremental.pruned import bytes_within, iceberg_table, known_range
from sparkmv.refresh.runtime import Runtime
from sparkmv.sources.changes import SIGNED, BaseChange
from sparkmv.sources.pinned import PinnedTable


@dataclass(frozen=True)
class TouchedKeys:
    """The touched values of the correlation key.

    Attributes:
        values: the distinct non-NULL values, sorted.
        null: True when a changed row holds NULL in its bound column.
    """

    values: tuple[Any, ...]
    null: bool

    def span(self) -> tuple[Any, Any] | None:
        """(min, max) of the non-NULL values; None when there are none."""
        return (self.values[0], self.values[-1]) if self.values else None


def cached_keys(rt: Runtime, plan: CorrelatedPlan, deltas: Mapping[str, PinnedTable]) -> TouchedKeys | None:
    """The touched keys when every change is a signed one in the change cache (read
    without Spark); None otherwise."""
    values: set[Any] = set()
    null = False
    for table, change in deltas.items():
        for column in plan.bound_columns(table.lower()):
            keys = probe.delta_keys(rt.iceberg.warehouse, change, column) if change.kind == "signed" else None
            if keys is None:
                return None
            values.update(keys.values)
            null = null or keys.nulls
    return TouchedKeys(tuple(sorted(values)), null)


def emptied(rt: Runtime, pinned: PinnedTable, column: str, change: PinnedTable | None, keys: TouchedKeys) -> bool:
    """True when the table ``pinned`` only lost rows in its ``change`` and a probe finds
    none of ``keys`` left in its ``column`` (so its new rows of those keys are none). Not
    probed: a change that inserted rows, a NULL key, more than :data:`probe.MAX_KEYS` keys,
    or a table under :data:`probe.MIN_TARGET_BYTES` (read filtered for less)."""
    if not probe.ENABLED or keys.null or not keys.values or len(keys.values) > probe.MAX_KEYS:
        return False
    if pinned.total_bytes() < probe.MIN_TARGET_BYTES:
        return False
    if not probe.retracts_only(rt, change, column):
        return False
    return probe.matches(rt, pinned, column, keys.values) == 0


def column_kind(pinned: PinnedTable, column: str) -> object:
    """The Spark JSON type of ``column`` (lower case) of ``pinned``."""
    from sparkmv.storage.schema import schema_from_json  # pyspark: not imported by AUTO's estimate itself

    field = next(f for f in schema_from_json(pinned.schema_json).fields if f.name.lower() == column)
    return field.dataType.jsonValue()


def correlated_bytes(
    rt: Runtime,
    plan: CorrelatedPlan,
    pinned: Mapping[str, PinnedTable],
    changed: Mapping[str, BaseChange],
    assume: bool = False,
) -> int:
    """Bytes the two sides of the refresh read: each table bound to the key read new,
    filtered to the touched keys (its files pruned by their range when it is known: an
    Iceberg append's manifest bounds, or a cached signed change's keys), none of it when a
    probe finds the keys gone (``assume``, AUTO's floor estimate: a signed change not read
    yet counts as if it did); an appended table's old side is its new files but the
    appended ones (the new side reads them once more), a change that only retracted is its
    new rows plus its retracted ones, any other change reads the old side again; a table
    bound to no key twice."""
    load = functools.partial(iceberg_table, rt)
    deltas = {t: c.delta for t, c in changed.items() if c.delta is not None}
    keys = cached_keys(rt, plan, deltas)
    span = keys.span() if keys is not None and not keys.null else _appended_span(rt, plan, changed)
    by_lower = {t.lower(): t for t in pinned}
    total = 0
    for table in sorted(set(plan.tables)):
        name = by_lower[table]
        source, change = pinned[name], changed.get(name)
        whole = source.total_bytes()
        columns = sorted(plan.bound_columns(table))
        if not columns:
            total += 2 * whole
            continue
        column = columns[0]
        if keys is not None and change is not None and emptied(rt, source, column, change.delta, keys):
            continue
        if keys is None and assume and change is not None and change.kind == SIGNED:
            continue
        read = _within(load, source, column, span, whole)
        total += read
        appended = change is not None and change.delta is not None and appended_files(source, change.delta)
        if change is not None and change.kind != SIGNED and not appended:
            total += read  # the old side, at the consumed snapshot
    return total


def appended_files(new: PinnedTable, change: PinnedTable) -> bool:
    """True when ``change`` is files appended to the Iceberg table pinned as ``new``, whose
    file lists are known: its old side is then its new files but the appended ones
    (:mod:`sparkmv.refresh.incremental.correlated`)."""
    parts = new.partitions.values()
    return change.kind == "iceberg" and new.kind == "iceberg" and bool(parts) and all(p.files for p in parts)


def _within(load: Any, source: PinnedTable, column: str, span: tuple[Any, Any] | None, whole: int) -> int:
    """Bytes of ``source``'s files whose bounds of ``column`` overlap ``span`` (integers);
    ``whole`` when that is not known."""
    if span is None or column_kind(source, column) not in INTEGER_TYPES:
        return whole
    table = load(source)
    return whole if table is None else bytes_within(table, source.snapshot_id, [(column, span)])


def _appended_span(rt: Runtime, plan: CorrelatedPlan, changed: Mapping[str, BaseChange]) -> tuple[Any, Any] | None:
    """(min, max) of the bound columns over appended Iceberg files (manifest bounds); None
    when a change is of another kind or a bound is unknown."""
    load = functools.partial(iceberg_table, rt)
    lows, highs = [], []
    for table, change in changed.items():
        if change.delta is None:
            continue
        for column in plan.bound_columns(table.lower()):
            bounds = known_range(load, change.delta, column, column_kind(change.delta, column))
            if not bounds:
                return None
            lows.append(bounds[0])
            highs.append(bounds[1])
    return (min(lows), max(highs)) if lows else None
