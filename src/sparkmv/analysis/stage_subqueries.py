"""Subquery predicates as inner stages (:mod:`sparkmv.analysis.stages`): a correlated scalar
subquery decorrelated into the inner join of its grouped stage (TPC-H Q17), and an ``EXISTS``
/ ``IN`` semi-join into the inner join of its stage of distinct keys (TPC-H Q4, Q18).

Which column of a correlation is the subquery's is read from the qualifiers: a column
qualified by a table of the subquery is its, one qualified by another name the outer
query's; of two unqualified columns the left one is the subquery's (as TPC-H writes them:
``l_partkey = p_partkey``), without a schema to tell.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence

from sqlglot import exp

from sparkmv.analysis.constructs import is_aggregate
from sparkmv.analysis.query import table_name
from sparkmv.analysis.subqueries import conjunct_of, in_keyed, predicates, subquery_body
from sparkmv.errors import SparkMvError

STAGE_KEY = "__smv_k"
STAGE_VALUE = "__smv_v"
_NULL_ON_EMPTY = (exp.Sum, exp.Avg, exp.Min, exp.Max)
_ARITHMETIC = (exp.Add, exp.Sub, exp.Mul, exp.Div, exp.Neg, exp.Paren, exp.Literal, exp.Cast)
_COMPARISONS = (exp.LT, exp.LTE, exp.GT, exp.GTE, exp.EQ, exp.NEQ)


Known = Mapping[str, Collection[str]]
"""The base tables' column names (qualified table name -> names), which tell a correlated
subquery's columns from the outer query's."""


def decorrelate(
    select: exp.Select, predicate: exp.Expr, stage_of: Callable[[exp.Query], str], known: Known | None
) -> None:
    """Replace the WHERE conjunct ``x <op> (<correlated scalar subquery>)`` by an inner
    join with the subquery's decorrelated stage (module docstring); leave it when it does
    not have that shape."""
    comparison = conjunct_of(predicate)
    if not isinstance(predicate, exp.Subquery) or not isinstance(comparison, _COMPARISONS):
        return
    if predicate.parent is not comparison or conjunct_of(comparison) is None:
        return
    body = predicate.this
    shape = _correlated_shape(body, known) if isinstance(body, exp.Select) else None
    if shape is None:
        return
    inner, outer, local = shape
    stage = _stage_body(body, inner, local)
    value = body.expressions[0].unalias().copy()
    calls = [n for n in value.dfs() if isinstance(n, _NULL_ON_EMPTY) and n.find_ancestor(*_NULL_ON_EMPTY) is None]
    if isinstance(value, _NULL_ON_EMPTY):
        calls = []
    for j, call in enumerate(calls):  # arithmetic over calls: the calls are the stage's values
        stage.select(exp.alias_(call.copy(), f"{STAGE_VALUE}{j}"), copy=False)
    if not calls:
        stage.select(exp.alias_(value, STAGE_VALUE), copy=False)
    stage.group_by(*[c.copy() for c in inner], copy=False)
    name = stage_of(stage)
    for j, call in enumerate(calls):
        call.replace(exp.column(f"{STAGE_VALUE}{j}", table=name))
    predicate.replace(exp.paren(value, copy=False) if calls else exp.column(STAGE_VALUE, table=name))
    _join_stage(select, name, outer)


def _stage_body(body: exp.Select, keys: Sequence[exp.Expr], local: Sequence[exp.Expr]) -> exp.Select:
    """A stage's SELECT: ``keys`` as ``__smv_k<i>`` over ``body``'s FROM and JOINs, filtered
    by its ``local`` conjuncts (copies)."""
    stage = exp.select(*[exp.alias_(c.copy(), f"{STAGE_KEY}{i}") for i, c in enumerate(keys)])
    stage.set("from_", body.args["from_"].copy())
    stage.set("joins", [j.copy() for j in body.args.get("joins") or []] or None)
    for condition in local:
        stage.where(condition.copy(), copy=False, append=True)
    return stage


def _join_stage(select: exp.Select, name: str, outer: Sequence[exp.Expr]) -> None:
    """Inner-join stage ``name`` to ``select`` on ``__smv_k<i> = outer[i]``."""
    on = [exp.EQ(this=exp.column(f"{STAGE_KEY}{i}", table=name), expression=o.copy()) for i, o in enumerate(outer)]
    select.join(exp.to_table(name), on=exp.and_(*on), copy=False)


Shape = tuple[list[exp.Column], list[exp.Column], list[exp.Expr]]


def _correlated_shape(body: exp.Select, known: Known | None) -> Shape | None:
    """For a scalar subquery of one aggregate expression NULL on no rows (no GROUP BY,
    HAVING, DISTINCT, nested subquery): its correlated columns (inner, outer, paired) and
    its local filters; None for any other shape or when it is not correlated."""
    if len(body.expressions) != 1 or any(body.args.get(a) for a in ("group", "having", "distinct", "qualify")):
        return None
    if predicates(body) or body.args.get("from_") is None or not _null_on_empty(body.expressions[0].unalias()):
        return None
    shape = _correlations(body, known, guess=not known)
    return shape if shape is not None and shape[0] else None


def _correlations(body: exp.Select, known: Known | None, guess: bool) -> Shape | None:
    """The correlated columns of ``body``'s WHERE (inner, outer, paired: equalities of an
    inner and an outer column) and its local filters; None when an outer column stands
    anywhere else, or when an unqualified column's side is unknown and ``guess`` is False."""
    names = {s.alias_or_name.lower() for s in select_sources(body)}
    inner_names = source_columns(body, known)
    if inner_names is not None:  # every unqualified column resolved by the schema
        body = body.copy()
        for column in body.find_all(exp.Column):
            if not column.table and column.name.lower() not in inner_names:
                column.set("table", exp.to_identifier(_OUTER))
    where = body.args.get("where")
    conjuncts = list(where.this.flatten()) if where is not None and isinstance(where.this, exp.And) else []
    conjuncts = conjuncts or ([where.this] if where is not None else [])
    if inner_names is None and not guess:
        if any(_correlation(c, names) is not None and _unqualified(c) for c in conjuncts):
            return None
    inner: list[exp.Column] = []
    outer: list[exp.Column] = []
    local: list[exp.Expr] = []
    for conjunct in conjuncts:
        pair = _correlation(conjunct, names, resolved=inner_names is not None)
        if pair is not None:
            inner.append(pair[0])
            outer.append(_unmarked(pair[1]))
        elif any(c.table and c.table.lower() not in names for c in conjunct.find_all(exp.Column)):
            return None  # an outer reference outside an equality
        else:
            local.append(conjunct)
    return inner, outer, local


