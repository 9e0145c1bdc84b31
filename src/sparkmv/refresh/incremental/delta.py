"""The delta of an MV (its delta terms), with Spark.

For base tables ``T1..Tn`` (sorted by name) of which some changed (appended files, or signed
rows: retractions carry -1 through every term, :mod:`sparkmv.analysis.signed`), the delta of
the join of their contents is the union, over each changed ``Ti``, of the query with
``T1..Ti-1`` read at their new position, ``Ti`` read as its delta, and ``Ti+1..Tn`` at their
old (consumed) position; of a ``UNION ALL``, only the branches that read ``Ti`` take part.
For two tables: ``Δ(A ⋈ B) = ΔA ⋈ B_old ∪ A_new ⋈ ΔB``, the standard delta rule of
incremental view maintenance (also written ``ΔA ⋈ B_new ∪ A_old ⋈ ΔB``, the roles of old
and new swapped, equally exact). Filters and projections distribute over the union.

For an aggregate MV each term is the *augmented* query (the MV's query with its hidden
state columns, :mod:`sparkmv.analysis.incremental`), so every term yields partial aggregate
rows, which :mod:`sparkmv.refresh.incremental.merge_rows` combines with the MV's current
rows of the affected groups.
"""

from __future__ import annotations

import functools
import itertools
import logging
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import (
    StructType,
)
from sqlglot import exp

from sparkmv.analysis.formulas import blank_formulas
from sparkmv.analysis.incremental import IvmAnalysis, occurrence_terms
from sparkmv.analysis.query import bind_occurrences, bind_tables, parse_query, table_occurrences
from sparkmv.analysis.signed import signed_query, unsigned_projection
from sparkmv.names import ObjectName
from sparkmv.refresh.incremental import probe
from sparkmv.refresh.incremental.pruned import column_types as pinned_column_types
from sparkmv.refresh.incremental.pruned import files_within, iceberg_table, known_range, prunes
from sparkmv.refresh.incremental.semijoin import Reducer, column_types
from sparkmv.refresh.runtime import Runtime
from sparkmv.sources.pinned import PinnedTable
from sparkmv.sources.resolve import read_pinned
from sparkmv.sources.signed import SIGN_COLUMN
from sparkmv.storage.schema import schema_from_json

if TYPE_CHECKING:
    from sparkmv.refresh.incremental.stage_cost import StageKey

log = logging.getLogger("sparkmv.refresh")
_views = itertools.count()
SIGNED_KINDS = ("changelog", "signed")
"""Kinds of a delta PinnedTable whose rows carry a sign (a refreshable table's changelog, an
Iceberg table's signed change)."""


def _q(name: str) -> str:
    return f"`{name}`"


@dataclass
class Terms:
    """The delta of one run as Spark sees it.

    Attributes:
        union: the union of the delta terms (None when no base table changed): the
            augmented query's columns, plus :data:`~sparkmv.analysis.signed.SIGN` for a
            projection with a signed term and :data:`~sparkmv.analysis.signed.RETRACTED`
            for an aggregate with one.
        signed: True when a term read a changelog (rows may be retracted).
        over_new: the augmented query over the new input of every base table.
    """

    union: DataFrame | None
    signed: bool
    over_new: Callable[[], DataFrame]


