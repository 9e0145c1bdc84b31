"""Merging an aggregate MV's delta rows into its current rows, and the key filters of the
groups recomputed, with Spark (the second half of an incremental refresh;
:mod:`sparkmv.refresh.incremental.delta` computes the delta).

Partial aggregate rows (the MV's current rows of the affected groups and the delta terms'
rows) are combined per group key (:func:`combine`): SUM/COUNT/row count add up, MIN/MAX take
the least/greatest, AVG is recomputed from its stored sum and count, a SUM over only NULLs
stays NULL, and groups whose row count falls to 0 disappear. A retraction that may have
removed a group's MIN or MAX flags the group, which is recomputed from the new input
(:func:`recompute_retracted`, through :func:`key_filter`). A projection MV's signed rows are
added to its current rows as a multiset (:func:`merge_signed_rows`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    DataType,
    DecimalType,
    MapType,
    StructType,
    TimestampNTZType,
    TimestampType,
)

from sparkmv.analysis.incremental import ROW_COUNT, IvmAnalysis, OutputColumn
from sparkmv.analysis.signed import RETRACTED, SIGN
from sparkmv.refresh.incremental.delta import project_to
from sparkmv.refresh.incremental.literals import any_row_sql


def _q(name: str) -> str:
    return f"`{name}`"


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
        wanted = any_of(list(names), found, [types[n.lower()] for n in names])
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


def any_of(keys: list[str], found: Sequence[Sequence[object]], types: Sequence[DataType] | None = None) -> Column:
    """The condition "the group key is one of ``found``" (NULL-safe), as an IN list for one
    key column. With the key columns' ``types``, written as one SQL expression of literals
    (:func:`~sparkmv.refresh.incremental.literals.any_row_sql`: one Py4J call, not one per
    value) where every value has an exact literal."""
    sql = any_row_sql(keys, found, [t.jsonValue() for t in types]) if types else None
    if sql is not None:
        return F.expr(sql)
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
