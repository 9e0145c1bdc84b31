"""A DISTINCT aggregate as an aggregate over an inner GROUP BY of its argument.

``count(DISTINCT e)`` needs every earlier value of ``e`` (a delete may remove the last row
holding one), so the delta rules do not maintain it. But a SELECT whose DISTINCT aggregates
all read the one expression ``e`` (Spark's single distinct group, rewritten the same way by
its ``RewriteDistinctAggregates``) means the same as the aggregate over the rows of its
relation grouped by its own keys and ``e``:

    SELECT g, count(DISTINCT e), sum(a), count(b), min(c) FROM R GROUP BY g
    = SELECT g, count(d), sum(s), coalesce(sum(n), 0), min(m)
      FROM (SELECT g, e AS d, sum(a) AS s, count(b) AS n, min(c) AS m FROM R GROUP BY g, e)
      GROUP BY g

(``count(d)`` skips the NULL group as ``count(DISTINCT e)`` skips NULL; a count is the sum
of the inner counts, 0 for no rows). The inner GROUP BY is an aggregate stage the delta rules
maintain (:mod:`sparkmv.analysis.stages`); the outer one reads the stage's changed rows.
Only ``sum``, ``count``, ``min`` and ``max`` besides the DISTINCT ones (``avg`` would change
its result type); the select list's other columns must be GROUP BY keys.

>>> from sparkmv.analysis.query import parse_query
>>> print(split_distinct_aggregates(parse_query(
...     "SELECT k, count(DISTINCT o) AS n, sum(x) AS s, count(*) AS c FROM t WHERE y > 0 GROUP BY k")).sql())
SELECT __smv_dist.__smv_g0 AS k, COUNT(__smv_dist.__smv_d) AS n, SUM(__smv_dist.__smv_a1) AS s, \
COALESCE(SUM(__smv_dist.__smv_a2), 0) AS c FROM (SELECT k AS __smv_g0, o AS __smv_d, SUM(x) AS __smv_a1, \
COUNT(*) AS __smv_a2 FROM t WHERE y > 0 GROUP BY k, o) AS __smv_dist GROUP BY __smv_dist.__smv_g0
>>> split_distinct_aggregates(parse_query("SELECT count(DISTINCT a), count(DISTINCT b) FROM t")) is None
True
"""

from __future__ import annotations

from sqlglot import exp

from sparkmv.analysis.constructs import is_aggregate, under_aggregate

ALIAS = "__smv_dist"
_PLAIN = (exp.Sum, exp.Count, exp.Min, exp.Max)


def has_distinct_aggregate(query: exp.Query) -> bool:
    """True when the top SELECT of ``query`` (after its CTEs) calls a DISTINCT aggregate."""
    return isinstance(query, exp.Select) and bool(_distinct_calls(query))


def split_distinct_aggregates(query: exp.Query) -> exp.Query | None:
    """``query`` (a copy) with its top SELECT's aggregates read from the inner GROUP BY of
    its keys and its one DISTINCT argument (module docstring); None when it has no DISTINCT
    aggregate, several DISTINCT arguments, another aggregate than ``sum`` / ``count`` /
    ``min`` / ``max``, a HAVING, a window or a column outside both."""
    if not isinstance(query, exp.Select) or any(query.args.get(a) for a in ("having", "qualify", "distinct")):
        return None
    calls = _distinct_calls(query)
    arguments = {c.this.expressions[0].sql() for c in calls if len(c.this.expressions) == 1}
    if not calls or len(arguments) != 1 or any(not isinstance(c, exp.Count) for c in calls):
        return None
    if query.find(exp.Window) is not None:
        return None
    group = query.args.get("group")
    keys = list(group.expressions) if group is not None else []
    if group is not None and any(group.args.get(a) for a in ("rollup", "cube", "grouping_sets", "all")):
        return None
    aliases = {i.alias.lower() for i in query.expressions if isinstance(i, exp.Alias)}
    if any(isinstance(k, exp.Literal) or _is_alias(k, aliases) for k in keys):
        return None  # an ordinal, or an output alias the inner SELECT does not have
    inner = exp.select().from_(query.args["from_"].this.copy()) if query.args.get("from_") else None
    if inner is None:
        return None
    return _split(query, inner, keys, calls[0].this.expressions[0])


