"""Window functions under affected-key recomputation (:mod:`sparkmv.analysis.keyed`).

A window function's value for a row depends only on the rows of its partition, so when
every window of the query has the same ``PARTITION BY`` columns, the partitions a change
touches are the partition keys of the delta of the relation the windows read (inserted and
retracted rows alike), and recomputing those partitions gives their new rows. The
``PARTITION BY`` columns are the keys; they must be output columns of the MV, under their
own name, so the MV's rows are matched to the touched keys.

Two shapes: windows in the select list (or QUALIFY) of the query itself, and a projection
and filter over one derived table with such windows (latest row per key:
``SELECT ... FROM (SELECT ..., row_number() OVER (PARTITION BY k ORDER BY ts DESC) AS rn
FROM t) WHERE rn = 1``). The outer filter is dropped from the key query (a superset).

The windowed SELECT may group (a window over an aggregate, TPC-DS's
``sum(sum(x)) OVER (PARTITION BY i_class)`` or ``rank() OVER (PARTITION BY s_state ORDER BY
sum(p))``) when each ``PARTITION BY`` expression is a ``GROUP BY`` expression: a window
partition is then a set of whole groups, the groups of a base row are known from its
columns, and the touched partitions are the partition keys of the delta of the grouped
relation, before grouping. Each touched partition's groups are recomputed whole.

>>> from sparkmv.analysis.query import parse_query
>>> q = parse_query(
...     "SELECT id, k FROM (SELECT id, k, row_number() OVER (PARTITION BY k ORDER BY id) AS rn FROM t) WHERE rn = 1"
... )
>>> w = windowed_select(q)
>>> w.sql(), [e.sql() for e in partition_columns(w)]
('SELECT id, k, ROW_NUMBER() OVER (PARTITION BY k ORDER BY id) AS rn FROM t', ['k'])
>>> partition_columns(parse_query("SELECT k, sum(v) OVER () AS s FROM t"))
'sum(v) OVER () is not incrementally maintainable: a window function without PARTITION BY reads every row'
"""

from __future__ import annotations

from sqlglot import exp

from sparkmv.analysis.constructs import (
    _same,
    grouping_sets,
    is_aggregate,
    modifier_problem,
    node_problem,
    not_maintainable,
    unparen,
)

WHY_UNPARTITIONED = "a window function without PARTITION BY reads every row"
WHY_PARTITIONS = "windows whose PARTITION BY lists share no expression read every row"
WHY_KEY = "a PARTITION BY column must be an output column"
WHY_GROUP_KEY = "a window over an aggregate is maintained when each PARTITION BY expression is a GROUP BY key"


def windows(select: exp.Select) -> list[exp.Window]:
    """The windows of ``select``'s select list and QUALIFY (not those of subqueries)."""
    roots = [*select.expressions, select.args.get("qualify")]
    return [
        w
        for root in roots
        if root is not None
        for w in root.find_all(exp.Window)
        if w.find_ancestor(exp.Select) is select and w.find_ancestor(exp.Window) is None
    ]


def windowed_select(select: exp.Expr) -> exp.Select | None:
    """The SELECT holding the windows of a window-shaped query: ``select`` itself (which may
    group), or the derived table it alone reads (a projection and filter over it); None for
    any other query (DISTINCT, no window)."""
    if not isinstance(select, exp.Select) or select.args.get("distinct"):
        return None
    if windows(select):
        return select
    if select.args.get("group"):
        return None
    from_ = select.args.get("from_")
    inner = from_.this if from_ is not None else None
    if select.args.get("joins") or not isinstance(inner, exp.Subquery) or not isinstance(inner.this, exp.Select):
        return None
    body = inner.this
    return body if not body.args.get("distinct") and windows(body) else None


