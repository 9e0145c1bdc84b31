"""What the inner stages of a query (:mod:`sparkmv.analysis.stages`) and the delta terms over
them read, from Iceberg's per-file min/max statistics (no data read).

An inner stage keyed by one column of one base table (TPC-H Q4's ``SELECT DISTINCT
l_orderkey ...``, Q18's ``SELECT l_orderkey ... GROUP BY l_orderkey HAVING ...``) is
recomputed for its touched keys through a key filter whose range Spark pushes into the scan
(:func:`~sparkmv.refresh.incremental.merge_rows.key_range`), and the delta terms above it read
it filtered by the semi-join reduction of the changed table's join column
(:mod:`sparkmv.refresh.incremental.semijoin`), pushed the same way. So, as for base tables
(:mod:`sparkmv.refresh.incremental.pruned`), such a read costs the files of the stage's key
table whose bounds of the key column overlap the range of the values filtered by; the
stage's other tables count whole. Where a range is unknown (not an append, no statistics,
a stage keyed otherwise), the whole tables count. A stage maintained from its kept state
(:mod:`sparkmv.refresh.incremental.stage_state`) costs reading and writing that state
instead (:func:`kept_states`, :func:`stage_bytes`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from sqlglot import exp

from sparkmv.analysis.ivm import IvmAnalysis, Stage
from sparkmv.analysis.query import parse_query, referenced_tables, table_name
from sparkmv.analysis.semijoin import Reduction, reductions
from sparkmv.names import ObjectName
from sparkmv.refresh.incremental.probe import Prober
from sparkmv.refresh.incremental.pruned import (
    Joined,
    Loader,
    appended_range,
    bytes_within,
    cached,
    column_types,
)
from sparkmv.refresh.incremental.stage_state import StateStore, kept_stages
from sparkmv.sources.changes import APPEND, BaseChange
from sparkmv.sources.pinned import PinnedTable


@dataclass(frozen=True)
class StageKey:
    """An inner stage keyed by one column of one base table.

    Attributes:
        table: the key's base table (as ``pinned`` names it); column: its column.
        key: the stage's output name of the key (``__smv_k0``); others: the bytes of the
            stage's other base tables (read whole); tables: all its base tables.
    """

    table: str
    column: str
    key: str
    others: int
    tables: frozenset[str]


def _name(table: str) -> ObjectName:
    return ObjectName.parse(table, allow_reserved=True)


def stage_key(analysis: IvmAnalysis, pinned: dict[str, PinnedTable]) -> StageKey | None:
    """The :class:`StageKey` of an inner stage (its ``analysis``), None when it has several
    keys or its key is not a plain column of one of its base tables."""
    keyed = analysis.keyed
    if keyed is None or len(keyed.keys) != 1:
        return None
    query = parse_query(analysis.augmented_sql)
    owner = _key_column(query, keyed.keys[0])
    if owner is None:
        return None
    names = {str(t) for t in referenced_tables(query)}
    mine = [t for t in pinned if str(_name(t)) in names]
    table = next((t for t in mine if str(_name(t)) == owner[0]), None)
    if table is None:
        return None
    others = sum(pinned[t].total_bytes() for t in mine if t != table)
    return StageKey(table, owner[1], keyed.keys[0].lower(), others, frozenset(mine))


def _key_column(query: Any, key: str) -> tuple[str, str] | None:
    """(table, column) of the select item named ``key`` when it is a plain column of one
    base table of ``query``'s FROM / JOINs (qualified by it, or the only table)."""
    if not isinstance(query, exp.Select):
        return None
    item = next((e for e in query.expressions if e.alias_or_name.lower() == key.lower()), None)
    column = item.unalias() if item is not None else None
    if not isinstance(column, exp.Column):
        return None
    from_ = query.args.get("from_")
    sources = [from_.this] if from_ is not None else []
    sources += [j.this for j in query.args.get("joins") or []]
    tables = [s for s in sources if isinstance(s, exp.Table)]
    if len(tables) != len(sources) or not tables:
        return None
    if column.table:
        tables = [t for t in tables if t.alias_or_name.lower() == column.table.lower()]
    if len(tables) != 1:
        return None
    return str(table_name(tables[0])), column.name