@contextmanager
def delta_terms(
    rt: Runtime,
    analysis: IvmAnalysis,
    new: dict[str, PinnedTable],
    old: dict[str, PinnedTable],
    delta: dict[str, PinnedTable],
    views: Views | None = None,
) -> Iterator[Terms]:
    """The delta terms of the MV's augmented query.

    Args:
        new: qualified base table -> the run's pinned input (every base table).
        old: qualified base table -> the consumed position (every base table).
        delta: qualified base table -> what changed since ``old`` (changed base tables
            only): appended files, or signed rows (kind ``changelog``: a refreshable table's
            changelog; ``signed``: an Iceberg table's change with retractions).

    The temporary views the terms read are dropped when the context exits (unless ``views``,
    the run's views holding the inner stages' virtual inputs, is given: its owner drops
    them), so use the DataFrames inside it.
    """
    order = sorted(new)
    owned = views is None
    views = views or Views(rt)
    signed = any(d.kind in SIGNED_KINDS for d in delta.values())
    full = parse_query(analysis.augmented_sql)
    formulas = {i: c.name for i, c in enumerate(analysis.columns) if c.role == "formula"}
    query = blank_formulas(full, formulas) if formulas else full

    def over_new() -> DataFrame:
        return views.over_new(full, new)

    try:
        frames: list[DataFrame] = []
        for i, changed in enumerate(order):
            name = ObjectName.parse(changed, allow_reserved=True)
            for term, occurrence in occurrence_terms(query, name) if changed in delta else []:
                if delta[changed].kind in SIGNED_KINDS:
                    term = signed_query(term, name, analysis.aggregate, occurrence)
                elif signed and not analysis.aggregate:
                    term = unsigned_projection(term)
                frames.append(views.term(term, i, new, old, delta, occurrence))
        union = None
        for frame in frames:
            union = frame if union is None else union.unionByName(frame, allowMissingColumns=True)
        yield Terms(union, signed, over_new)
    finally:
        if owned:
            views.drop()


