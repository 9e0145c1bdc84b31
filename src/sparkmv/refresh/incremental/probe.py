"""Emptiness probes of the delta terms of a signed change (TPC-H's RF2).

After a delete, the delta term of a changed table ``Ti`` joins its retracted rows with the
other tables, and a semi-join reduction (:mod:`sparkmv.analysis.semijoin`) keeps of each
other table ``Tj`` only the rows whose join column holds a key of ``ΔTi``. When those keys
are random (TPC-H's RF2 deletes 0.1 % of the orders, spread over every file), no file of
``Tj`` can be skipped and the term reads about what FULL reads. Yet the rows it keeps are
often none at all: the orders' lineitems were deleted with them, so no remaining row of
``lineitem`` joins a deleted order. A probe asks exactly that, reading only ``Tj``'s join
column: how many rows of ``Tj`` (as of the run's new position) hold one of the keys? None:

- ``Tj`` read at its **new** position joins nothing, and the term is empty;
- ``Tj`` read at its **old** position is its new contents plus the rows its own change
  retracted, when that change retracted only (``old = new ⊎ retracted``); so the term
  joins just those retracted rows, a few kilobytes; a ``Tj`` that did not change is read
  as its new contents, so the term is empty.

Any other case (rows found, a ``Tj`` whose change also inserted rows, keys unknown) leaves
the term as it was. Exact either way: a row of the term meets every equi-join, so its
``Tj`` row holds one of the keys. This is a semi-join reduction evaluated eagerly and
found empty, the same idea as Spark's runtime filters, and the keys are the change's netted
rows in the change cache (:mod:`sparkmv.sources.change_cache`), read without Spark.

A probe reads a column of ``Tj``, so it is run only where it is likely to find nothing
(:func:`promising`): when another change retracted rows holding every key, a parent
deleted with its children or children with their parent. A probe's answer depends only on
``Tj``'s snapshot, the column and the keys, so it is stored beside the change cache
(``<warehouse>/_sparkmv_changes/probe-<key>.json``) and every MV over the same change finds
it there: TPC-H's joins of ``lineitem`` and ``orders`` pay for two probes in all.

An inner stage keyed by a plain column of its one base table (TPC-H Q4's and Q18's stages
of order keys over ``lineitem``) is probed through that table: read new, it joins nothing
when the table holds none of the keys; and its own delta, when the table's change only
retracted rows whose keys the table no longer holds, is the stage over the retracted rows
alone (:mod:`sparkmv.refresh.incremental.stages`).
"""

from __future__ import annotations

import datetime
import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from sparkmv.analysis.semijoin import Reduction, reductions
from sparkmv.names import ObjectName
from sparkmv.sources import change_cache, key_counts
from sparkmv.sources.pinned import PinnedTable
from sparkmv.sources.signed import SIGN_COLUMN
from sparkmv.storage import warehouse

if TYPE_CHECKING:
    from sqlglot import exp

    from sparkmv.refresh.incremental.stage_cost import StageKey
    from sparkmv.refresh.runtime import Runtime

MAX_KEYS = 50_000
"""Most distinct keys of a change a probe filters by (a broadcast relation of them)."""
MIN_TARGET_BYTES = 16 * 1024 * 1024
"""A table of at most this many bytes is not probed: the term reads it whole for less."""
ENABLED = True
"""Module switch (tests and benchmarks compare with it off)."""
_KEY_TYPES = ("int", "uint", "string", "large_string", "date32")
"""Arrow types of keys that compare exactly as the join does (no float, decimal or timestamp)."""

_PROBE_KEY = "__smv_probe_key"
_answers: dict[str, int] = {}
_keys: dict[str, dict[str, DeltaKeys | None]] = {}
"""Column (lower case) -> keys, per change cache key; only of changes in the change cache
(immutable), each read once."""


@dataclass(frozen=True)
class DeltaKeys:
    """The keys of one column of a signed change.

    Attributes:
        values: the distinct non-NULL values of the column in the change's netted rows
            (inserted and retracted), sorted.
        retracts_only: True when the change holds no inserted row.
        nulls: True when some row of the change holds NULL in the column.
    """

    values: tuple[Any, ...]
    retracts_only: bool
    nulls: bool = False