def overlapping_bytes(load: Loader, pinned: PinnedTable, column: str, bounds: tuple[Any, ...] | None) -> int | None:
    """Bytes of ``pinned``'s files whose bounds of ``column`` overlap ``bounds`` (min, max):
    0 for ``()`` (no non-NULL value), None when unknown."""
    if bounds is None:
        return None
    if bounds == ():
        return 0
    key = ("overlap", pinned.name, pinned.snapshot_id, column.lower(), bounds)
    return cached(key, lambda: _overlapping(load, pinned, column, bounds))  # type: ignore[no-any-return]


def _overlapping(load: Loader, pinned: PinnedTable, column: str, bounds: tuple[Any, ...]) -> int | None:
    try:
        table = load(pinned)
        return None if table is None else bytes_within(table, pinned.snapshot_id, [(column, bounds)])
    except Exception:
        return None


def delta_range(change: BaseChange, column: str, load: Loader) -> tuple[Any, ...] | None:
    """(min, max) of ``column`` over an appended change's files (``()``: NULLs only), from
    the manifests; None when not an append or unknown."""
    if change.kind != APPEND or change.delta is None:
        return None
    return appended_range(change.delta, column, load)


def stage_read_bytes(
    analysis: IvmAnalysis,
    pinned: dict[str, PinnedTable],
    changed: dict[str, BaseChange],
    load: Loader,
    prober: Prober | None = None,
) -> int | None:
    """Bytes one inner stage (``analysis``) reads to recompute its touched keys over one input
    (new or old): its key table's files overlapping the key's range in the appended files,
    its other tables whole. None when that cannot be told: no :class:`StageKey`, a changed
    table of the stage other than the key's, or a change that is not an append with
    statistics (then the caller counts every table whole). 0 for a stage of one table
    whose change only retracted rows none of whose keys the table holds now (``prober``:
    the stage's delta is computed from the retracted rows alone,
    :mod:`sparkmv.refresh.incremental.stages`)."""
    key = stage_key(analysis, pinned)
    if key is None:
        return None
    if {t for t in changed if t in key.tables} != {key.table}:
        return None
    delta = changed[key.table].delta
    if prober is not None and key.tables == frozenset({key.table}) and prober.retracting(delta, key.column):
        if prober.nothing(key.table, key.column, delta, key.column):
            return 0
    size = overlapping_bytes(load, pinned[key.table], key.column, delta_range(changed[key.table], key.column, load))
    return None if size is None else size + key.others