class Views:
    """The temporary views of one run's delta terms: each base table read at its new
    position, its old (consumed) position, or as its delta, created once each and dropped
    together (:meth:`drop`). An inner stage's virtual input (:mod:`sparkmv.refresh.incremental.stages`)
    is a DataFrame per role (:attr:`frames`) instead of a pinned base table."""

    def __init__(self, rt: Runtime) -> None:
        self.rt = rt
        self.created: dict[tuple[str, str], str] = {}
        self.reducer = Reducer()
        self.reduced: list[str] = []
        """What the semi-join reductions of the terms filtered (for the run's log)."""
        self.frames: dict[tuple[str, str], DataFrame] = {}
        self.stage_keys: dict[str, StageKey] = {}
        """The inner stages keyed by a plain column of their one base table, by name."""
        self.persisted: list[DataFrame] = []
        """Frames cached for the run (an inner stage's signed delta, read by several terms
        and by their reductions), unpersisted by :meth:`drop`."""

    def persist(self, frame: DataFrame) -> DataFrame:
        """``frame`` cached for the run (computed once, at its first use)."""
        self.persisted.append(frame.persist())
        return frame

    def view(self, table: str, role: str, pinned: PinnedTable) -> str:
        """The name of the temporary view of ``table`` in ``role`` (new, old, delta)."""
        if (table, role) not in self.created:
            self.created[(table, role)] = name = f"__smv_d{next(_views)}"
            frame = self.frames.get((table, role))
            if frame is None:
                frame = read_pinned(self.rt.spark, pinned, store=self.rt.iceberg)
            frame.createOrReplaceTempView(name)
        return self.created[(table, role)]

    def over_new(self, query: exp.Query, new: dict[str, PinnedTable]) -> DataFrame:
        """``query`` over the new input of every base table."""
        return self.over(query, "new", new)

    def over(self, query: exp.Query, role: str, tables: dict[str, PinnedTable]) -> DataFrame:
        """``query`` over every base table (and virtual input) read in ``role`` (new, old)."""
        views = {ObjectName.parse(t, allow_reserved=True): self.view(t, role, tables[t]) for t in sorted(tables)}
        return self.rt.spark.sql(bind_tables(query, views))

    def term(
        self,
        query: exp.Query,
        i: int,
        new: dict[str, PinnedTable],
        old: dict[str, PinnedTable],
        delta: dict[str, PinnedTable],
        occurrence: int | None = None,
    ) -> DataFrame:
        """The ``i``-th delta term of ``query`` (base tables sorted by name): the tables
        before the ``i``-th read new, the ``i``-th as its delta, those after it old; of
        the ``i``-th read more than once, only its ``occurrence``-th reference is its delta,
        the ones before it new and those after it old
        (:func:`~sparkmv.analysis.incremental.occurrence_terms`)."""
        roles: dict[str, tuple[str, PinnedTable]] = {}
        for j, table in enumerate(sorted(new)):
            role, source = ("new", new[table]) if j < i else ("delta", delta[table]) if j == i else ("old", old[table])
            roles[table] = (role, source)
        changed = sorted(new)[i]
        # Probed first: a table found joining nothing (or only its retracted rows) is never
        # read, not even set up (a merge-on-read table's scan learns its files' spellings
        # with a Spark job as it is set up).
        probed = self._probed_views(query, changed, new, delta, roles) if occurrence is None else {}
        views = {
            ObjectName.parse(t, allow_reserved=True): probed[t] if t in probed else self.view(t, role, source)
            for t, (role, source) in roles.items()
        }
        self._reduce(query, changed, roles, probed, views, delta[changed])
        if occurrence is None:
            return self.rt.spark.sql(bind_tables(query, views))
        own = ObjectName.parse(changed, allow_reserved=True)
        ranks = itertools.count()
        bound: list[str | None] = []
        for name in table_occurrences(query):
            if name != own:
                bound.append(views[name])
                continue
            rank = next(ranks)
            role, source = ("new", new[changed]) if rank < occurrence else ("old", old[changed])
            bound.append(views[name] if rank == occurrence else self.view(changed, role, source))
        return self.rt.spark.sql(bind_occurrences(query, bound))

    def _reduce(
        self,
        query: exp.Query,
        changed: str,
        roles: dict[str, tuple[str, PinnedTable]],
        probed: dict[str, str],
        views: dict[ObjectName, str],
        change: PinnedTable,
    ) -> None:
        """Bind, in ``views``, each input of the term of ``changed`` that a semi-join
        reduction by ``change``'s values filters (:mod:`sparkmv.refresh.incremental.semijoin`)
        to its filtered view; the ``probed`` inputs are left as their probes bound them."""
        frames = {t: self.rt.spark.table(views[ObjectName.parse(t, allow_reserved=True)]) for t in roles}
        rows = [p.rows for p in change.partitions.values()]
        known = None if any(r is None for r in rows) else sum(r or 0 for r in rows)
        sizes = {  # bytes of each base table as pinned (0 when probed: not even weighed); None for an inner stage
            t: None if (t, role) in self.frames else 0 if t in probed else src.total_bytes()
            for t, (role, src) in roles.items()
        }
        pinned = {t: src for t, (_, src) in roles.items() if sizes.get(t) is not None}
        load = functools.partial(iceberg_table, self.rt)
        skips = functools.partial(prunes, load, pinned, change)
        # An inner stage's delta is a frame of its own: its values are collected.
        ranges = None if (changed, "delta") in self.frames else functools.partial(known_range, load, change)
        conditions = self.reducer.conditions(query, changed, frames, known, sizes, skips, ranges)
        for table, reduced in conditions.items():
            if table in probed:  # already read as nothing, or as its retracted rows only
                continue
            role, source = roles[table]
            if sizes.get(table) is not None:  # a base table (not an inner stage): read only the files that may match
                source = files_within(load, source, reduced.bounds)
            views[ObjectName.parse(table, allow_reserved=True)] = self.filtered(
                table, role, source, f"{reduced.text} of '{changed}'", reduced.cond
            )
            self.reduced.append(f"term of '{changed}': '{table}' {reduced.text}")
            log.info("semi-join reduction: %s", self.reduced[-1])

    def _probed_views(
        self,
        query: exp.Query,
        changed: str,
        new: dict[str, PinnedTable],
        delta: dict[str, PinnedTable],
        roles: dict[str, tuple[str, PinnedTable]],
    ) -> dict[str, str]:
        """Base table (or inner stage keyed by its one table's column) -> the view it is
        bound to in the term of ``changed``, for each one a probe found joining none of the
        change's keys at its new position (:mod:`sparkmv.refresh.incremental.probe`): an
        empty view, or the rows its own change retracted (read old); ``roles``: each input's
        role and pinned source in the term."""
        columns = pinned_column_types({t: src for t, (role, src) in roles.items() if (t, role) not in self.frames})
        for t, (role, _) in roles.items():
            if (t, role) in self.frames:  # an inner stage's virtual input
                columns[ObjectName.parse(t, allow_reserved=True)] = column_types(self.frames[(t, role)])
        found_all = probe.emptied(
            self.rt, query, changed, new, dict(delta), run=True, stages=self.stage_keys, columns=columns
        )
        out: dict[str, str] = {}
        for table, found in found_all.items():
            if found.retracted:
                out[table] = self.retracted(table, delta[table])
                text = f"only its retracted rows join ({found.column} probed for the keys of {found.source})"
            else:
                out[table] = self.empty(table, found.role, new[table])
                text = f"no row joins ({found.column} probed for the keys of {found.source})"
            self.reduced.append(f"term of '{changed}': '{table}' {text}")
            log.info("probe: %s", self.reduced[-1])
        return out

    def empty(self, table: str, role: str, pinned: PinnedTable) -> str:
        """The name of an empty temporary view with the columns of ``table`` (in ``role``),
        set up without reading it."""
        key = (table, f"{role} probed empty")
        if key not in self.created:
            self.created[key] = name = f"__smv_d{next(_views)}"
            frame = self.frames.get((table, role))  # an inner stage's virtual input
            if frame is None:
                frame = self.rt.spark.createDataFrame([], schema_from_json(pinned.schema_json))
            frame.where(F.lit(False)).createOrReplaceTempView(name)
        return self.created[key]

    def retracted(self, table: str, change: PinnedTable) -> str:
        """The name of a temporary view of the rows the signed ``change`` of ``table``
        retracted, without their sign (the table's old rows that its new position lacks)."""
        key = (table, "retracted")
        if key not in self.created:
            self.created[key] = name = f"__smv_d{next(_views)}"
            rows = read_pinned(self.rt.spark, change, store=self.rt.iceberg)
            rows.where(F.col(SIGN_COLUMN) < 0).drop(SIGN_COLUMN).createOrReplaceTempView(name)
        return self.created[key]

    def filtered(self, table: str, role: str, pinned: PinnedTable, text: str, cond: Column) -> str:
        """The name of a temporary view of ``table`` in ``role`` filtered by ``cond``
        (a semi-join reduction, :mod:`sparkmv.refresh.incremental.semijoin`; ``text``
        names it)."""
        key = (table, f"{role} {text}")
        if key not in self.created:
            self.created[key] = name = f"__smv_d{next(_views)}"
            frame = self.frames.get((table, role))  # an inner stage's virtual input
            if frame is None:
                frame = read_pinned(self.rt.spark, pinned, store=self.rt.iceberg)
            frame.where(cond).createOrReplaceTempView(name)
        return self.created[key]

    def drop(self) -> None:
        """Drop every view created and unpersist the cached frames."""
        for name in self.created.values():
            self.rt.spark.catalog.dropTempView(name)
        for frame in self.persisted:
            frame.unpersist()


def project_to(df: DataFrame, target: StructType, keep: tuple[str, ...] = ()) -> DataFrame:
    """``df``'s columns matched to ``target``'s by name (case-insensitive), cast to its
    types, followed by the columns of ``keep`` that ``df`` has."""
    by_name = {f.name.lower(): f.name for f in df.schema.fields}
    extra = [F.col(_q(by_name[k.lower()])) for k in keep if k.lower() in by_name]
    columns = [F.col(_q(by_name[f.name.lower()])).cast(f.dataType).alias(f.name) for f in target.fields]
    return df.select(*columns, *extra)