@dataclass(frozen=True)
class Emptied:
    """A base table of one delta term that joins none of the change's rows at its new
    position.

    Attributes:
        table: the base table (qualified).
        role: how the term reads it: ``new``, or ``old`` (then its new contents plus the
            rows its change retracted).
        retracted: True when the term reads its retracted rows (role ``old`` of a table
            whose change retracted only); False: it reads nothing.
        column: the probed join column; ``source``: the changed table's column.
        probed_bytes: what the probe read (the column's share of the table's bytes) when
            this call ran it (or assumed it); 0 when its answer was stored.
    """

    table: str
    role: str
    retracted: bool
    column: str
    source: str
    probed_bytes: int


def delta_keys(root: warehouse.Location, change: PinnedTable | None, column: str) -> DeltaKeys | None:
    """The :class:`DeltaKeys` of ``column`` in the signed ``change`` as the change cache
    holds it; None when it is not cached, not signed, holds more than :data:`MAX_KEYS`
    distinct values or the column is of another type than :data:`_KEY_TYPES`."""
    return _columns_keys(root, change).get(column.lower())


def _columns_keys(root: warehouse.Location, change: PinnedTable | None) -> dict[str, DeltaKeys | None]:
    """Column (lower case) -> :func:`delta_keys` of every column of the signed ``change``,
    from one read of its change cache entry; empty when it is not there (yet: a change not
    read is not remembered, it may be read and stored later in this process)."""
    if change is None or change.kind != "signed":
        return {}
    key = change_cache.key(change)
    if key not in _keys:
        rows = change_cache.load(root, change)
        if rows is None:
            return {}
        _keys[key] = _read_keys(rows)
    return _keys[key]


def _read_keys(rows: Any) -> dict[str, DeltaKeys | None]:
    """:func:`_columns_keys` of a change's netted rows (an Arrow table)."""
    import pyarrow.compute as pc

    if SIGN_COLUMN not in rows.column_names:
        return {}
    signs = rows.column(SIGN_COLUMN)
    retracts_only = not (len(signs) > 0 and pc.max(signs).as_py() > 0)
    out: dict[str, DeltaKeys | None] = {}
    for name in rows.column_names:
        values = rows.column(name)
        if name == SIGN_COLUMN or not str(values.type).startswith(_KEY_TYPES):
            out[name.lower()] = None
            continue
        distinct = pc.unique(values.drop_null())
        keys = tuple(sorted(distinct.to_pylist())) if len(distinct) <= MAX_KEYS else None
        out[name.lower()] = None if keys is None else DeltaKeys(keys, retracts_only, values.null_count > 0)
    return out


def answer_key(target: PinnedTable, column: str, values: tuple[Any, ...]) -> str:
    """The cache key of a probe: hex sha256 of the target as pinned (its snapshot), the
    column and the keys."""
    plain = [v.isoformat() if isinstance(v, datetime.date) else v for v in values]
    identity = [target.to_json(), column.lower(), [type(values[0]).__name__ if values else ""], plain]
    return hashlib.sha256(json.dumps(identity, sort_keys=True, default=str).encode()).hexdigest()


def _location(root: warehouse.Location, key: str) -> str:
    return warehouse.join(root, change_cache.DIRECTORY, f"probe-{key}.json")


def cached_matches(root: warehouse.Location, target: PinnedTable, column: str, values: tuple[Any, ...]) -> int | None:
    """The stored answer of the probe (rows of ``target`` whose ``column`` is one of
    ``values``); None when it was never run."""
    key = answer_key(target, column, values)
    if key not in _answers:
        try:
            with warehouse.open_input(_location(root, key)) as f:
                _answers[key] = int(json.load(f)["matches"])
        except (FileNotFoundError, OSError, ValueError, KeyError):
            return None
    return _answers[key]


