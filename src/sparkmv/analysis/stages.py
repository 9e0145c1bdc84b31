"""Nested stages: a query split at its non-linear operators.

A query neither technique maintains whole may still be maintained when it is split into
*stages*: an inner stage is a part of the query that affected-key recomputation maintains
on its own (:mod:`sparkmv.analysis.keyed`) and that the stage above reads as a *virtual
input*, a table reference named :data:`STAGE_PREFIX` ``<n>``. At refresh it has three
frames like a base table: ``new`` (its query over the new inputs), ``old`` (over the
consumed ones) and a signed delta (its rows of the touched keys over the new input, +1,
and over the old input, -1, netted), so the stage above runs its own technique unchanged
(the delta rules are multilinear in their inputs; affected-key recomputation needs only
each input's delta). This is DBSP's chain rule for nested incremental operators (Budiu et
al., VLDB 2023) and the "stages" of Snowflake's dynamic tables. Three kinds of stage:

- a derived table (or CTE, inlined) in a FROM or JOIN with GROUP BY, DISTINCT, an
  aggregate or a window (TPC-H Q13's ``c_orders``, Q15's ``revenue0``), or with an outer
  join (TPC-DS q5, q51), then a stage keyed by every column, as INTERSECT / EXCEPT, and a
  ``UNION ALL`` branch of such a SELECT (TPC-DS q4's ``year_total``);
- the body of an ``IN`` subquery that itself holds subquery predicates (TPC-H Q20): the
  predicate reads ``SELECT <column> FROM <stage>``;
- a decorrelated scalar subquery: the WHERE conjunct
  ``x <op> (SELECT agg FROM ... WHERE inner.c = outer.c AND <local filters>)`` whose
  ``agg`` is NULL on no rows (arithmetic over SUM / AVG / MIN / MAX, not COUNT) becomes the
  inner join of the stage ``SELECT inner.c AS __smv_k0, agg AS __smv_v FROM ... WHERE
  <local filters> GROUP BY inner.c`` on ``__smv_k0 = outer.c AND x <op> __smv_v`` (TPC-H
  Q17): exact, as a NULL comparison drops the row either way (this kind and the next are
  :mod:`sparkmv.analysis.stage_subqueries`). When ``agg`` is arithmetic
  over aggregate calls (Q17's ``0.2 * avg(l_quantity)``), the stage selects the calls
  (``__smv_v0``, ``__smv_v1``, ...) and the comparison applies the arithmetic to them: the
  same expression over the same values, and a stage of plain aggregates is one the delta
  rules maintain from kept state (:mod:`sparkmv.refresh.incremental.stage_state`). Only
  tried when the query above is not maintained with the subquery in place;
- a semi-join: the WHERE conjunct ``EXISTS (SELECT ... WHERE inner.c = outer.c AND <local
  filters>)`` or ``x IN (SELECT y ...)`` (not negated; ``y`` no aggregate, its subquery
  grouped by ``y`` alone or not grouped) becomes the inner join of the stage of distinct keys
  ``SELECT DISTINCT inner.c AS __smv_k0 ...`` (``y`` first for an ``IN``) on equality with
  the outer columns: a row passes iff a subquery row matches it, and a NULL matches none
  either way (TPC-H Q4, Q18). Split only when every column's side is known (qualified, or
  the base tables' columns given), and, for a query affected-key recomputation maintains
  as written, only when the delta rules then maintain the query above
  (:func:`sparkmv.analysis.incremental.analyze_incremental`).

The split is tried only when the query is not maintained as written. A stage's own body is
split the same way (stages nest). Which column of a correlation is the subquery's is read
from the qualifiers: a column qualified by a table of the subquery is its, one qualified by
another name the outer query's; of two unqualified columns the left one is the subquery's
(as TPC-H writes them: ``l_partkey = p_partkey``), without a schema to tell.

>>> outer, stages = split_stages(parse_query(
...     "SELECT n, count(*) AS c FROM (SELECT k, count(*) AS n FROM t GROUP BY k) s GROUP BY n"))
>>> outer.sql()
'SELECT n, COUNT(*) AS c FROM __smv_stage_1 AS s GROUP BY n'
>>> [(name, body.sql()) for name, body in stages]
[('__smv_stage_1', 'SELECT k, COUNT(*) AS n FROM t GROUP BY k')]
>>> outer, stages = split_stages(parse_query("SELECT sum(a) AS s FROM t, u WHERE t.k = u.k "
...     "AND t.q < (SELECT 0.5 * avg(q) FROM t AS i WHERE i.k = u.k AND i.z > 0)"))
>>> print(outer.sql())
SELECT SUM(a) AS s FROM t CROSS JOIN u JOIN __smv_stage_1 ON __smv_stage_1.__smv_k0 = u.k \
WHERE t.k = u.k AND t.q < (0.5 * __smv_stage_1.__smv_v0)
>>> stages[0][1].sql()
'SELECT i.k AS __smv_k0, AVG(q) AS __smv_v0 FROM t AS i WHERE i.z > 0 GROUP BY i.k'
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator
from dataclasses import replace

from sqlglot import exp

from sparkmv.analysis.constructs import is_aggregate, output_name
from sparkmv.analysis.ivm import IvmAnalysis, Stage
from sparkmv.analysis.keyed import _set_leaves, inline_ctes
from sparkmv.analysis.outer import OUTER_SIDES
from sparkmv.analysis.query import DIALECT, parse_query, table_name
from sparkmv.analysis.stage_subqueries import (
    STAGE_VALUE,
    Known,
    decorrelate,
    select_sources,
    semijoin,
    source_columns,
)
from sparkmv.analysis.subqueries import predicates, subquery_body
from sparkmv.analysis.unions import union_branches
from sparkmv.analysis.windows import windows

STAGE_PREFIX = "__smv_stage_"
"""Prefix of the table name of an inner stage's virtual input."""
STAGE_COLUMN = "__smv_c"
"""Prefix of the columns of a ``UNION ALL`` branch's stage (by position)."""


