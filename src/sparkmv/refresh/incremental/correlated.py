"""The delta of an MV maintained through a correlation key (:mod:`sparkmv.analysis.correlated`),
with Spark.

The touched keys ``T`` are the values of the bound columns in the changed rows: of a signed
change (deletes, updates) from the change cache without Spark, of appended files by one
small job. Each bound reference is then read filtered to ``T``, once per table and role
(cached, as TPC-H Q21 reads ``lineitem`` three times): new at the run's position; old as
the new side's files but the appended ones for an Iceberg append (the consumed snapshot's own
files are not listed, so they could not be pruned; the new side is then that old side and
the appended files, so each file is read once), as its new rows plus its retracted ones
for a change that only retracted rows (``old = new ⊎ retracted``), else at the consumed
snapshot (time travel); and
when a probe (:mod:`sparkmv.refresh.incremental.probe`) finds none of the keys left in a
table that only lost rows, its new rows are none. Integer keys also prune the data files
by their bounds before Spark opens them (:func:`~sparkmv.refresh.incremental.pruned.files_within`):
TPC-H RF1's new orders have keys above every old file's range. References bound to no key
read their table whole (it did not change: :meth:`~sparkmv.analysis.correlated.CorrelatedPlan.problem`).

The delta is the augmented query over the new side, and over the old side with its additive
columns negated (row count, COUNT, SUM and the state behind AVG and formulas): partial
aggregate rows that :func:`~sparkmv.refresh.incremental.merge_rows.combine` merges into the
MV as it merges the delta rules' terms.
"""

from __future__ import annotations

import functools
import itertools
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import replace
from typing import Any

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from sparkmv.analysis.correlated import CorrelatedPlan, used_columns
from sparkmv.analysis.formulas import blank_formulas
from sparkmv.analysis.incremental import ROW_COUNT, IvmAnalysis
from sparkmv.analysis.query import bind_occurrences, parse_query
from sparkmv.analysis.semijoin import INTEGER_TYPES
from sparkmv.refresh.incremental import probe
from sparkmv.refresh.incremental.correlated_keys import TouchedKeys, appended_files, column_kind, emptied
from sparkmv.refresh.incremental.delta import SIGNED_KINDS, Terms, Views
from sparkmv.refresh.incremental.literals import quote_name
from sparkmv.refresh.incremental.pruned import files_within, iceberg_table
from sparkmv.refresh.incremental.reduced_state import ReducedStore, key_filtered, reduced_sides
from sparkmv.refresh.runtime import Runtime
from sparkmv.sources.pinned import PinnedTable
from sparkmv.sources.resolve import read_pinned
from sparkmv.sources.signed import SIGN_COLUMN
from sparkmv.storage.schema import schema_from_json

_KEY = "__smv_correlation_key"
_names = itertools.count()


def touched_keys(rt: Runtime, plan: CorrelatedPlan, delta: dict[str, PinnedTable]) -> TouchedKeys:
    """The key values of every changed row of a table bound to the key (signs ignored: a
    retracted row touches its key as an inserted one does)."""
    values: set[Any] = set()
    null = False
    for table, change in sorted(delta.items()):
        for column in sorted(plan.bound_columns(table.lower())):
            cached = probe.delta_keys(rt.iceberg.warehouse, change, column) if change.kind == "signed" else None
            if cached is not None:
                values.update(cached.values)
                null = null or cached.nulls
                continue
            frame = read_pinned(rt.spark, change, store=rt.iceberg)
            name = next(f.name for f in frame.schema.fields if f.name.lower() == column)
            for row in frame.select(F.col(quote_name(name)).alias(_KEY)).distinct().collect():
                if row[0] is None:
                    null = True
                else:
                    values.add(row[0])
    return TouchedKeys(tuple(sorted(values)), null)


