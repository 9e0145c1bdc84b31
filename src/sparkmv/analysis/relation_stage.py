"""A global aggregate over an outer join reads the join as an inner stage.

The delta rules maintain an aggregate over inner joins; an outer join's padded rows are not
linear in its null-supplying side. Affected-key recomputation maintains an outer join in a
query's own FROM (:mod:`sparkmv.analysis.outer`), keyed by the GROUP BY keys, or by every
column for a projection; a global aggregate has no key to recompute by but the whole. So
the aggregate is split at its relation (DBSP's chain rule over the two operators): the
columns its select list reads, over the FROM, joins and WHERE as written, grouped with their
multiplicity ``count(*)``, are an inner stage maintained by affected-key recomputation of
its groups (TPC-DS q97: ``ssci FULL OUTER JOIN csci``), and the aggregate above it is kept
by the delta rules from the stage's signed changes, each row weighted by its multiplicity:
``sum(e)`` is ``sum(e * n)``, ``count(e)`` the sum of ``n`` where ``e`` is not NULL,
``min`` / ``max`` unchanged (other aggregates are not split).

>>> from sparkmv.analysis.query import parse_query
>>> print(split_outer_relation(parse_query(
...     "SELECT sum(CASE WHEN a.k IS NULL THEN 1 ELSE 0 END) AS n, count(b.v) AS c "
...     "FROM a FULL OUTER JOIN b ON a.k = b.k")).sql())
SELECT SUM((CASE WHEN __smv_rel.__smv_c0 IS NULL THEN 1 ELSE 0 END) * __smv_rel.__smv_weight) AS n, \
COALESCE(SUM(CASE WHEN NOT __smv_rel.__smv_c1 IS NULL THEN __smv_rel.__smv_weight ELSE 0 END), 0) AS c \
FROM (SELECT a.k AS __smv_c0, b.v AS __smv_c1, COUNT(*) AS __smv_weight FROM a FULL OUTER JOIN b ON a.k = b.k \
GROUP BY a.k, b.v) AS __smv_rel
"""

from __future__ import annotations

from sqlglot import exp

from sparkmv.analysis.constructs import is_aggregate, under_aggregate

ALIAS = "__smv_rel"


def split_outer_relation(query: exp.Query) -> exp.Query | None:
    """``query`` (a copy) as its aggregate over the stage of its relation's projection
    (module docstring), when it is a SELECT aggregating without GROUP BY (nor HAVING,
    DISTINCT, window) over an outer join, and every column of its select list is qualified
    and inside an aggregate; else None."""
    if not isinstance(query, exp.Select) or not _is_global_aggregate(query):
        return None
    joins = query.args.get("joins") or []
    if not any((j.side or "").upper() in ("LEFT", "RIGHT", "FULL") for j in joins):
        return None
    columns: dict[str, str] = {}
    outer = query.copy()
    for column in [c for item in outer.expressions for c in item.find_all(exp.Column)]:
        if not column.table or not under_aggregate(column):
            return None
        name = columns.setdefault(column.sql(), f"__smv_c{len(columns)}")
        column.replace(exp.column(name, ALIAS))
    calls = [n for item in outer.expressions for n in item.find_all(exp.AggFunc)]
    weighted = [_weighted(call) for call in calls]
    if not columns or any(w is None for w in weighted):
        return None
    for call, replacement in zip(calls, weighted, strict=True):
        call.replace(replacement)
    items = [exp.alias_(exp.to_column(sql), name) for sql, name in columns.items()]
    inner = exp.select(*items, exp.alias_(exp.Count(this=exp.Star()), "__smv_weight"))
    inner.set("from_", query.args["from_"].copy())
    inner.set("joins", [j.copy() for j in joins])
    if query.args.get("where") is not None:
        inner.set("where", query.args["where"].copy())
    inner.set("group", exp.Group(expressions=[exp.to_column(sql) for sql in columns]))
    outer.set("joins", None)
    outer.set("where", None)
    outer.set("from_", exp.From(this=exp.Subquery(this=inner, alias=exp.TableAlias(this=exp.to_identifier(ALIAS)))))
    return outer


def _weighted(call: exp.Expr) -> exp.Expr | None:
    """The aggregate ``call`` over the stage's rows weighted by their multiplicity."""
    weight = exp.column("__smv_weight", ALIAS)
    argument = call.this
    if isinstance(argument, exp.Distinct) or any(is_aggregate(n) for n in argument.walk()):
        return None  # a DISTINCT or a nested aggregate
    if isinstance(call, (exp.Min, exp.Max)):
        return call.copy()
    if isinstance(call, exp.Sum):
        return exp.Sum(this=exp.Mul(this=exp.paren(argument.copy()), expression=weight))
    if isinstance(call, exp.Count):
        if isinstance(argument, exp.Star):
            return exp.Coalesce(this=exp.Sum(this=weight), expressions=[exp.Literal.number(0)])
        present = exp.If(this=exp.Not(this=exp.Is(this=argument.copy(), expression=exp.Null())), true=weight)
        case = exp.Case(ifs=[present], default=exp.Literal.number(0))
        return exp.Coalesce(this=exp.Sum(this=case), expressions=[exp.Literal.number(0)])
    return None


def _is_global_aggregate(select: exp.Select) -> bool:
    """An aggregate select list without GROUP BY, HAVING, DISTINCT, QUALIFY or window."""
    if any(select.args.get(a) for a in ("group", "having", "distinct", "qualify")) or select.find(exp.Window):
        return False
    return select.args.get("from_") is not None and all(
        any(is_aggregate(n) for n in item.walk()) for item in select.expressions
    )