def split_stages(
    query: exp.Query, counter: Iterator[int] | None = None, known: Known | None = None
) -> tuple[exp.Query, list[tuple[str, exp.Query]]]:
    """``query`` (a copy, CTEs inlined) with its inner stages replaced by references to
    their virtual inputs, and the stages (name, body) in the order found; no stage found:
    an empty list. A body holding the same SQL twice (Q15's ``revenue0``) is one stage.

    ``counter`` numbers the stages (shared by nested splits, so names are unique in a tree).
    ``known`` (the base tables' columns) tells which column of a correlation is the
    subquery's; without it the qualifiers and the left-of-two rule do (module docstring),
    and ``EXISTS`` / ``IN`` semi-joins are split only when every correlation is qualified.
    """
    counter = counter if counter is not None else itertools.count(1)
    inlined = inline_ctes(query)
    stages: dict[str, tuple[str, exp.Query]] = {}

    def stage_of(body: exp.Query) -> str:
        sql = body.sql()
        if sql not in stages:
            stages[sql] = (f"{STAGE_PREFIX}{next(counter)}", body)
        return stages[sql][0]

    if isinstance(inlined, exp.Union) and _branch_stages(inlined):  # a UNION ALL of aggregates
        _stage_branches(inlined, stage_of)
        return inlined, list(stages.values())
    if isinstance(inlined, exp.SetOperation):  # the derived tables of each branch
        for leaf in _set_leaves(inlined):
            _stage_derived(leaf, stage_of)
        return inlined, list(stages.values())
    if isinstance(inlined, str) or not isinstance(inlined, exp.Select):
        return query.copy(), []
    _stage_derived(inlined, stage_of)
    _stage_scalar_items(inlined, stage_of, known)
    for predicate in predicates(inlined):
        if isinstance(predicate, exp.In) and _nested(predicate):
            body = subquery_body(predicate)
            assert isinstance(body, exp.Select)
            column = output_name(body.expressions[0])
            name = stage_of(body.copy())
            predicate.set("query", exp.Subquery(this=exp.select(column).from_(name)))
    if not stages:
        for predicate in predicates(inlined):
            decorrelate(inlined, predicate, stage_of, known)
            semijoin(inlined, predicate, stage_of, known)
    return inlined, list(stages.values())


def _nonlinear_derived(select: exp.Select) -> list[exp.Subquery]:
    """The derived tables with GROUP BY, DISTINCT or an aggregate in the FROM / JOINs of
    ``select`` and of the SELECTs of its subquery predicates and linear derived tables
    (outermost only)."""
    found: list[exp.Subquery] = []
    stack: list[exp.Expr] = [select]
    while stack:
        node = stack.pop()
        if isinstance(node, exp.Subquery) and isinstance(node.parent, exp.From | exp.Join):
            body = node.this
            if isinstance(body, exp.Select) and _nonlinear(body):
                found.append(node)
                continue
            if isinstance(body, exp.Union) and _branch_stages(body):
                found.append(node)
                continue
            if isinstance(body, exp.Intersect | exp.Except):  # keyed by every column
                found.append(node)
                continue
        stack.extend(reversed(list(node.iter_expressions())))
    return found