@contextmanager
def correlated_terms(
    rt: Runtime,
    analysis: IvmAnalysis,
    new: dict[str, PinnedTable],
    old: dict[str, PinnedTable],
    delta: dict[str, PinnedTable],
    views: Views | None = None,
    reduced: tuple[ReducedStore, Mapping[str, int | None]] | None = None,
) -> Iterator[Terms]:
    """The delta of ``analysis``'s augmented query as partial aggregate rows (module
    docstring), as :class:`~sparkmv.refresh.incremental.delta.Terms` (``union`` None when no
    key was touched). Arguments as :func:`~sparkmv.refresh.incremental.delta.delta_terms`;
    ``reduced``: the MV's reduced state (:mod:`sparkmv.refresh.incremental.reduced_state`)
    and the snapshot ids the MV consumed: its kept tables are read from it when it holds
    them.

    Raises:
        AssertionError: when a changed table has a reference bound to no key (the plan
            checks it before choosing the technique).
    """
    plan = analysis.correlated
    assert plan is not None and plan.problem(set(delta)) is None
    owned = views is None
    views = views or Views(rt)
    full = parse_query(analysis.augmented_sql)
    formulas = {i: c.name for i, c in enumerate(analysis.columns) if c.role == "formula"}
    query = blank_formulas(full, formulas) if formulas else full
    try:
        keys = touched_keys(rt, plan, delta)
        # Before any return: a run from the reduced state writes its new state.
        used = used_columns(full)
        kept = None
        if reduced is not None:
            kept = reduced_sides(rt, reduced[0], plan, (new, old, delta), keys.values, used, reduced[1])
        if kept is not None:
            keys = TouchedKeys(kept.values, False)  # a NULL key joins no reducer row
        side = _Side(rt, views, plan, new, old, delta, keys, used, kept.tables if kept else None)
        if kept is None and (keys.values or keys.null):
            keys = side.reduced()
        if not keys.values and not keys.null:
            yield Terms(None, True, lambda: views.over_new(full, new))
            return
        if keys != side.keys:
            side = _Side(rt, views, plan, new, old, delta, keys, used)
        fresh = rt.spark.sql(bind_occurrences(query, side.bind("new")))
        gone = _negated(rt.spark.sql(bind_occurrences(query, side.bind("old"))), analysis)
        yield Terms(fresh.unionByName(gone), True, lambda: views.over_new(full, new))
    finally:
        if owned:
            views.drop()


def _negated(frame: DataFrame, analysis: IvmAnalysis) -> DataFrame:
    """``frame``'s partial aggregate rows with their additive columns negated."""
    additive = {ROW_COUNT, *analysis.state_columns, *(c.name for c in analysis.columns if c.role in ("sum", "count"))}
    wanted = {a.lower() for a in additive}
    out = [
        (-F.col(quote_name(name))).alias(name) if name.lower() in wanted else F.col(quote_name(name))
        for name in frame.columns
    ]
    return frame.select(*out)