def _split(query: exp.Select, inner: exp.Select, keys: list[exp.Expr], argument: exp.Expr) -> exp.Query | None:
    """The rewrite of :func:`split_distinct_aggregates` once its shape is checked."""
    for join in query.args.get("joins") or []:
        inner = inner.join(join.copy())
    if query.args.get("where") is not None:
        inner.set("where", query.args["where"].copy())
    key_names = {}
    for i, key in enumerate(keys):
        inner = inner.select(exp.alias_(key.copy(), f"__smv_g{i}"), copy=False)
        key_names[key.sql()] = f"__smv_g{i}"
    inner = inner.select(exp.alias_(argument.copy(), "__smv_d"), copy=False)
    outer = query.copy()
    partials: list[exp.Expr] = []
    for item in outer.expressions:
        if _lift(item, key_names, partials) is None:
            return None
    for i, partial in enumerate(partials, 1):
        inner = inner.select(exp.alias_(partial, f"__smv_a{i}"), copy=False)
    inner.set("group", exp.Group(expressions=[k.copy() for k in keys] + [argument.copy()]))
    for arg in ("joins", "where", "group"):
        outer.set(arg, None)
    outer.set("from_", exp.From(this=exp.Subquery(this=inner, alias=exp.TableAlias(this=exp.to_identifier(ALIAS)))))
    if keys:
        outer.set("group", exp.Group(expressions=[exp.column(key_names[k.sql()], ALIAS) for k in keys]))
    return outer


def _lift(item: exp.Expr, key_names: dict[str, str], partials: list[exp.Expr]) -> exp.Expr | None:
    """Rewrite one select item in place over the inner GROUP BY; None when it cannot be."""
    body = item.this if isinstance(item, exp.Alias) else item
    if isinstance(item, exp.Column):  # keep its name: the item becomes an aliased column
        name = key_names.get(item.sql())
        if name is None:
            return None
        item.replace(exp.alias_(exp.column(name, ALIAS), item.name))
        return item
    for node in list(body.walk()):
        if under_aggregate(node, body):
            continue  # its aggregate is lifted whole
        if is_aggregate(node):
            lifted = _lift_call(node, partials)
            if lifted is None:
                return None
            if node is body:
                item.set("this", lifted)
            else:
                node.replace(lifted)
        elif isinstance(node, exp.Column) and node.find_ancestor(exp.AggFunc) is None:
            name = key_names.get(node.sql())
            if name is None:
                return None
            node.replace(exp.column(name, ALIAS))
    return item


def _is_alias(key: exp.Expr, aliases: set[str]) -> bool:
    """True for an unqualified GROUP BY key named as an output alias."""
    return isinstance(key, exp.Column) and not key.table and key.name.lower() in aliases


def _lift_call(call: exp.Expr, partials: list[exp.Expr]) -> exp.Expr | None:
    """The outer aggregate reading the inner partial of ``call``."""
    if isinstance(call, exp.Count) and isinstance(call.this, exp.Distinct):
        return exp.Count(this=exp.column("__smv_d", ALIAS))
    if not isinstance(call, _PLAIN) or call.find(exp.Distinct) is not None:
        return None
    partials.append(call.copy())
    column = exp.column(f"__smv_a{len(partials)}", ALIAS)
    if isinstance(call, exp.Count):
        return exp.Coalesce(this=exp.Sum(this=column), expressions=[exp.Literal.number(0)])
    return type(call)(this=column)


def _distinct_calls(select: exp.Select) -> list[exp.Expr]:
    """The DISTINCT aggregate calls of ``select``'s own select list."""
    return [
        node
        for item in select.expressions
        for node in item.find_all(exp.AggFunc)
        if isinstance(node.this, exp.Distinct)
    ]