def matches(rt: Runtime, target: PinnedTable, column: str, values: tuple[Any, ...]) -> int:
    """Whether rows of ``target`` (read as pinned, deletes applied) hold one of ``values``
    in ``column``: 0 when none does, else a positive count (all of them when counted by
    Spark; on the driver, those of the batches read until the first match). The stored
    answer, or counted now and stored: on the driver by pyarrow
    (:func:`~sparkmv.sources.key_counts.count_matching`) or by one Spark job reading that
    column."""
    root = rt.iceberg.warehouse
    found = cached_matches(root, target, column, values)
    if found is not None:
        return found
    count = key_counts.count_matching(target, column, values, rt.iceberg) if values else 0
    if count is None:
        count = _spark_matches(rt, target, column, values)
    key = answer_key(target, column, values)
    _answers[key] = count
    where = _location(root, key)
    warehouse.make_dirs(warehouse.parent(where))
    temporary = f"{where}.tmp"
    with warehouse.open_output(temporary) as f:
        f.write(json.dumps({"matches": count}).encode())
    warehouse.rename(temporary, where)
    return count


def _spark_matches(rt: Runtime, target: PinnedTable, column: str, values: tuple[Any, ...]) -> int:
    """:func:`matches` counted by one Spark job (a table too large for the driver, or not
    Iceberg): ``target`` as pinned, semi-joined with the keys."""
    from pyspark.sql import functions as F
    from pyspark.sql.types import StructField, StructType

    from sparkmv.sources.resolve import read_pinned

    frame = read_pinned(rt.spark, target, store=rt.iceberg)
    field = next(f for f in frame.schema.fields if f.name.lower() == column.lower())
    # A broadcast semi-join with the keys as a small relation: an IN list of literals
    # costs a Py4J call per value (4.6 s for 6,000 keys) and slows Spark's optimizer.
    schema = StructType([StructField(_PROBE_KEY, field.dataType)])
    keys = F.broadcast(rt.spark.createDataFrame([(v,) for v in values], schema))
    return int(frame.join(keys, F.col(f"`{field.name}`") == keys[_PROBE_KEY], "left_semi").count())


def probe_bytes(target: PinnedTable) -> int:
    """What a probe of one column reads: the table's bytes over its column count."""
    return key_counts.column_bytes(target)


def emptied(
    rt: Runtime,
    query: exp.Query,
    changed: str,
    new: Mapping[str, PinnedTable],
    deltas: Mapping[str, PinnedTable | None],
    run: bool,
    assume: bool = False,
    stages: Mapping[str, StageKey] | None = None,
    columns: Mapping[ObjectName, Mapping[str, object]] | None = None,
) -> dict[str, Emptied]:
    """Base table or inner stage -> :class:`Emptied`, of the term of ``changed`` in
    ``query`` (the tables sorted by name: those before ``changed`` read new, those after it
    old, as :mod:`sparkmv.refresh.incremental.delta` builds the terms); ``new``: every base
    table (and inner stage placeholder) as pinned now; ``deltas``: the changed ones' deltas.
    ``run``: run the probes not yet stored (else only stored answers count). ``assume``: a
    change not yet in the change cache counts as if its probes found nothing (AUTO's floor
    estimate, before reading the change). ``stages``: the inner stages keyed by a plain
    column of their one base table (:class:`~sparkmv.refresh.incremental.stage_cost.StageKey`):
    such a stage read new joins nothing when its key table holds none of the keys in its key
    column, and its delta's keys are those of its key table's change; ``columns``: the
    column types of every input (default: of the pinned base tables). Empty when
    ``changed``'s delta is not a signed change."""
    if not ENABLED:
        return {}
    from sparkmv.refresh.incremental.pruned import column_types

    stages = stages or {}
    names = {ObjectName.parse(t, allow_reserved=True): t for t in new}
    size = {t: _size(new, stages, t) for t in new}
    # The largest tables first; once one joins nothing, the term is empty and is not probed further.
    found_all = reductions(query, ObjectName.parse(changed, allow_reserved=True), columns or column_types(dict(new)))
    out: dict[str, Emptied] = {}
    for r in sorted(found_all, key=lambda r: -size[names[r.target]]):
        table = names[r.target]
        if table in out or size[table] <= MIN_TARGET_BYTES:
            continue
        if any(not e.retracted for e in out.values()):
            break
        found = _emptied_by(rt, r, table, changed, new, deltas, stages, run, assume)
        if found is not None:
            out[table] = found
    return out