def partition_columns(select: exp.Select) -> list[exp.Expr] | str:
    """The ``PARTITION BY`` expressions every window of ``select`` has (in the first
    window's order), or why not (over a GROUP BY, each must be a GROUP BY expression).
    Windows partitioned by different lists share the expressions common to all: each
    window's partition lies within one partition of the common ones, which is recomputed
    whole (TPC-DS q47's ``avg(...) OVER (PARTITION BY a, b, y)`` beside ``rank() OVER
    (PARTITION BY a, b ORDER BY y)``).

    >>> from sparkmv.analysis.query import parse_query
    >>> q = parse_query("SELECT a, b, sum(v) OVER (PARTITION BY a, b) s, rank() OVER (PARTITION BY b ORDER BY v) r "
    ...     "FROM t")
    >>> [e.sql() for e in partition_columns(q)]
    ['b']
    """
    found = windows(select)
    group = select.args.get("group")
    common: list[exp.Expr] | None = None
    for window in found:
        partition = list(window.args.get("partition_by") or [])
        if not partition:
            return not_maintainable(window, WHY_UNPARTITIONED)
        loose = next((p for p in partition if group is not None and not _is_group_key(p, group)), None)
        if loose is not None:
            return not_maintainable(loose, WHY_GROUP_KEY)
        if common is None:
            common = partition
            continue
        common = [c for c in common if any(_same(unparen(c), unparen(p)) for p in partition)]
        if not common:
            return not_maintainable(window, WHY_PARTITIONS)
    return common or []


def _is_group_key(expr: exp.Expr, group: exp.Group) -> bool:
    if group.args.get("all") or grouping_sets(group):
        return False
    return any(_same(unparen(expr), unparen(key)) for key in group.expressions)


def windowed_problem(select: exp.Select) -> str | None:
    """The problems of the windowed SELECT's own clauses and expressions: ORDER BY / LIMIT,
    aggregates outside a window (unless it groups), non-deterministic functions, subqueries
    (any function is fine inside a window: its partitions are recomputed whole)."""
    problem = modifier_problem(select)
    if problem:
        return problem
    grouped = select.args.get("group") is not None
    for root in [*select.expressions, select.args.get("qualify"), select.args.get("having")]:
        for node in root.dfs() if root is not None else ():
            if isinstance(node, exp.Window) or (is_aggregate(node) and (grouped or node.find_ancestor(exp.Window))):
                continue
            if is_aggregate(node):
                return not_maintainable(node, "an aggregate beside a window function is not maintained")
            problem = node_problem(node)
            if problem:
                return problem
    return None


def outer_problem(outer: exp.Select) -> str | None:
    """The problems of the projection and filter over the windowed derived table."""
    problem = modifier_problem(outer)
    for arg in ("having", "qualify", "laterals"):
        if problem is None and outer.args.get(arg):
            problem = not_maintainable(outer.args[arg], f"{arg.upper()} over a windowed derived table")
    for root in [*outer.expressions, outer.args.get("where")]:
        for node in root.dfs() if root is not None and problem is None else ():
            if is_aggregate(node):
                return not_maintainable(node, "an aggregate over a windowed derived table is not maintained")
            problem = problem or node_problem(node)
    return problem


def key_names(
    window_select: exp.Select, top: exp.Select, partition: list[exp.Expr]
) -> list[tuple[exp.Expr, str]] | str:
    """The ``PARTITION BY`` columns that are output columns, with their output names (each
    selected by ``window_select``, under its name or an alias, and, when it is a derived
    table, selected by ``top`` under that name), or why none is. Keys of a subset of the
    ``PARTITION BY`` columns are coarser: each touched key's rows hold whole partitions."""
    found: list[tuple[exp.Expr, str]] = []
    for expr in partition:
        expr = unparen(expr)
        if not isinstance(expr, exp.Column):
            continue
        inner = [i for i in window_select.expressions if _same(unparen(i.unalias()), expr)]
        name = inner[0].alias_or_name.lower() if inner else ""
        outer = [i for i in top.expressions if isinstance(i.unalias(), exp.Column) and i.alias_or_name.lower() == name]
        if inner and (top is window_select or any(i.unalias().name.lower() == name for i in outer)):
            found.append((expr, name))
    if not found:
        return not_maintainable(unparen(partition[0]), WHY_KEY)
    return found
