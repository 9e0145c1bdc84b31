"""The delta of an MV and its merge into the MV, with Spark.

For base tables ``T1..Tn`` (sorted by name) of which some changed append-only, the delta of
the join of their contents is the union, over each changed ``Ti``, of the query with
``T1..Ti-1`` read at their new position, ``Ti`` read as its delta, and ``Ti+1..Tn`` at their
old (consumed) position: for two tables ``Δ(A ⋈ B) = ΔA ⋈ B_old ∪ A_new ⋈ ΔB``, the standard
delta rule of incremental view maintenance (as the issue's ``ΔA ⋈ B_new ∪ A_old ⋈ ΔB``,
with the roles of old and new swapped, which is equally exact). Filters, projections and
``UNION ALL`` distribute over the union.

For an aggregate MV each term is the *augmented* query (the MV's query with its hidden
state columns, :mod:`sparkmv.analysis.incremental`), so every term yields partial aggregate
rows; the partial rows and the MV's current rows of the affected groups are combined per
group key: SUM/COUNT/row count add up, MIN/MAX take the least/greatest, AVG is recomputed
from its stored sum and count, and a SUM over only NULLs stays NULL (its non-NULL count is
0). Groups whose row count falls to 0 disappear.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from contextlib import contextmanager

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import DecimalType, StructType

from sparkmv.analysis.incremental import ROW_COUNT, IvmAnalysis
from sparkmv.analysis.query import bind_tables, parse_query
from sparkmv.names import ObjectName
from sparkmv.refresh.runtime import Runtime
from sparkmv.sources.pinned import PinnedTable
from sparkmv.sources.resolve import read_pinned

_views = itertools.count()


def _q(name: str) -> str:
    return f"`{name}`"


@contextmanager
def delta_terms(
    rt: Runtime,
    sql: str,
    new: dict[str, PinnedTable],
    old: dict[str, PinnedTable],
    delta: dict[str, PinnedTable],
) -> Iterator[DataFrame | None]:
    """The union of the delta terms of query ``sql`` (None when no base table changed).

    Args:
        new: qualified base table -> the run's pinned input (every base table).
        old: qualified base table -> the consumed position (every base table).
        delta: qualified base table -> only the files appended since ``old`` (changed
            base tables only).

    The temporary views the terms read are dropped when the context exits, so use the
    DataFrame inside it.
    """
    spark = rt.spark
    order = sorted(new)
    created: list[str] = []
    frames: list[DataFrame] = []

    def view(table: str, pinned: PinnedTable) -> str:
        name = f"__smv_d{next(_views)}"
        read_pinned(spark, pinned).createOrReplaceTempView(name)
        created.append(name)
        return name

    try:
        query = parse_query(sql)
        for i, changed in enumerate(order):
            if changed not in delta:
                continue
            views: dict[ObjectName, str] = {}
            for j, table in enumerate(order):
                source = new[table] if j < i else delta[table] if j == i else old[table]
                views[ObjectName.parse(table, allow_reserved=True)] = view(table, source)
            frames.append(spark.sql(bind_tables(query, views)))
        union = None
        for frame in frames:
            union = frame if union is None else union.unionByName(frame)
        yield union
    finally:
        for name in created:
            spark.catalog.dropTempView(name)


def project_to(df: DataFrame, target: StructType) -> DataFrame:
    """``df``'s columns matched to ``target``'s by name (case-insensitive), cast to its types."""
    by_name = {f.name.lower(): f.name for f in df.schema.fields}
    return df.select(*[F.col(_q(by_name[f.name.lower()])).cast(f.dataType).alias(f.name) for f in target.fields])


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
        elif col.role == "min":
            aggs.append(F.min(c).alias(col.name))
        elif col.role == "max":
            aggs.append(F.max(c).alias(col.name))
    aggs.append(F.sum(_q(ROW_COUNT)).alias(ROW_COUNT))
    grouped = rows.groupBy(*[F.col(_q(k)) for k in keys]).agg(*aggs) if keys else rows.groupBy().agg(*aggs)
    for col in analysis.columns:
        if col.role == "avg":
            total, nn = col.state
            grouped = grouped.withColumn(col.name, _average(total, nn, types[total.lower()].dataType))
    return project_to(grouped.where(F.col(_q(ROW_COUNT)) > 0), target)


def _average(total: str, nn: str, total_type: object) -> Column:
    """AVG from its stored sum and non-NULL count, computed as Spark's ``Average`` does: a
    decimal sum divided by the count as ``DECIMAL(20,0)``, else in double precision."""
    count = F.col(_q(nn))
    if isinstance(total_type, DecimalType):
        value = F.col(_q(total)).cast(total_type) / count.cast(DecimalType(20, 0))
    else:
        value = F.col(_q(total)).cast("double") / count.cast("double")
    return F.when(count == 0, F.lit(None)).otherwise(value)
