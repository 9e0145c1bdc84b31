"""Affected-key recomputation with Spark (:mod:`sparkmv.analysis.keyed`).

Subquery predicates (``EXISTS``, ``IN``, scalar subqueries) add one key query each
(:mod:`sparkmv.analysis.subqueries`), bound the same way over the subquery's own table
references, the outer ones read new.

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

from collections.abc import Callable, Iterator
from contextlib import contextmanager

from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import StructType

from sparkmv.analysis.incremental import IvmAnalysis
from sparkmv.analysis.keyed import KeyedPlan
from sparkmv.analysis.query import bind_occurrences, parse_query, table_occurrences
from sparkmv.names import ObjectName
from sparkmv.refresh.incremental.delta import SIGNED_KINDS, Terms, Views, project_to
from sparkmv.refresh.incremental.merge_rows import key_filter
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
    views: Views | None = None,
) -> Iterator[Terms]:
    """The group keys a change touches, as :class:`~sparkmv.refresh.incremental.delta.Terms`:
    ``union`` has one column per key (named and typed as the MV's column ``target`` has it;
    None when no base table changed), ``over_new`` is the defining query over the new input.

    The temporary views are dropped when the context exits (unless ``views`` is given, as
    :func:`~sparkmv.refresh.incremental.delta.delta_terms` says)."""
    assert analysis.keyed is not None
    owned = views is None
    views = views or Views(rt)
    query = parse_query(analysis.augmented_sql)
    qualified = {ObjectName.parse(t, allow_reserved=True): t for t in new}
    key_types = StructType([f for f in target.fields if f.name.lower() in analysis.keyed.keys])
    try:
        frames = [
            project_to(normalize_for_iceberg(rt.spark.sql(sql)), key_types)
            for sql in _term_sqls(views, analysis.keyed, qualified, (new, old, delta))
        ]
        union = None
        for frame in frames:
            union = frame if union is None else union.unionByName(frame)
        signed = any(d.kind in SIGNED_KINDS for d in delta.values())
        yield Terms(None if union is None else union.distinct(), signed, lambda: views.over_new(query, new))
    finally:
        if owned:
            views.drop()


def _term_sqls(
    views: Views,
    plan: KeyedPlan,
    qualified: dict[ObjectName, str],
    positions: tuple[dict[str, PinnedTable], dict[str, PinnedTable], dict[str, PinnedTable]],
) -> list[str]:
    """The bound key queries: the plan's key query (or each of its union branch terms)
    once per changed table reference (the delta rule), and each subquery term once per
    changed reference inside its subquery (the delta rule among the subquery's references;
    the outer ones read new)."""
    new, old, delta = positions
    sqls = _outer_term_sqls(views, plan, qualified, positions)
    main: list[tuple[str, tuple[bool, ...] | None]] = (
        [] if plan.outer_terms else [(sql, None) for sql in plan.branch_terms or (plan.key_sql,)]
    )
    terms = [*main, *plan.subquery_terms]
    for sql, mask in terms:
        query = parse_query(sql)
        occurrences = [qualified[name] for name in table_occurrences(query)]
        own = [i for i in range(len(occurrences)) if mask is None or mask[i]]
        for rank, i in enumerate(own):
            if occurrences[i] not in delta:
                continue
            bound: list[str | None] = []
            for j, table in enumerate(occurrences):
                before = j not in own or own.index(j) < rank
                bound.append(views.view(table, "new", new[table]) if before else views.view(table, "old", old[table]))
            bound[i] = views.view(occurrences[i], "delta", delta[occurrences[i]])
            sqls.append(bind_occurrences(query, bound))
    return sqls


def _outer_term_sqls(
    views: Views,
    plan: KeyedPlan,
    qualified: dict[ObjectName, str],
    positions: tuple[dict[str, PinnedTable], dict[str, PinnedTable], dict[str, PinnedTable]],
) -> list[str]:
    """The bound outer-join key queries (:mod:`sparkmv.analysis.outer`): each term once per
    changed reference its mask marks, that reference read as its delta, every earlier
    reference (of the whole query) new and every later one old — the delta rule's order,
    the same as the plain key query's."""
    new, old, delta = positions
    sqls = []
    for sql, mask in plan.outer_terms:
        query = parse_query(sql)
        occurrences = [qualified[name] for name in table_occurrences(query)]
        for i, table in enumerate(occurrences):
            if not mask[i] or table not in delta:
                continue
            bound: list[str | None] = [
                views.view(t, "new", new[t]) if j < i else views.view(t, "old", old[t])
                for j, t in enumerate(occurrences)
            ]
            bound[i] = views.view(table, "delta", delta[table])
            sqls.append(bind_occurrences(query, bound))
    return sqls


def replace_keys(
    current: DataFrame,
    fresh: DataFrame,
    keys: DataFrame,
    names: tuple[str, ...],
    kept: Callable[[DataFrame], DataFrame] | None = None,
) -> DataFrame | None:
    """``current`` (the MV's rows of the affected partitions) with every row whose key
    (columns ``names``) is in ``keys`` replaced by the rows of ``fresh`` (the defining query
    over the new input, in the MV's schema) with that key; None when ``keys`` is empty.
    The keys filter both sides as
    :func:`~sparkmv.refresh.incremental.merge_rows.key_filter` says (literals pushed into the
    scans, or an anti-join and a semi-join). ``kept``: applied to the recomputed rows of the
    keys (an MV's expectations, :class:`~sparkmv.refresh.expectations.ExpectationCheck`),
    above the key filter so the keys still reach the scans."""
    by_name = {c.lower(): c for c in keys.columns}
    restrict = key_filter(keys.select(*[F.col(f"`{by_name[n]}`") for n in names]), names, fresh)
    if restrict is None:
        return None
    recomputed = restrict(fresh, True)
    return restrict(current, False).unionByName(kept(recomputed) if kept is not None else recomputed)
