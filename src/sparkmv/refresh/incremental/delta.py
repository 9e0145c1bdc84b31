"""The delta of an MV and its merge into the MV, with Spark.

For base tables ``T1..Tn`` (sorted by name) of which some changed (appended files, or signed
rows: retractions carry -1 through every term, :mod:`sparkmv.analysis.signed`), the delta of
the join of their contents is the union, over each changed ``Ti``, of the query with
``T1..Ti-1`` read at their new position, ``Ti`` read as its delta, and ``Ti+1..Tn`` at their
old (consumed) position; of a ``UNION ALL``, only the branches that read ``Ti`` take part.
For two tables: ``Δ(A ⋈ B) = ΔA ⋈ B_old ∪ A_new ⋈ ΔB``, the standard delta rule of
incremental view maintenance (the issue's ``ΔA ⋈ B_new ∪ A_old ⋈ ΔB`` with the roles of old
and new swapped, equally exact). Filters and projections distribute over the union.

For an aggregate MV each term is the *augmented* query (the MV's query with its hidden
state columns, :mod:`sparkmv.analysis.incremental`), so every term yields partial aggregate
rows; the partial rows and the MV's current rows of the affected groups are combined per
group key: SUM/COUNT/row count add up, MIN/MAX take the least/greatest, AVG is recomputed
from its stored sum and count, and a SUM over only NULLs stays NULL (its non-NULL count is
0). Groups whose row count falls to 0 disappear.
"""

from __future__ import annotations

import functools
import itertools
import logging
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    DecimalType,
    MapType,
    StructType,
    TimestampNTZType,
    TimestampType,
)
from sqlglot import exp

from sparkmv.analysis.formulas import blank_formulas
from sparkmv.analysis.incremental import ROW_COUNT, IvmAnalysis, OutputColumn, occurrence_terms
from sparkmv.analysis.query import bind_occurrences, bind_tables, parse_query, table_occurrences
from sparkmv.analysis.signed import RETRACTED, SIGN, signed_query, unsigned_projection
from sparkmv.names import ObjectName
from sparkmv.refresh.incremental import probe
from sparkmv.refresh.incremental.pruned import files_within, iceberg_table, known_range, prunes
from sparkmv.refresh.incremental.semijoin import Reducer, column_types
from sparkmv.refresh.runtime import Runtime
from sparkmv.sources.pinned import PinnedTable
from sparkmv.sources.resolve import read_pinned
from sparkmv.sources.signed import SIGN_COLUMN

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
        views: dict[ObjectName, str] = {}
        roles: dict[str, tuple[str, PinnedTable]] = {}
        for j, table in enumerate(sorted(new)):
            role, source = ("new", new[table]) if j < i else ("delta", delta[table]) if j == i else ("old", old[table])
            roles[table] = (role, source)
            views[ObjectName.parse(table, allow_reserved=True)] = self.view(table, role, source)
        changed = sorted(new)[i]
        frames = {t: self.rt.spark.table(views[ObjectName.parse(t, allow_reserved=True)]) for t in roles}
        rows = [p.rows for p in delta[changed].partitions.values()]
        known = None if any(r is None for r in rows) else sum(r or 0 for r in rows)
        sizes = {  # bytes of each base table as pinned; None for a virtual input (an inner stage)
            t: None if (t, role) in self.frames else sum(p.bytes for p in src.partitions.values())
            for t, (role, src) in roles.items()
        }
        pinned = {t: src for t, (_, src) in roles.items() if sizes.get(t) is not None}
        load = functools.partial(iceberg_table, self.rt)
        skips = functools.partial(prunes, load, pinned, delta[changed])
        # An inner stage's delta is a frame of its own: its values are collected.
        ranges = None if (changed, "delta") in self.frames else functools.partial(known_range, load, delta[changed])
        conditions = self.reducer.conditions(query, changed, frames, known, sizes, skips, ranges)
        for table, reduced in conditions.items():
            role, source = roles[table]
            if sizes.get(table) is not None:  # a base table (not an inner stage): read only the files that may match
                source = files_within(load, source, reduced.bounds)
            views[ObjectName.parse(table, allow_reserved=True)] = self.filtered(
                table, role, source, f"{reduced.text} of '{changed}'", reduced.cond
            )
            self.reduced.append(f"term of '{changed}': '{table}' {reduced.text}")
            log.info("semi-join reduction: %s", self.reduced[-1])
        if occurrence is None:
            columns = {ObjectName.parse(t, allow_reserved=True): column_types(f) for t, f in frames.items()}
            self._empty_probed(query, changed, new, delta, views, columns)
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

    def _empty_probed(
        self,
        query: exp.Query,
        changed: str,
        new: dict[str, PinnedTable],
        delta: dict[str, PinnedTable],
        views: dict[ObjectName, str],
        columns: dict[ObjectName, dict[str, object]],
    ) -> None:
        """Bind, in ``views``, each base table (or inner stage keyed by its one table's
        column) a probe found joining none of the change's keys at its new position
        (:mod:`sparkmv.refresh.incremental.probe`) to nothing, or to the rows its own change
        retracted (read old); ``columns``: every input's column types."""
        found_all = probe.emptied(
            self.rt, query, changed, new, dict(delta), run=True, stages=self.stage_keys, columns=columns
        )
        for table, found in found_all.items():
            name = ObjectName.parse(table, allow_reserved=True)
            if found.retracted:
                views[name] = self.retracted(table, delta[table])
                text = f"only its retracted rows join ({found.column} probed for the keys of {found.source})"
            else:
                views[name] = self.filtered(table, found.role, new[table], "probed empty", F.lit(False))
                text = f"no row joins ({found.column} probed for the keys of {found.source})"
            self.reduced.append(f"term of '{changed}': '{table}' {text}")
            log.info("probe: %s", self.reduced[-1])

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