_OUTER = "__smv_outer"
"""A qualifier marking an unqualified column the schema places in the outer query
(removed again from the outer columns returned)."""


def _unmarked(column: exp.Column) -> exp.Column:
    return exp.column(column.name) if column.table == _OUTER else column


def _unqualified(conjunct: exp.Expr) -> bool:
    return any(not c.table for c in conjunct.find_all(exp.Column))


def source_columns(body: exp.Select, known: Known | None) -> set[str] | None:
    """The column names of ``body``'s FROM and JOIN tables (lower case), from ``known``;
    None when a source is not a base table ``known`` has."""
    if not known:
        return None
    lowered = {name.lower(): {c.lower() for c in cols} for name, cols in known.items()}
    out: set[str] = set()
    for source in select_sources(body):
        if not isinstance(source, exp.Table):
            return None
        try:
            cols = lowered.get(table_name(source).qualified.lower())
        except SparkMvError:
            return None
        if cols is None:
            return None
        out |= cols
    return out


def semijoin(
    select: exp.Select, predicate: exp.Expr, stage_of: Callable[[exp.Query], str], known: Known | None
) -> None:
    """Replace the WHERE conjunct ``EXISTS (<correlated SELECT>)`` or ``x IN (SELECT y ...)``
    by an inner join with the subquery's stage of distinct keys (module docstring): the
    correlated inner columns (and ``y``) as ``__smv_k<i>``, joined on equality with the outer
    columns (and ``x``). Exact: a row passes the semi-join iff some subquery row matches it,
    and a NULL ``x`` or outer column matches none either way. Left as it is for any other
    shape (negated, under OR, in HAVING, an aggregate or GROUP BY other than by ``y``
    alone, an uncorrelated EXISTS)."""
    where = select.args.get("where")
    if not isinstance(predicate, exp.Exists | exp.In) or where is None or conjunct_of(predicate) is not predicate:
        return
    if predicate.find_ancestor(exp.Where) is not where or predicate.find_ancestor(exp.Select) is not select:
        return
    body = subquery_body(predicate)
    if not isinstance(body, exp.Select) or body.args.get("from_") is None or predicates(body):
        return
    if any(body.args.get(a) for a in ("limit", "offset", "order", "qualify")):
        return
    shape = _correlations(body, known, guess=False)
    keys = _semijoin_keys(predicate, body, shape)
    if shape is None or keys is None:
        return
    inner, outer, local = shape
    stage = _stage_body(body, [*keys[0], *inner], local)
    if body.args.get("group") is not None:
        stage.set("group", body.args["group"].copy())
        stage.set("having", body.args["having"].copy() if body.args.get("having") else None)
    else:
        stage.distinct(copy=False)
    name = stage_of(stage)
    _drop_conjunct(select, predicate)
    _join_stage(select, name, [*keys[1], *outer])


