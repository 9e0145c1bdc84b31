"""Nested stages: a query split at its non-linear operators (issue 24).

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

- a derived table (or CTE, inlined) in a FROM or JOIN with GROUP BY, DISTINCT or an
  aggregate (TPC-H Q13's ``c_orders``, Q15's ``revenue0``);
- the body of an ``IN`` subquery that itself holds subquery predicates (TPC-H Q20): the
  predicate reads ``SELECT <column> FROM <stage>``;
- a decorrelated scalar subquery: the WHERE conjunct
  ``x <op> (SELECT agg FROM ... WHERE inner.c = outer.c AND <local filters>)`` whose
  ``agg`` is NULL on no rows (arithmetic over SUM / AVG / MIN / MAX, not COUNT) becomes the
  inner join of the stage ``SELECT inner.c AS __smv_k0, agg AS __smv_v FROM ... WHERE
  <local filters> GROUP BY inner.c`` on ``__smv_k0 = outer.c AND x <op> __smv_v`` (TPC-H
  Q17): exact, as a NULL comparison drops the row either way. Only tried when the query
  above is not maintained with the subquery in place.

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
WHERE t.k = u.k AND t.q < __smv_stage_1.__smv_v
>>> stages[0][1].sql()
'SELECT i.k AS __smv_k0, 0.5 * AVG(q) AS __smv_v FROM t AS i WHERE i.z > 0 GROUP BY i.k'
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator
from dataclasses import replace

from sqlglot import exp

from sparkmv.analysis.constructs import is_aggregate, output_name
from sparkmv.analysis.ivm import IvmAnalysis, Stage
from sparkmv.analysis.keyed import inline_ctes
from sparkmv.analysis.query import DIALECT, parse_query
from sparkmv.analysis.subqueries import conjunct_of, predicates, subquery_body

STAGE_PREFIX = "__smv_stage_"
"""Prefix of the table name of an inner stage's virtual input."""
STAGE_KEY = "__smv_k"
STAGE_VALUE = "__smv_v"

_NULL_ON_EMPTY = (exp.Sum, exp.Avg, exp.Min, exp.Max)
_ARITHMETIC = (exp.Add, exp.Sub, exp.Mul, exp.Div, exp.Neg, exp.Paren, exp.Literal, exp.Cast)
_COMPARISONS = (exp.LT, exp.LTE, exp.GT, exp.GTE, exp.EQ, exp.NEQ)


def split_stages(
    query: exp.Query, counter: Iterator[int] | None = None
) -> tuple[exp.Query, list[tuple[str, exp.Query]]]:
    """``query`` (a copy, CTEs inlined) with its inner stages replaced by references to
    their virtual inputs, and the stages (name, body) in the order found; no stage found:
    an empty list. A body holding the same SQL twice (Q15's ``revenue0``) is one stage.

    ``counter`` numbers the stages (shared by nested splits, so names are unique in a tree).
    """
    counter = counter if counter is not None else itertools.count(1)
    inlined = inline_ctes(query)
    if isinstance(inlined, str) or not isinstance(inlined, exp.Select):
        return query.copy(), []
    stages: dict[str, tuple[str, exp.Query]] = {}

    def stage_of(body: exp.Query) -> str:
        sql = body.sql()
        if sql not in stages:
            stages[sql] = (f"{STAGE_PREFIX}{next(counter)}", body)
        return stages[sql][0]

    for derived in _nonlinear_derived(inlined):
        alias = derived.alias or stage_of(derived.this)
        derived.replace(exp.alias_(exp.to_table(stage_of(derived.this)), alias, table=True))
    for predicate in predicates(inlined):
        if isinstance(predicate, exp.In) and _nested(predicate):
            body = subquery_body(predicate)
            assert isinstance(body, exp.Select)
            column = output_name(body.expressions[0])
            name = stage_of(body.copy())
            predicate.set("query", exp.Subquery(this=exp.select(column).from_(name)))
    if not stages:
        for predicate in predicates(inlined):
            _decorrelate(inlined, predicate, stage_of)
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
        stack.extend(reversed(list(node.iter_expressions())))
    return found