def combine(rows: DataFrame, analysis: IvmAnalysis, target: StructType) -> DataFrame:
    """Combine partial aggregate rows (MV rows and delta rows, both with the MV's columns
    and hidden state columns) into one row per group, in the MV's schema ``target``.

    Raises nothing itself; Spark raises on an arithmetic overflow (ANSI mode).
    """
    keys = [c.name for c in analysis.columns if c.role == "group"]
    types = {f.name.lower(): f for f in target.fields}
    aggs: list[Column] = []
    for col in analysis.columns:
        if col.role == "group":
            continue
        c = F.col(_q(col.name))
        if col.role in ("sum", "avg"):
            total = col.state[0] if col.role == "avg" else col.name
            nn = col.state[-1]
            aggs.append(F.when(F.sum(_q(nn)) == 0, F.lit(None)).otherwise(F.sum(_q(total))).alias(total))
            aggs.append(F.sum(_q(nn)).alias(nn))
        elif col.role == "count":
            aggs.append(F.sum(c).alias(col.name))
        elif col.role == "formula":  # its SUM / COUNT state; the column is computed after
            aggs += [_state_sum(name, col.state) for name in col.state]
        elif col.role == "min":
            aggs.append(F.min(c).alias(col.name))
        elif col.role == "max":
            aggs.append(F.max(c).alias(col.name))
    count = F.sum(_q(ROW_COUNT))
    # A group with fewer rows than retracted is a changelog that does not match the MV: fail loudly.
    aggs.append(F.when(count < 0, F.raise_error(F.lit(NEGATIVE_COUNT))).otherwise(count).alias(ROW_COUNT))
    retracted = RETRACTED in rows.columns
    extrema = [c for c in analysis.columns if c.role in ("min", "max")]
    if retracted:
        for j, col in enumerate(extrema):
            gone = F.col(RETRACTED).getField(f"r{j}")
            aggs.append((F.max(gone) if col.role == "max" else F.min(gone)).alias(f"__smv_r{j}"))
    grouped = rows.groupBy(*[F.col(_q(k)) for k in keys]).agg(*aggs) if keys else rows.groupBy().agg(*aggs)
    for col in analysis.columns:
        if col.role == "avg":
            total, nn = col.state
            grouped = grouped.withColumn(col.name, _average(total, nn, types[total.lower()].dataType))
        elif col.role == "formula":
            grouped = grouped.withColumn(col.name, F.expr(col.formula))
    if retracted:
        grouped = grouped.withColumn(RETRACTED, _reaches_extreme(extrema))
    # A group whose row count falls to 0 disappears; a global aggregate always has its one row
    # (over no rows: counts 0, SUM / AVG / MIN / MAX NULL), as SQL defines it.
    kept = grouped.where(F.col(_q(ROW_COUNT)) > 0) if keys else grouped
    return project_to(kept, target, (RETRACTED,) if retracted else ())


def _state_sum(name: str, state: tuple[str, ...]) -> Column:
    """The merged value of one state column of a formula: a SUM stays NULL while its
    non-NULL count is 0; counts add up."""
    nn = f"{name}_nn"
    if nn in state:
        return F.when(F.sum(_q(nn)) == 0, F.lit(None)).otherwise(F.sum(_q(name))).alias(name)
    return F.sum(_q(name)).alias(name)