def _emptied_by(
    rt: Runtime,
    r: Reduction,
    table: str,
    changed: str,
    new: Mapping[str, PinnedTable],
    deltas: Mapping[str, PinnedTable | None],
    stages: Mapping[str, StageKey],
    run: bool,
    assume: bool,
) -> Emptied | None:
    """The :class:`Emptied` of ``table`` (the target of reduction ``r``) in the term of
    ``changed``, as :func:`emptied` describes; None when it is not probed or rows were found."""
    root = rt.iceberg.warehouse
    role = "new" if table < changed else "old"
    where = _target(stages, new, table, r.column, role)
    source = _source(stages, deltas, changed, r.source)
    if where is None or source is None:
        return None
    target, column = where
    own = deltas.get(table) if role == "old" else None
    if own is not None and not _retracts_only(root, own, r.column, assume):
        return None
    keys = delta_keys(root, source[0], source[1])
    if keys is None:
        if assume and _uncached(root, source[0]):
            return Emptied(table, role, own is not None, r.column, r.source, probe_bytes(target))
        return None
    found = cached_matches(root, target, column, keys.values)
    paid = 0
    probed = stages[table].table if table in stages else table
    if found is None and not promising(root, deltas, probed, column, source[0], keys, assume):
        return None
    if found is None and (assume or (run and rt.has_spark)):
        # The floor estimate counts a probe not run yet as finding nothing.
        found, paid = 0 if assume else matches(rt, target, column, keys.values), probe_bytes(target)
    return Emptied(table, role, own is not None, r.column, r.source, paid) if found == 0 else None


def _size(new: Mapping[str, PinnedTable], stages: Mapping[str, StageKey], table: str) -> int:
    pinned = new[stages[table].table] if table in stages else new[table]
    return pinned.total_bytes()


def _target(
    stages: Mapping[str, StageKey], new: Mapping[str, PinnedTable], table: str, column: str, role: str
) -> tuple[PinnedTable, str] | None:
    """(the Iceberg base table probed, its column) for a term reading ``table``'s
    ``column``: the table itself, or a stage's key table when ``column`` is the key of a
    stage of that one table read new (a stage read old would be recomputed over the key
    table's retracted rows: not done)."""
    if table in stages:
        key = stages[table]
        if role != "new" or column != key.key or key.tables != frozenset({key.table}):
            return None
        table, column = key.table, key.column
    pinned = new.get(table)
    return None if pinned is None or pinned.snapshot_id is None else (pinned, column)


def _source(
    stages: Mapping[str, StageKey], deltas: Mapping[str, PinnedTable | None], changed: str, column: str
) -> tuple[PinnedTable | None, str] | None:
    """(the signed change whose keys are probed, its column) for the delta of ``changed``'s
    ``column``: a stage's delta holds keys of its key table's change only."""
    if changed in stages:
        key = stages[changed]
        if column != key.key or key.tables != frozenset({key.table}):
            return None
        return deltas.get(key.table), key.column
    return deltas.get(changed), column


def _retracts_only(root: warehouse.Location, change: PinnedTable, column: str, assume: bool) -> bool:
    keys = delta_keys(root, change, column)
    if keys is None:
        return assume and _uncached(root, change)
    return keys.retracts_only


def _uncached(root: warehouse.Location, change: PinnedTable | None) -> bool:
    """True for a signed change whose rows the change cache does not hold yet."""
    return change is not None and change.kind == "signed" and change_cache.cached_rows(root, change) is None


def term_emptied(
    rt: Runtime,
    query: exp.Query,
    pinned: Mapping[str, PinnedTable],
    deltas: Mapping[str, PinnedTable | None],
    assume: bool = False,
) -> dict[tuple[str, str], Emptied]:
    """``(changed table, other table)`` -> :class:`Emptied`, over the terms of every changed
    table of ``query`` (the MV's query as its delta terms read it), for AUTO's estimate:
    the probes are run (where Spark is up) so that the terms read their answers."""
    from sparkmv.analysis.incremental import branches_reading

    out: dict[tuple[str, str], Emptied] = {}
    for changed in sorted(t for t, d in deltas.items() if d is not None):
        term = branches_reading(query, ObjectName.parse(changed, allow_reserved=True))
        if term is None:
            continue
        for table, found in emptied(rt, term, changed, pinned, deltas, run=not assume, assume=assume).items():
            out[(changed, table)] = found
    return out