def _semijoin_keys(
    predicate: exp.Expr, body: exp.Select, shape: Shape | None
) -> tuple[list[exp.Expr], list[exp.Expr]] | None:
    """The stage's keys besides the correlated columns (``[y]``, ``[x]`` of an ``IN``; none
    for ``EXISTS``); None when the subquery is not a semi-join of that kind."""
    if shape is None:
        return None
    grouped = body.args.get("group")
    aggregated = any(is_aggregate(n) for e in body.expressions for n in e.dfs())
    if isinstance(predicate, exp.Exists):
        if not shape[0] or grouped is not None or body.args.get("having") or aggregated:
            return None
        return [], []
    if len(body.expressions) != 1 or aggregated:
        return None
    column = body.expressions[0].unalias()
    if not in_keyed(column, grouped) or (grouped is not None and shape[0]):
        return None
    if grouped is None and body.args.get("having"):
        return None
    return [column], [predicate.this]


def _drop_conjunct(select: exp.Select, conjunct: exp.Expr) -> None:
    """Remove the conjunct ``conjunct`` (under ANDs and parentheses) from ``select``'s WHERE."""
    conjunct.replace(exp.true())
    leaves: list[exp.Expr] = []
    stack: list[exp.Expr] = [select.args["where"].this]
    while stack:
        node = stack.pop()
        if isinstance(node, exp.And):
            stack.extend([node.expression, node.this])
        elif isinstance(node, exp.Paren) and isinstance(node.this, exp.And | exp.Paren | exp.Boolean):
            stack.append(node.this)
        elif not (isinstance(node, exp.Boolean) and node.this is True):
            leaves.append(node)
    select.set("where", exp.Where(this=exp.and_(*leaves, copy=False)) if leaves else None)


def select_sources(body: exp.Select) -> list[exp.Expr]:
    """The FROM and JOIN sources of ``body`` (none without a FROM)."""
    from_ = body.args.get("from_")
    return ([from_.this] if from_ is not None else []) + [j.this for j in body.args.get("joins") or []]


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


def _correlation(conjunct: exp.Expr, names: set[str], resolved: bool = False) -> tuple[exp.Column, exp.Column] | None:
    """``(inner, outer)`` of an equality of two columns, one of the subquery (qualified by
    one of its table ``names``, or unqualified) and one of the outer query (qualified by
    another name, or the right one of two unqualified columns; when ``resolved``, an
    unqualified column is the subquery's); else None."""
    if not isinstance(conjunct, exp.EQ):
        return None
    left, right = conjunct.this, conjunct.expression
    if not isinstance(left, exp.Column) or not isinstance(right, exp.Column):
        return None

    def side(c: exp.Column) -> str:
        if not c.table:
            return "i" if resolved else "u"
        return "i" if c.table.lower() in names else "o"

    kinds = side(left) + side(right)
    if kinds in ("io", "uo", "uu"):
        return left, right
    if kinds in ("oi", "ou"):
        return right, left
    return None