def _reaches_extreme(extrema: list[OutputColumn]) -> Column:
    """1 where a retracted value reaches its group's merged MIN / MAX, else 0.

    The merged MAX ``m`` is the MAX of the current rows and the inserted rows; the new rows
    are those minus the retracted ones (a sub-multiset). When every retracted value is
    below ``m``, a row holding ``m`` is left and the MAX stays ``m``; otherwise the row
    holding it may be gone and the group is recomputed. A NULL ``m`` with a retracted value
    cannot happen for a change log that matches the MV; it is recomputed to be safe."""
    flag = F.lit(False)
    for j, col in enumerate(extrema):
        gone, kept = F.col(f"__smv_r{j}"), F.col(_q(col.name))
        reaches = gone >= kept if col.role == "max" else gone <= kept
        flag = flag | (gone.isNotNull() & (kept.isNull() | reaches))
    return F.when(flag, F.lit(1)).otherwise(F.lit(0))


NEGATIVE_COUNT = "incremental refresh: a group lost more rows than it held (the changelog does not match the MV)"


def recompute_retracted(merged: DataFrame, fresh: DataFrame, analysis: IvmAnalysis) -> DataFrame:
    """``merged`` with every group flagged :data:`RETRACTED` replaced by its rows of ``fresh``
    (the augmented query over the new input, in the MV's schema): a retraction may have
    removed those groups' MIN or MAX, so they are recomputed, the others kept.

    The flagged group keys are collected (one small Spark job over the merge): none flagged,
    ``fresh`` is not read at all; up to :data:`KEYS_INLINE` of them are a filter on the
    group keys, which Spark pushes below the aggregate into the scan (partition and
    Parquet row-group pruning, and far fewer rows aggregated); more use a semi-join."""
    keys = [c.name for c in analysis.columns if c.role == "group"]
    kept = merged.where(F.col(RETRACTED) == 0).drop(RETRACTED)
    flagged = merged.where(F.col(RETRACTED) == 1).select(*[F.col(_q(k)) for k in keys])
    if not keys:  # a global aggregate: its one row is recomputed when flagged
        return kept.unionByName(fresh.join(flagged, how="left_semi"))
    restrict = key_filter(flagged, keys, fresh)
    return kept if restrict is None else kept.unionByName(restrict(fresh, True))


def key_filter(
    keys: DataFrame, names: Sequence[str], fresh: DataFrame
) -> Callable[[DataFrame, bool], DataFrame] | None:
    """A filter of frames with the key columns ``names`` by the key values in ``keys``
    (its columns, in the order of ``names``): ``restrict(frame, True)`` keeps the rows whose
    key is among them (NULL-safe), ``restrict(frame, False)`` the others; None when ``keys``
    is empty.

    The keys are collected first (one small Spark job): up to :data:`KEYS_INLINE` of them,
    of types with exact literals (those of ``fresh``'s columns), make a filter of literals,
    which Spark pushes below an aggregate and joins into the scans (partition and Parquet
    row-group pruning, far fewer rows aggregated); more make a semi-join / anti-join, the
    semi-join behind the keys' range (:func:`key_range`, one more small job), which Spark
    pushes into the scans the same way: new keys above the old ones (TPC-H's RF1) read only
    the new files."""
    # Named apart from every column a query or an inner stage makes (a stage's keys are
    # __smv_k0, ...): a semi-join on a same-named column would be ambiguous.
    renamed = keys.select(*[F.col(_q(c)).alias(f"{_KEY_PREFIX}{i}") for i, c in enumerate(keys.columns)])
    found = first_rows(renamed, KEYS_INLINE + 1)
    if not found:
        return None
    types = {f.name.lower(): f.dataType for f in fresh.schema.fields}
    if len(found) <= KEYS_INLINE and all(literal_safe(types[n.lower()]) for n in names):
        wanted = any_of(list(names), found)
        return lambda frame, keep: frame.where(wanted if keep else ~F.coalesce(wanted, F.lit(False)))
    cond = [F.col(_q(n)).eqNullSafe(F.col(f"{_KEY_PREFIX}{i}")) for i, n in enumerate(names)]
    within = key_range(renamed, names, types)

    def restrict(frame: DataFrame, keep: bool) -> DataFrame:
        if not keep:
            return frame.join(renamed, on=cond, how="left_anti")
        return (frame if within is None else frame.where(within)).join(renamed, on=cond, how="left_semi")

    return restrict