def promising(
    root: warehouse.Location,
    deltas: Mapping[str, PinnedTable | None],
    table: str,
    column: str,
    change: PinnedTable | None,
    keys: DeltaKeys,
    assume: bool = False,
) -> bool:
    """True when a probe of ``table``'s ``column`` for the ``keys`` of ``change`` is worth
    its read (about a column of the table), because the keys' rows are likely gone: the
    table's own change (another than ``change``) retracted rows holding every key in that
    column, or, for the table's own change, another changed table's change retracted only
    and holds every key in one of its columns. A child deleted with its parent, or the
    parent with its children (TPC-H's RF2: orders with their lineitems). Otherwise the keys'
    rows are likely still there (a lineitem deleted, its part kept) and the probe would
    read the column for nothing. ``assume``: a change not read yet counts as covering."""
    wanted = set(keys.values)
    own = deltas.get(table)
    if own is not None and own is not change:
        theirs = delta_keys(root, own, column)
        if theirs is None:
            return assume and _uncached(root, own)
        return wanted <= set(theirs.values)
    for other, delta in deltas.items():
        if other == table or delta is None or delta is change or delta.kind != "signed":
            continue
        if _uncached(root, delta):
            if assume:
                return True
            continue
        for theirs in _columns_keys(root, delta).values():
            if theirs is not None and theirs.retracts_only and wanted <= set(theirs.values):
                return True
    return False


def joins_nothing(
    rt: Runtime,
    table: str,
    target: PinnedTable,
    column: str,
    change: PinnedTable | None,
    source: str,
    run: bool,
    deltas: Mapping[str, PinnedTable | None],
) -> bool:
    """True when no row of ``target`` (base table ``table`` as pinned now) holds in
    ``column`` a value of ``source`` in the signed ``change`` (and the change holds no NULL
    there): the probe's answer, run now when ``run``, not stored and :func:`promising`
    (``deltas``: every changed table's change). False when that is not known."""
    if not ENABLED or target.snapshot_id is None:
        return False
    root = rt.iceberg.warehouse
    keys = delta_keys(root, change, source)
    if keys is None or keys.nulls:
        return False
    found = cached_matches(root, target, column, keys.values)
    if found is None and run and rt.has_spark and promising(root, deltas, table, column, change, keys):
        found = matches(rt, target, column, keys.values)
    return found == 0


def retracts_only(rt: Runtime, change: PinnedTable | None, column: str) -> bool:
    """True when the signed ``change`` (in the change cache) holds no inserted row."""
    keys = delta_keys(rt.iceberg.warehouse, change, column)
    return keys is not None and keys.retracts_only


@dataclass(frozen=True)
class Prober:
    """The probes as AUTO's estimate of a query over inner stages asks them
    (:mod:`sparkmv.refresh.incremental.stage_cost`): run now unless ``assume``, where a
    change not yet in the change cache counts as if they found nothing."""

    rt: Runtime
    pinned: Mapping[str, PinnedTable]
    deltas: Mapping[str, PinnedTable | None]
    assume: bool

    def nothing(self, table: str, column: str, change: PinnedTable | None, source: str) -> bool:
        """True when no row of ``table`` holds in ``column`` a value of ``source`` in the
        signed ``change`` (:func:`joins_nothing`)."""
        if change is None or change.kind != "signed":
            return False
        if self.assume and _uncached(self.rt.iceberg.warehouse, change):
            return True
        if self.assume:  # the floor estimate: a probe not run yet counts as finding nothing
            keys = delta_keys(self.rt.iceberg.warehouse, change, source)
            target = self.pinned[table]
            if keys is not None and cached_matches(self.rt.iceberg.warehouse, target, column, keys.values) is None:
                root = self.rt.iceberg.warehouse
                return not keys.nulls and promising(root, self.deltas, table, column, change, keys, assume=True)
        return joins_nothing(
            self.rt, table, self.pinned[table], column, change, source, run=not self.assume, deltas=self.deltas
        )

    def retracting(self, change: PinnedTable | None, column: str) -> bool:
        """True when ``change`` is signed and only retracts rows (or, when ``assume``, is
        not yet read)."""
        if change is None or change.kind != "signed":
            return False
        return _retracts_only(self.rt.iceberg.warehouse, change, column, self.assume)