def _stage_derived(select: exp.Select, stage_of: Callable[[exp.Query], str]) -> None:
    """Replace (in place) the nonlinear derived tables of ``select`` by their stages (a
    ``UNION ALL`` of aggregates branch by branch), after pruning union branches its filters
    reject, and expand its stars over stages."""
    _prune_union_branches(select)
    readers: list[tuple[exp.Select, dict[str, list[str]]]] = []
    for derived in _nonlinear_derived(select):
        if isinstance(derived.this, exp.Union):
            _stage_branches(derived.this, stage_of)
            continue
        alias = derived.alias or stage_of(derived.this)
        first = derived.this
        while isinstance(first, exp.SetOperation | exp.Subquery):
            first = first.this
        reader = derived.parent_select
        if isinstance(first, exp.Select) and isinstance(reader, exp.Select):
            named = next((n for r, n in readers if r is reader), None)
            if named is None:
                named = {}
                readers.append((reader, named))
            named[alias.lower()] = [output_name(i) for i in first.expressions]
        derived.replace(exp.alias_(exp.to_table(stage_of(derived.this)), alias, table=True))
    for reader, named in readers:  # a stage read by a subquery's SELECT too (TPC-DS q23b)
        _expand_stage_stars(reader, named)


def _stage_scalar_items(select: exp.Select, stage_of: Callable[[exp.Query], str], known: Known | None) -> None:
    """Replace (in place) each uncorrelated scalar subquery of ``select``'s select list
    that aggregates without GROUP BY (one row: TPC-DS q9's ``(SELECT count(*) FROM
    store_sales WHERE ...)``, a share of a total's ``x / (SELECT sum(x) FROM t)``) by the
    column ``__smv_v`` of its one-row stage, cross joined to ``select``. Uncorrelated means
    every column of the subquery is one of its own base tables' (``known``); without the
    schemas nothing is replaced. A stage of one row cross joined keeps every row's count."""
    if not known or select.args.get("group") is not None or select.args.get("distinct") is not None:
        return
    for item in select.expressions:
        for sub in list(item.find_all(exp.Subquery)):
            body = sub.this
            if not isinstance(body, exp.Select) or len(body.expressions) != 1 or sub.find_ancestor(exp.Subquery):
                continue
            if body.args.get("group") or body.args.get("distinct") or not _has_own_aggregate(body) or predicates(body):
                continue
            if not _uncorrelated(body, known):
                continue
            stage = body.copy()
            stage.set("expressions", [exp.alias_(body.expressions[0].unalias().copy(), STAGE_VALUE)])
            name = stage_of(stage)
            sub.replace(exp.column(STAGE_VALUE, table=name))
            if not any(isinstance(j.this, exp.Table) and j.this.name == name for j in select.args.get("joins") or []):
                if select.args.get("from_") is None:
                    select.set("from_", exp.From(this=exp.to_table(name)))
                else:
                    select.join(exp.to_table(name), join_type="CROSS", copy=False)


def _uncorrelated(body: exp.Select, known: Known) -> bool:
    """True when every column of ``body`` is one of its own base tables' (by ``known``)."""
    own, aliases = source_columns(body, known), {t.alias_or_name.lower() for t in select_sources(body)}
    if own is None:
        return False
    return all(c.table.lower() in aliases if c.table else c.name.lower() in own for c in body.find_all(exp.Column))


def _has_own_aggregate(select: exp.Select) -> bool:
    return any(is_aggregate(n) and n.find_ancestor(exp.Select) is select for e in select.expressions for n in e.dfs())