def first_rows(frame: DataFrame, n: int) -> list[tuple[Any, ...]]:
    """Up to ``n`` rows of ``frame`` as tuples, in one Spark job: ``limit(n).collect()``
    runs as jobs over 1, 4, 16, ... partitions in turn (Spark's ``executeTake``), while
    the Arrow collect of a limit gathers it into one partition at once."""
    return [tuple(r.values()) for r in frame.limit(n).toArrow().to_pylist()]


def key_range(keys: DataFrame, names: Sequence[str], types: dict[str, Any]) -> Column | None:
    """The condition "each key column within the keys' range" (``min <= c <= max``, or NULL
    when a key is NULL there) over the columns ``names`` (the keys' columns in that order), for
    the columns of exactly comparable literal types; None when none is. A superset of the
    rows the semi-join keeps, so it only adds a filter Spark pushes into the scans (row-group
    and file pruning by min/max statistics)."""
    usable = [i for i, n in enumerate(names) if literal_safe(types[n.lower()])]
    if not usable:
        return None
    aggs = []
    for i in usable:
        column = F.col(keys.columns[i])
        aggs += [F.min(column), F.max(column), F.max(column.isNull().cast("int"))]
    found = keys.agg(*aggs).collect()[0]
    out: Column | None = None
    for j, i in enumerate(usable):
        low, high, nulls = found[3 * j], found[3 * j + 1], found[3 * j + 2]
        column = F.col(_q(names[i]))
        here = column.between(F.lit(low), F.lit(high)) if low is not None else F.lit(False)
        here = here | column.isNull() if nulls else here
        out = here if out is None else out & here
    return out


_KEY_PREFIX = "__smv_filter_key"
KEYS_INLINE = 200
"""Most flagged groups recomputed through a filter of literal keys (else a semi-join)."""


def literal_safe(kind: object) -> bool:
    """A type whose collected Python value makes an exact Spark literal (not a timestamp,
    which PySpark turns into a Python datetime in the machine's local time zone)."""
    return not isinstance(kind, (TimestampType, TimestampNTZType, StructType, ArrayType, MapType, BinaryType))


def any_of(keys: list[str], found: Sequence[Sequence[object]]) -> Column:
    """The condition "the group key is one of ``found``" (NULL-safe), as an IN list for one
    key column."""
    if len(keys) == 1:
        values = [r[0] for r in found]
        column = F.col(_q(keys[0]))
        present = [v for v in values if v is not None]
        cond = column.isin(present) if present else F.lit(False)
        return cond | column.isNull() if len(present) < len(values) else cond
    out = F.lit(False)
    for row in found:
        match = F.lit(True)
        for i, k in enumerate(keys):
            match = match & F.col(_q(k)).eqNullSafe(F.lit(row[i]))
        out = out | match
    return out


def merge_signed_rows(current: DataFrame, rows: DataFrame, target: StructType) -> DataFrame:
    """The multiset ``current`` (the MV's rows of the affected partitions) plus the signed
    ``rows`` (inserted rows +1, retracted rows -1, column :data:`SIGN`), as rows.

    Raises (when Spark writes it): an error when a retraction removes a row that is not
    there (the changelog does not match the MV)."""
    columns = [f.name for f in target.fields]
    both = current.withColumn(SIGN, F.lit(1)).unionByName(rows.select(*[F.col(_q(c)) for c in columns], F.col(SIGN)))
    n = F.sum(SIGN)
    counted = both.groupBy(*[F.col(_q(c)) for c in columns]).agg(
        F.when(n < 0, F.raise_error(F.lit(NEGATIVE_ROWS))).otherwise(n).alias("__smv_n")
    )
    repeated = F.explode(F.array_repeat(F.lit(1), F.col("__smv_n").cast("int")))
    return (
        counted.where(F.col("__smv_n") > 0)
        .select(*[F.col(_q(c)) for c in columns], repeated.alias("__smv_one"))
        .drop("__smv_one")
    )


NEGATIVE_ROWS = "incremental refresh: a retracted row is not in the MV (the changelog does not match the MV)"


def _average(total: str, nn: str, total_type: object) -> Column:
    """AVG from its stored sum and non-NULL count, computed as Spark's ``Average`` does: a
    decimal sum divided by the count as ``DECIMAL(20,0)``, else in double precision."""
    count = F.col(_q(nn))
    if isinstance(total_type, DecimalType):
        value = F.col(_q(total)).cast(total_type) / count.cast(DecimalType(20, 0))
    else:
        value = F.col(_q(total)).cast("double") / count.cast("double")
    return F.when(count == 0, F.lit(None)).otherwise(value)