def staged_joined_bytes(
    analysis: IvmAnalysis,
    pinned: dict[str, PinnedTable],
    changed: dict[str, BaseChange],
    load: Loader,
    kept: dict[str, int] | None = None,
    prober: Prober | None = None,
) -> Joined | None:
    """The :class:`Joined` bytes of the delta terms of a query over inner stages (its
    ``staged_sql``, the delta rules above one level of stages): the term of a changed base
    table of the query above, and of each stage whose key table changed, reads the other
    tables and stages pruned by the range of the values its reductions filter by (module
    docstring); None when a stage has no :class:`StageKey` or stages of its own (the caller
    counts the tables whole). A stage read from its ``kept`` state (stage name -> bytes,
    :mod:`sparkmv.refresh.incremental.stage_state`) costs that state. A read that a probe
    finds joins nothing (``prober``, :mod:`sparkmv.refresh.incremental.probe`) costs
    nothing."""
    if not analysis.stages or not analysis.staged_sql or analysis.keyed is not None:
        return None
    keys: dict[str, StageKey] = {}
    for stage in analysis.stages:
        key = stage_key(stage.analysis, pinned)
        if key is None or stage.analysis.stages:
            return None
        keys[stage.name.lower()] = key
    query = parse_query(analysis.staged_sql)
    refs = {t.name.lower(): table_name(t) for t in query.find_all(exp.Table) if t.name.lower() in keys}
    types = column_types(pinned)
    columns: dict[ObjectName, dict[str, Any]] = {n: c for n, c in types.items() if n in set(referenced_tables(query))}
    for ref, name in refs.items():
        columns[name] = {keys[ref].key: types[_name(keys[ref].table)].get(keys[ref].column.lower())}
    by_name = {_name(t): t for t in pinned}
    stage_of = {name: keys[ref] for ref, name in refs.items()}
    state_of = {name: kept[ref] for ref, name in refs.items() if kept and ref in kept}
    total = whole = 0
    pruned_on: set[str] = set()
    for source, bounds_of in _terms(columns, changed, refs, keys, load):
        found = reductions(query, source, columns)
        for other in sorted(columns, key=str):
            if other == source:
                continue
            key = stage_of.get(other)
            if other in state_of:
                total, whole = total + state_of[other], whole + state_of[other]
                continue
            full = key.others + pinned[key.table].total_bytes() if key else pinned[by_name[other]].total_bytes()
            if prober is not None and _probed_empty(prober, found, source, other, stage_of, by_name, changed):
                whole += full
                continue
            table = pinned[key.table if key else by_name[other]]
            best, on = _pruned_read(found, other, key, table, load, bounds_of, full)
            pruned_on.update(on)
            total += full if best is None else best
            whole += full
    return Joined(total, whole, tuple(sorted(pruned_on)))


def _pruned_read(
    found: list[Reduction],
    other: ObjectName,
    key: StageKey | None,
    table: PinnedTable,
    load: Loader,
    bounds_of: Callable[[str], Any],
    full: int,
) -> tuple[int | None, set[str]]:
    """The fewest bytes a term reads of ``other`` (a base table, or a stage keyed by ``key``
    over ``table``; ``full`` bytes unpruned) pruned by one of the reductions ``found`` (the
    range of values ``bounds_of`` its source column gives), and the source columns that
    pruned it below ``full``; None when no reduction prunes by file statistics."""
    best: int | None = None
    on: set[str] = set()
    for r in (r for r in found if r.target == other):
        if key is not None:
            size = overlapping_bytes(load, table, key.column, bounds_of(r.source)) if r.column == key.key else None
            size = None if size is None else size + key.others
        else:
            size = overlapping_bytes(load, table, r.column, bounds_of(r.source))
        if size is not None and (best is None or size < best):
            best = size
            if size < full:
                on.add(r.source)
    return best, on


def _probed_empty(
    prober: Prober,
    found: list[Any],
    source: ObjectName,
    other: ObjectName,
    stage_of: dict[ObjectName, StageKey],
    by_name: dict[ObjectName, str],
    changed: dict[str, BaseChange],
) -> bool:
    """True when the term of ``source`` reads nothing of ``other`` by a probe: a stage of one
    table read new (stages sort first) whose key table holds none of the change's keys; a
    base table read old whose change only retracted, holding none of a stage delta's keys;
    or a base table holding none of another base table's change's keys (read old: only if
    its own change retracted only) (:mod:`sparkmv.refresh.incremental.probe`)."""
    single = {n: k for n, k in stage_of.items() if k.tables == frozenset({k.table})}
    for r in (r for r in found if r.target == other):
        if other in single and source in by_name and r.column == single[other].key:
            key = single[other]
            if prober.nothing(key.table, key.column, changed[by_name[source]].delta, r.source):
                return True
        elif source in single and other in by_name and r.source == single[source].key:
            key, table = single[source], by_name[other]
            own = changed.get(table)
            retracting = own is None or prober.retracting(own.delta, r.column)
            if retracting and prober.nothing(table, r.column, changed[key.table].delta, key.column):
                return True
        elif source in by_name and other in by_name:  # two base tables, as the terms order them
            table, mine = by_name[other], by_name[source]
            own = changed.get(table) if table > mine else None  # read old: its retracted rows
            retracting = own is None or prober.retracting(own.delta, r.column)
            if retracting and prober.nothing(table, r.column, changed[mine].delta, r.source):
                return True
    return False