def _prune_union_branches(select: exp.Select) -> None:
    """Drop (in place) the branches of a ``UNION ALL`` derived table of ``select`` that a
    WHERE conjunct ``alias.c = '<string>'`` of ``select`` rejects because the branch selects
    another string as ``c`` (TPC-DS q4's ``year_total`` read six times, each reading
    filtered to one ``sale_type``); one branch left replaces the union. The rows are the
    same: a rejected branch contributes none.

    >>> q = parse_query("SELECT a.k FROM (SELECT k, 's' AS t FROM x UNION ALL SELECT k, 'c' AS t FROM y) AS a "
    ...     "WHERE a.t = 'c'")
    >>> _prune_union_branches(q)
    >>> q.sql()
    "SELECT a.k FROM (SELECT k, 'c' AS t FROM y) AS a WHERE a.t = 'c'"
    """
    where = select.args.get("where")
    if where is None:
        return
    wanted: dict[tuple[str, str], exp.Literal] = {}
    for conjunct in where.this.flatten() if isinstance(where.this, exp.And) else [where.this]:
        if isinstance(conjunct, exp.EQ):
            column, literal = conjunct.this, conjunct.expression
            if isinstance(column, exp.Literal):
                column, literal = literal, column
            if isinstance(column, exp.Column) and column.table and isinstance(literal, exp.Literal):
                wanted[(column.table.lower(), column.name.lower())] = literal
    for source in select_sources(select):
        if not isinstance(source, exp.Subquery) or not isinstance(source.this, exp.Union) or not source.alias:
            continue
        branches = union_branches(source.this)
        if not branches:
            continue
        names = [output_name(i) for i in branches[0].expressions]
        kept = [b for b in branches if not _rejected(b, names, source.alias.lower(), wanted)]
        if kept and len(kept) < len(branches):
            union: exp.Query = kept[0].copy()
            for branch in kept[1:]:
                union = exp.union(union, branch.copy(), distinct=False)
            source.set("this", union)


def _rejected(branch: exp.Select, names: list[str], alias: str, wanted: dict[tuple[str, str], exp.Literal]) -> bool:
    for position, name in enumerate(names):
        literal = wanted.get((alias, name))
        item = branch.expressions[position].unalias() if position < len(branch.expressions) else None
        # strings only: two spellings of a number (1, 1.0) may be equal
        if literal is not None and isinstance(item, exp.Literal) and item.is_string and literal.is_string:
            if item.this != literal.this:
                return True
    return False


def _expand_stage_stars(select: exp.Select, named: dict[str, list[str]]) -> None:
    """Replace ``*`` / ``alias.*`` select items of ``select`` that read only stages by the
    stages' columns (in place; ``named``: stage alias -> its output names): a stage's
    frames carry columns of their own (a delta's sign) that a star would select."""
    aliases = [s.alias_or_name.lower() for s in select_sources(select)]
    items: list[exp.Expr] = []
    for item in select.expressions:
        if isinstance(item, exp.Star) and aliases and all(a in named for a in aliases):
            items += [exp.column(n, table=a) for a in aliases for n in named[a]]
        elif isinstance(item, exp.Column) and item.is_star and item.table.lower() in named:
            items += [exp.column(n, table=item.table) for n in named[item.table.lower()]]
        else:
            items.append(item)
    select.set("expressions", items)


def _branch_stages(union: exp.Union) -> list[exp.Select]:
    """The nonlinear branches of a ``UNION ALL`` (TPC-DS q4's ``year_total``, q66's
    warehouse totals) that can be stages: empty when it is no ``UNION ALL`` of SELECTs, or
    when its first branch leaves an output column to Spark's generated name."""
    branches = union_branches(union)
    staged = [b for b in branches if _nonlinear(b)]
    if not branches or not staged:
        return []
    if not all(isinstance(i, exp.Alias | exp.Column) for i in branches[0].expressions):
        return []
    return staged


def _stage_branches(union: exp.Union, stage_of: Callable[[exp.Query], str]) -> None:
    """Replace each nonlinear branch of ``union`` (in place) by a projection of its stage:
    the stage names its columns ``__smv_c<i>`` (a branch's names may repeat or be Spark's
    generated ones) and the projection gives them the union's output names (the first
    branch's: a key query may read one branch alone), so the union above is linear (a
    UNION ALL of projections) and the delta rules maintain it.

    >>> q = parse_query("SELECT k, sum(s) AS s FROM (SELECT k, sum(x) AS s FROM t GROUP BY k "
    ...     "UNION ALL SELECT j, count(*) FROM u GROUP BY j) AS y GROUP BY k")
    >>> outer, stages = split_stages(q)
    >>> print(outer.sql())
    SELECT k, SUM(s) AS s FROM (SELECT __smv_stage_1.__smv_c0 AS k, __smv_stage_1.__smv_c1 AS s FROM __smv_stage_1 \
UNION ALL SELECT __smv_stage_2.__smv_c0 AS k, __smv_stage_2.__smv_c1 AS s FROM __smv_stage_2) AS y GROUP BY k
    >>> stages[1][1].sql()
    'SELECT j AS __smv_c0, COUNT(*) AS __smv_c1 FROM u GROUP BY j'
    """
    names = [output_name(item) for item in union_branches(union)[0].expressions]
    for branch in _branch_stages(union):
        body = branch.copy()
        items = [exp.alias_(i.unalias().copy(), f"{STAGE_COLUMN}{n}") for n, i in enumerate(body.expressions)]
        body.set("expressions", items)
        name = stage_of(body)
        columns = [exp.alias_(exp.column(f"{STAGE_COLUMN}{n}", table=name), out) for n, out in enumerate(names)]
        branch.replace(exp.select(*columns).from_(name))