def _nonlinear(select: exp.Select) -> bool:
    return (
        select.args.get("group") is not None
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


def _decorrelate(select: exp.Select, predicate: exp.Expr, stage_of: Callable[[exp.Query], str]) -> None:
    """Replace the WHERE conjunct ``x <op> (<correlated scalar subquery>)`` by an inner
    join with the subquery's decorrelated stage (module docstring); leave it when it does
    not have that shape."""
    comparison = conjunct_of(predicate)
    if not isinstance(predicate, exp.Subquery) or not isinstance(comparison, _COMPARISONS):
        return
    if predicate.parent is not comparison or conjunct_of(comparison) is None:
        return
    body = predicate.this
    shape = _correlated_shape(body) if isinstance(body, exp.Select) else None
    if shape is None:
        return
    inner, outer, local = shape
    stage = exp.select(*[exp.alias_(c.copy(), f"{STAGE_KEY}{i}") for i, c in enumerate(inner)])
    stage.select(exp.alias_(body.expressions[0].unalias().copy(), STAGE_VALUE), copy=False)
    stage.set("from_", body.args["from_"].copy())
    stage.set("joins", [j.copy() for j in body.args.get("joins") or []] or None)
    for condition in local:
        stage.where(condition.copy(), copy=False, append=True)
    stage.group_by(*[c.copy() for c in inner], copy=False)
    name = stage_of(stage)
    on = [exp.EQ(this=exp.column(f"{STAGE_KEY}{i}", table=name), expression=o.copy()) for i, o in enumerate(outer)]
    predicate.replace(exp.column(STAGE_VALUE, table=name))
    select.join(exp.to_table(name), on=exp.and_(*on), copy=False)


def _correlated_shape(body: exp.Select) -> tuple[list[exp.Column], list[exp.Column], list[exp.Expr]] | None:
    """For a scalar subquery of one aggregate expression NULL on no rows (no GROUP BY,
    HAVING, DISTINCT, nested subquery): its correlated columns (inner, outer, paired) and
    its local filters; None for any other shape or when it is not correlated."""
    if len(body.expressions) != 1 or any(body.args.get(a) for a in ("group", "having", "distinct", "qualify")):
        return None
    if predicates(body) or body.args.get("from_") is None or not _null_on_empty(body.expressions[0].unalias()):
        return None
    names = {s.alias_or_name.lower() for s in _sources(body)}
    where = body.args.get("where")
    conjuncts = list(where.this.flatten()) if where is not None and isinstance(where.this, exp.And) else []
    conjuncts = conjuncts or ([where.this] if where is not None else [])
    inner: list[exp.Column] = []
    outer: list[exp.Column] = []
    local: list[exp.Expr] = []
    for conjunct in conjuncts:
        pair = _correlation(conjunct, names)
        if pair is not None:
            inner.append(pair[0])
            outer.append(pair[1])
        elif any(c.table and c.table.lower() not in names for c in conjunct.find_all(exp.Column)):
            return None  # an outer reference outside an equality
        else:
            local.append(conjunct)
    return (inner, outer, local) if inner else None


def _sources(body: exp.Select) -> list[exp.Expr]:
    from_ = body.args["from_"]
    return [from_.this, *[j.this for j in body.args.get("joins") or []]]


def _null_on_empty(expr: exp.Expr) -> bool:
    """Arithmetic over SUM / AVG / MIN / MAX calls (at least one): NULL over no rows."""
    calls = [n for n in expr.dfs() if isinstance(n, _NULL_ON_EMPTY)]
    if not calls:
        return False
    inside = {id(n) for c in calls for n in c.dfs() if n is not c}
    for node in expr.dfs():
        if id(node) in inside or isinstance(node, (*_NULL_ON_EMPTY, exp.DataType)):
            continue
        if not isinstance(node, _ARITHMETIC):
            return False
    return not any(is_aggregate(n) for c in calls for n in c.dfs() if n is not c)


def _correlation(conjunct: exp.Expr, names: set[str]) -> tuple[exp.Column, exp.Column] | None:
    """``(inner, outer)`` of an equality of two columns, one of the subquery (qualified by
    one of its table ``names``, or unqualified) and one of the outer query (qualified by
    another name, or the right one of two unqualified columns); else None."""
    if not isinstance(conjunct, exp.EQ):
        return None
    left, right = conjunct.this, conjunct.expression
    if not isinstance(left, exp.Column) or not isinstance(right, exp.Column):
        return None

    def side(c: exp.Column) -> str:
        return "u" if not c.table else "i" if c.table.lower() in names else "o"

    kinds = side(left) + side(right)
    if kinds in ("io", "uo", "uu"):
        return left, right
    if kinds in ("oi", "ou"):
        return right, left
    return None


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


def staged_analysis(query: exp.Query, analyze: Analyze, keyed: Analyze) -> IvmAnalysis | None:
    """The analysis of ``query`` split into stages: the query above (``analyze``: the
    whole-query analysis, delta rules or affected-key recomputation) over its inner stages
    (each by affected-key recomputation, ``keyed``, split again when it is not maintained
    whole); None when the query has no inner stage, else the analysis or the first reason."""
    return _staged(query, analyze, keyed, itertools.count(1))


def _staged(query: exp.Query, analyze: Analyze, keyed: Analyze, counter: Iterator[int]) -> IvmAnalysis | None:
    outer, found = split_stages(query, counter)
    if not found:
        return None
    stages = []
    for name, body in found:
        inner = _stage_analysis(body, keyed, counter)
        if inner.reason is not None:
            return IvmAnalysis(f"inner stage {name}: {inner.reason}", False, (), (), query.sql(DIALECT))
        stages.append(Stage(name, inner))
    top = analyze(outer)
    if top.reason is not None:
        return replace(top, augmented_sql=query.sql(DIALECT))
    bodies = {s.name: s.analysis.augmented_sql for s in stages}
    whole = inline_stages(parse_query(top.augmented_sql), bodies).sql(DIALECT)
    return replace(top, augmented_sql=whole, staged_sql=top.augmented_sql, stages=tuple(stages))


def _stage_analysis(body: exp.Query, keyed: Analyze, counter: Iterator[int]) -> IvmAnalysis:
    """An inner stage by affected-key recomputation (its touched keys make its delta),
    split into stages itself when it is not maintained whole."""
    whole = keyed(body)
    if whole.reason is None:
        return whole
    staged = _staged(body, keyed, keyed, counter)
    return whole if staged is None else staged
