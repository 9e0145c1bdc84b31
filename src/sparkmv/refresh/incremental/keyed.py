"""Affected-key recomputation with Spark (:mod:`sparkmv.analysis.keyed`).

The touched keys are the union, over each reference ``Ti`` of a changed base table in the
plan's key query (a table read twice counts twice, as TPC-H Q7's two ``nation``), of the key
query with ``T1..Ti-1`` read new, ``Ti`` as its table's delta (appended files, or signed
rows with their signs ignored: a retracted row touches its group as an inserted one does)
and ``Ti+1..Tn`` old — the delta rule of the grouped relation, which is linear in each
reference (the sum telescopes), projected to its group keys.
The MV's rows with a touched key are dropped and the query over the new input, filtered to
those keys, supplies their new rows; every other row is kept.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import StructType

from sparkmv.analysis.incremental import IvmAnalysis
from sparkmv.analysis.query import bind_occurrences, parse_query, table_occurrences
from sparkmv.names import ObjectName
from sparkmv.refresh.incremental.delta import (
    KEYS_INLINE,
    SIGNED_KINDS,
    Terms,
    Views,
    any_of,
    literal_safe,
    project_to,
)
from sparkmv.refresh.runtime import Runtime
from sparkmv.sources.pinned import PinnedTable
from sparkmv.storage.schema import normalize_for_iceberg


@contextmanager
def touched_keys(
    rt: Runtime,
    analysis: IvmAnalysis,
    target: StructType,
    new: dict[str, PinnedTable],
    old: dict[str, PinnedTable],
    delta: dict[str, PinnedTable],
) -> Iterator[Terms]:
    """The group keys a change touches, as :class:`~sparkmv.refresh.incremental.delta.Terms`:
    ``union`` has one column per key (named and typed as the MV's column ``target`` has it;
    None when no base table changed), ``over_new`` is the defining query over the new input.

    The temporary views are dropped when the context exits."""
    assert analysis.keyed is not None
    views = Views(rt)
    keyed = parse_query(analysis.keyed.key_sql)
    query = parse_query(analysis.augmented_sql)
    qualified = {ObjectName.parse(t, allow_reserved=True): t for t in new}
    occurrences = [qualified[name] for name in table_occurrences(keyed)]
    key_types = StructType([f for f in target.fields if f.name.lower() in analysis.keyed.keys])
    try:
        union: DataFrame | None = None
        for i, changed in enumerate(occurrences):
            if changed not in delta:
                continue
            bound: list[str | None] = [
                views.view(t, "new", new[t]) if j < i else views.view(t, "old", old[t])
                for j, t in enumerate(occurrences)
            ]
            bound[i] = views.view(changed, "delta", delta[changed])
            term = rt.spark.sql(bind_occurrences(keyed, bound))
            frame = project_to(normalize_for_iceberg(term), key_types)
            union = frame if union is None else union.unionByName(frame)
        signed = any(d.kind in SIGNED_KINDS for d in delta.values())
        yield Terms(None if union is None else union.distinct(), signed, lambda: views.over_new(query, new))
    finally:
        views.drop()


def replace_keys(current: DataFrame, fresh: DataFrame, keys: DataFrame, names: tuple[str, ...]) -> DataFrame | None:
    """``current`` (the MV's rows of the affected partitions) with every row whose key
    (columns ``names``) is in ``keys`` replaced by the rows of ``fresh`` (the defining query
    over the new input, in the MV's schema) with that key; None when ``keys`` is empty.

    The keys are collected first (one small Spark job): up to
    :data:`~sparkmv.refresh.incremental.delta.KEYS_INLINE` of them are a filter of literals
    (NULL-safe), which Spark pushes below the query's aggregate and joins into the scans
    (partition and Parquet row-group pruning); more are an anti-join and a semi-join."""
    found = keys.limit(KEYS_INLINE + 1).collect()
    if not found:
        return None
    columns = [keys.columns[[c.lower() for c in keys.columns].index(n)] for n in names]
    types = {f.name.lower(): f.dataType for f in fresh.schema.fields}
    if len(found) <= KEYS_INLINE and all(literal_safe(types[n]) for n in names):
        wanted = any_of(list(names), [tuple(r[c] for c in columns) for r in found])
        return current.where(~F.coalesce(wanted, F.lit(False))).unionByName(fresh.where(wanted))
    renamed = keys.select(*[F.col(f"`{c}`").alias(f"__smv_k{i}") for i, c in enumerate(columns)])
    cond = [F.col(f"`{n}`").eqNullSafe(F.col(f"__smv_k{i}")) for i, n in enumerate(names)]
    kept = current.join(renamed, on=cond, how="left_anti")
    return kept.unionByName(fresh.join(renamed, on=cond, how="left_semi"))