def _nonlinear(select: exp.Select) -> bool:
    """A SELECT the delta rules do not maintain in its reader: windows, grouping, DISTINCT,
    aggregates, or an outer join (a stage keyed by every column, as INTERSECT / EXCEPT)."""
    return (
        bool(windows(select))
        or any((j.side or "").upper() in OUTER_SIDES for j in select.args.get("joins") or [])
        or select.args.get("group") is not None
        or select.args.get("distinct") is not None
        or any(is_aggregate(n) and n.find_ancestor(exp.Select) is select for e in select.expressions for n in e.dfs())
    )


def _nested(predicate: exp.In) -> bool:
    """An ``IN`` subquery of one column (a column or an aliased expression, so the stage
    names it) whose SELECT itself holds subquery predicates."""
    body = subquery_body(predicate)
    if not isinstance(body, exp.Select) or len(body.expressions) != 1:
        return False
    return isinstance(body.expressions[0], exp.Column | exp.Alias) and bool(predicates(body))


def inline_stages(query: exp.Query, stages: dict[str, str]) -> exp.Query:
    """``query`` (a copy) with each reference to a stage's virtual input replaced by a
    derived table of the stage's SQL (``stages``: name -> SQL), aliased as the reference."""
    out = query.copy()
    for table in list(out.find_all(exp.Table)):
        if table.db or table.name not in stages:
            continue
        alias = table.alias or table.name
        table.replace(
            exp.Subquery(this=parse_query(stages[table.name]), alias=exp.TableAlias(this=exp.to_identifier(alias)))
        )
    return out


Analyze = Callable[[exp.Query], IvmAnalysis]


def staged_analysis(
    query: exp.Query, analyze: Analyze, keyed: Analyze, known: Known | None = None
) -> IvmAnalysis | None:
    """The analysis of ``query`` split into stages: the query above (``analyze``: the
    whole-query analysis, delta rules or affected-key recomputation) over its inner stages
    (each by affected-key recomputation, ``keyed``, split again when it is not maintained
    whole); None when the query has no inner stage, else the analysis or the first reason."""
    return _staged(query, analyze, keyed, itertools.count(1), known)


def _staged(
    query: exp.Query, analyze: Analyze, keyed: Analyze, counter: Iterator[int], known: Known | None
) -> IvmAnalysis | None:
    outer, found = split_stages(query, counter, known)
    if not found:
        return None
    stages = []
    for name, body in found:
        inner = _stage_analysis(body, keyed, counter, known)
        if inner.reason is not None:
            return IvmAnalysis(f"inner stage {name}: {inner.reason}", False, (), (), query.sql(DIALECT))
        stages.append(Stage(name, inner))
    top = analyze(outer)
    if top.reason is not None and known is not None:  # resolved with the stages' columns too
        top = analyze(_qualified_over_stages(outer, stages, known))
    if top.reason is not None:
        return replace(top, augmented_sql=query.sql(DIALECT))
    bodies = {s.name: s.analysis.augmented_sql for s in stages}
    whole = inline_stages(parse_query(top.augmented_sql), bodies).sql(DIALECT)
    above = top.merged_sql or top.augmented_sql  # maintained merged, when its derived tables are
    return replace(top, augmented_sql=whole, staged_sql=above, merged_sql="", stages=tuple(stages))


def _qualified_over_stages(outer: exp.Query, stages: list[Stage], known: Known) -> exp.Query:
    """``outer`` with its unqualified columns qualified by their table, the inner stages'
    output columns known beside the base tables' (TPC-DS q2's ``sun_sales`` beside
    ``d_year``: a derived table over a stage and a base table merges once qualified)."""
    from sparkmv.analysis.qualify import qualify_unqualified

    columns = dict(known)
    for stage in stages:
        name = table_name(exp.to_table(stage.name)).qualified
        columns[name] = [c.name for c in stage.analysis.columns]
    return qualify_unqualified(outer, columns)


def _stage_analysis(body: exp.Query, keyed: Analyze, counter: Iterator[int], known: Known | None) -> IvmAnalysis:
    """An inner stage by affected-key recomputation (its touched keys make its delta),
    split into stages itself when it is not maintained whole."""
    whole = keyed(body)
    if whole.reason is None:
        return whole
    staged = _staged(body, keyed, keyed, counter, known)
    return whole if staged is None else staged