def _terms(
    columns: dict[ObjectName, dict[str, Any]],
    changed: dict[str, BaseChange],
    refs: dict[str, ObjectName],
    keys: dict[str, StageKey],
    load: Loader,
) -> list[tuple[ObjectName, Any]]:
    """(the table or stage read as its delta, column -> the range of its values in that
    delta) per delta term of the query above the stages."""
    terms: list[tuple[ObjectName, Any]] = []
    for table, change in sorted(changed.items()):
        name = _name(table)
        if name in columns:
            terms.append((name, lambda column, c=change: delta_range(c, column, load)))
    for ref, name in refs.items():
        key = keys[ref]
        touched = {t for t in changed if t in key.tables}
        if touched == {key.table}:  # the stage's touched keys: the key column's appended values
            mine = changed[key.table]
            terms.append(
                (name, lambda column, c=mine, k=key: delta_range(c, k.column, load) if column == k.key else None)
            )
        elif touched:
            terms.append((name, lambda column: None))
    return terms


def kept_states(location: str, analysis: IvmAnalysis, changes: dict[str, BaseChange]) -> dict[str, int]:
    """Stage name -> bytes of its kept state at the consumed positions, for each inner stage
    (nested ones too) maintained from its state (:mod:`sparkmv.refresh.incremental.stage_state`)
    of the MV whose table is at ``location``."""
    if not analysis.stages:
        return {}
    store = StateStore.of(location)
    old = {t: c.old for t, c in changes.items()}
    sizes = {stage.name: store.size(stage, state, old) for stage, state in kept_stages(analysis.stages)}
    return {name: size for name, size in sizes.items() if size is not None}


def table_names(sql: str) -> set[str]:
    return {str(t) for t in referenced_tables(parse_query(sql))}


def stage_bytes(
    pinned: dict[str, PinnedTable],
    stages: tuple[Stage, ...],
    changed: dict[str, BaseChange] | None = None,
    load: Loader | None = None,
    kept: dict[str, int] | None = None,
    prober: Prober | None = None,
) -> int:
    """Bytes the inner stages' virtual inputs cost about as much as reading: each stage
    (nested ones too) reads the base tables of its query twice, over the new and the old
    input (its frames and its touched keys' rows on both sides,
    :mod:`sparkmv.refresh.incremental.stages`); a stage whose touched keys' range prunes the
    files of its key's table (:func:`~sparkmv.refresh.incremental.stage_cost.stage_read_bytes`,
    new keys above the old ones) only those; a stage kept as state (``kept``: stage name ->
    bytes, :func:`kept_states`) reads and writes its state instead."""
    total = 0
    for stage in stages:
        if kept and stage.name in kept:  # its state read and written; its other tables read by its terms
            tables = table_names(stage.analysis.augmented_sql)
            others = [p for t, p in pinned.items() if str(ObjectName.parse(t, allow_reserved=True)) in tables]
            total += 2 * kept[stage.name] + (sum(p.total_bytes() for p in others) if len(others) > 1 else 0)
            continue
        pruned = stage_read_bytes(stage.analysis, pinned, changed, load, prober) if changed and load else None
        if pruned is None:
            # Over its own inner stages, a stage reads the tables of the query above them
            # (each inner stage is counted on its own, kept as state or recomputed).
            tables = table_names(stage.analysis.staged_sql or stage.analysis.augmented_sql)
            pruned = sum(
                p.total_bytes() for t, p in pinned.items() if str(ObjectName.parse(t, allow_reserved=True)) in tables
            )
        total += 2 * pruned + stage_bytes(pinned, stage.analysis.stages, changed, load, kept, prober)
    return total