class _Side:
    """The temporary views of the bound references filtered to the touched keys, per table,
    role and column, each cached for the run."""

    def __init__(
        self,
        rt: Runtime,
        views: Views,
        plan: CorrelatedPlan,
        new: dict[str, PinnedTable],
        old: dict[str, PinnedTable],
        delta: dict[str, PinnedTable],
        keys: TouchedKeys,
        used: set[str] | None,
        kept: dict[str, tuple[DataFrame, DataFrame]] | None = None,
    ) -> None:
        self.rt, self.views, self.plan, self.keys = rt, views, plan, keys
        self.new, self.old, self.delta = new, old, delta
        self.by_lower = {t.lower(): t for t in new}
        self.used = used
        self.kept = kept or {}

    def reduced(self) -> TouchedKeys:
        """The touched keys that some row of an unchanged bound reference with a filter
        (:attr:`~sparkmv.analysis.correlated.CorrelatedPlan.filters`) holds, its rows
        passing the filter: the others touch no row of the relation, old or new (a
        semi-join reduction, as a Bloom filter of the selective side prunes a join's
        probe side). A reference is read for it only when its table's files within the
        keys' range are at most the other bound tables' (a reduction costs one filtered
        scan of it; it pays when it spares a bigger one)."""
        keys = self.keys
        for table, column, condition in zip(self.plan.tables, self.plan.bound, self.plan.filters, strict=False):
            name = self.by_lower[table]
            if column is None or condition is None or name in self.delta or not self._cheaper(name, column):
                continue
            frame = self._where(self._read(self._pruned(self.new[name], column)), name, column)
            actual = next(f.name for f in frame.schema.fields if f.name.lower() == column)
            rows = frame.where(F.expr(condition)).select(F.col(quote_name(actual))).distinct().collect()
            found = {row[0] for row in rows}
            keys = TouchedKeys(tuple(v for v in keys.values if v in found), keys.null and None in found)
        return keys

    def _cheaper(self, table: str, column: str) -> bool:
        """Whether ``table``'s files within the keys' range are at most the other bound
        tables' (bytes)."""
        own = self._pruned(self.new[table], column).total_bytes()
        others = 0
        for other, bound in zip(self.plan.tables, self.plan.bound, strict=True):
            name = self.by_lower[other]
            if bound is not None and name != table:
                others += self._pruned(self.new[name], bound).total_bytes()
        return own <= others

    def _read(self, pinned: PinnedTable) -> DataFrame:
        """``pinned``'s rows with only the columns the query reads (all of them when it
        selects ``*``): a filtered read decodes no other column, and keeps none cached."""
        return self._kept(read_pinned(self.rt.spark, pinned, store=self.rt.iceberg))

    def _kept(self, frame: DataFrame) -> DataFrame:
        """``frame`` with only the columns the query reads (and the sign column)."""
        if self.used is None:
            return frame
        wanted = [c for c in frame.columns if c.lower() in self.used or c == SIGN_COLUMN]
        return frame.select(*(F.col(quote_name(c)) for c in wanted)) if wanted else frame

    def bind(self, role: str) -> list[str | None]:
        """The view of each table reference of the query for ``role`` (new, old)."""
        out: list[str | None] = []
        for table, column in zip(self.plan.tables, self.plan.bound, strict=True):
            name = self.by_lower[table]
            if column is None:
                out.append(self.views.view(name, "new", self.new[name]))
            else:
                out.append(self._filtered(name, role if name in self.delta else "new", column))
        return out

    def _filtered(self, table: str, role: str, column: str) -> str:
        key = (table, f"{role} touched keys of {column}")
        if key not in self.views.created:
            frame = self._frame(table, role, column)
            self.views.persist(frame)
            self.views.created[key] = name = f"__smv_c{next(_names)}"
            frame.createOrReplaceTempView(name)
        return self.views.created[key]

    def _frame(self, table: str, role: str, column: str) -> DataFrame:
        """``table``'s rows holding a touched key in ``column``, at its ``role`` position."""
        if table in self.kept:  # from the reduced state: already the touched keys' rows
            before, after = self.kept[table]
            return self._kept(before if role == "old" else after)
        change = self.delta.get(table)
        if role == "old" and change is not None and change.kind in SIGNED_KINDS and self._retracts_only(table, column):
            new = self.rt.spark.table(self._filtered(table, "new", column))
            retracted = self._read(change)
            gone = retracted.where(F.col(SIGN_COLUMN) < 0).drop(SIGN_COLUMN)
            return new.unionByName(self._where(gone, table, column))
        if role == "new" and change is not None and emptied(self.rt, self.new[table], column, change, self.keys):
            schema = schema_from_json(self.new[table].schema_json)
            return self._kept(self.rt.spark.createDataFrame([], schema))
        appended = change is not None and appended_files(self.new[table], change)
        if role == "new" and appended:
            # The new rows are the old ones and the appended ones: the files are read once.
            assert change is not None
            old = self.rt.spark.table(self._filtered(table, "old", column))
            rows = self._read(change).select(*(F.col(quote_name(c)) for c in old.columns))
            return old.unionByName(self._where(rows, table, column))
        if role == "old" and appended:
            # The consumed snapshot is the new one without the appended files (their deletes
            # too: an append adds none), so its files need no listing of the old snapshot.
            assert change is not None
            added = {f for p in change.partitions.values() for f in p.files}
            pinned = self._pruned(self.new[table], column)
            parts = {k: replace(p, files=[f for f in p.files if f not in added]) for k, p in pinned.partitions.items()}
            pinned = replace(pinned, partitions={k: p for k, p in parts.items() if p.files})
        else:
            pinned = self._pruned(self.new[table] if role == "new" else self.old[table], column)
        return self._where(self._read(pinned), table, column)

    def _pruned(self, pinned: PinnedTable, column: str) -> PinnedTable:
        """``pinned`` with only the files whose bounds of an integer ``column`` overlap the
        touched keys' range (unchanged for other types, or with a NULL key)."""
        span = self.keys.span()
        if column_kind(pinned, column) not in INTEGER_TYPES or span is None or self.keys.null:
            return pinned
        return files_within(functools.partial(iceberg_table, self.rt), pinned, [(column, span)])

    def _where(self, frame: DataFrame, table: str, column: str) -> DataFrame:
        """``frame`` filtered to the rows whose ``column`` holds a touched key (NULL-safe)."""
        kind = column_kind(self.new[table], column)
        return key_filtered(self.rt, frame, column, kind, list(self.keys.values), self.keys.null)

    def _retracts_only(self, table: str, column: str) -> bool:
        return probe.retracts_only(self.rt, self.delta.get(table), column)
