"""``GROUP BY ROLLUP / CUBE / GROUPING SETS`` as the ``UNION ALL`` of one GROUP BY per set.

A SELECT grouped by grouping sets returns, for each set, the rows of the same SELECT grouped
by that set alone, the keys outside it NULL, ``grouping(x)`` 1 for such a key and 0 for the
others, ``grouping_id(...)`` those bits read as a number (Spark's definition, also the SQL
standard's). So it means the ``UNION ALL`` of those SELECTs (their HAVING rewritten alike),
whose branches the stages of :mod:`sparkmv.analysis.stages` maintain one by one; a key
column that is NULL in the data makes a group of its own in both forms. The branch of the
largest set comes first, so the union's columns take their names and types from a SELECT
without NULL keys (Spark widens a NULL literal to the other branches' type).

Windows over the sets' rows read the union: the SELECT becomes the windows over it, each
window's inputs columns of the union (:func:`_windowed_union`). A SELECT DISTINCT is left
as it is, as is a GROUP BY mixing sets with ``WITH ROLLUP`` / ``WITH CUBE`` (MySQL's
spelling).

>>> from sparkmv.analysis.query import parse_query
>>> print(expand_grouping_sets(parse_query(
...     "SELECT a, b, sum(x) AS s, grouping(b) AS g FROM t WHERE x > 0 GROUP BY ROLLUP (a, b)")).sql())
SELECT a, b, SUM(x) AS s, CAST(0 AS TINYINT) AS g FROM t WHERE x > 0 GROUP BY a, b \
UNION ALL SELECT a, NULL AS b, SUM(x) AS s, CAST(1 AS TINYINT) AS g FROM t WHERE x > 0 GROUP BY a \
UNION ALL SELECT NULL AS a, NULL AS b, SUM(x) AS s, CAST(1 AS TINYINT) AS g FROM t WHERE x > 0
"""

from __future__ import annotations

import itertools
from collections.abc import Callable

from sqlglot import exp

from sparkmv.analysis.constructs import _same, is_aggregate, unparen
from sparkmv.analysis.keyed import inline_ctes

_SETS = (exp.Rollup, exp.Cube, exp.GroupingSets)
UNION_ALIAS = "__smv_sets"
WINDOW_INPUT = "__smv_w"
_STRUCTURE = (exp.Order, exp.Ordered, exp.WindowSpec)
"""Parts of a window that are not expressions of their own: their children are lifted."""
"""Prefix of the union's columns that only a window over it reads."""


def has_grouping_sets(query: exp.Query) -> bool:
    """True when a SELECT of ``query`` groups by ROLLUP, CUBE or GROUPING SETS."""
    return any(isinstance(key, _SETS) for group in query.find_all(exp.Group) for key in group.expressions)


def expand_grouping_sets(query: exp.Query) -> exp.Query:
    """``query`` (a copy; CTEs inlined when it has grouping sets) with each SELECT grouped
    by grouping sets replaced by its ``UNION ALL`` (module docstring); unchanged, as a copy,
    when none can be. Raises nothing."""
    if not has_grouping_sets(query):
        return query.copy()
    inlined = inline_ctes(query)
    if isinstance(inlined, str):
        return query.copy()
    out: exp.Query = inlined
    selects = [s for s in out.find_all(exp.Select) if has_grouping_sets_here(s)]
    for select in reversed(selects):  # innermost first
        union = _as_union(select)
        if union is None:
            continue
        if select is out:
            out = union
        else:
            select.replace(union)
    return out


def has_grouping_sets_here(select: exp.Select) -> bool:
    """True when ``select`` itself (not a subquery) groups by grouping sets."""
    group = select.args.get("group")
    return group is not None and any(isinstance(key, _SETS) for key in group.expressions)


def _as_union(select: exp.Select) -> exp.Query | None:
    group = select.args["group"]
    if select.args.get("distinct") or any(group.args.get(k) for k in ("rollup", "cube", "totals")):
        return None
    if any(w.find_ancestor(exp.Select) is select for w in select.find_all(exp.Window)):
        return _windowed_union(select)
    sets = grouping_sets_of(group)
    if sets is None:
        return None
    keys = _distinct([k for s in sets for k in s])
    branches = []
    for kept in sorted(sets, key=len, reverse=True):
        branch = select.copy()
        branch.set("group", exp.Group(expressions=[k.copy() for k in kept]) if kept else None)
        for arg in ("expressions", "having"):
            for root in _roots(branch, arg):
                _rewrite(root, keys, kept)
        branches.append(branch)
    union: exp.Query = branches[0]
    for branch in branches[1:]:
        union = exp.union(union, branch, distinct=False)
    return union


def _windowed_union(select: exp.Select) -> exp.Query | None:
    """A SELECT with grouping sets and windows over them (TPC-DS q36's ``rank() OVER
    (PARTITION BY grouping(a) + grouping(b), ... ORDER BY sum(x))``) as a SELECT of the
    windows over the union: each window's inputs (the per-group expressions it reads) are
    columns of the union, named as the select item they equal or ``__smv_w<i>``; None when
    a select item is unnamed."""
    if not all(isinstance(i, exp.Alias | exp.Column) for i in select.expressions):
        return None
    plain = [i for i in select.expressions if i.find(exp.Window) is None]
    named = {i.alias_or_name: i.unalias() for i in plain}
    hidden: list[exp.Expr] = []

    def column_for(expr: exp.Expr) -> exp.Expr:
        name = next((n for n, e in named.items() if _same(unparen(e), unparen(expr))), None)
        if name is None:
            name = f"{WINDOW_INPUT}{len(hidden)}"
            hidden.append(exp.alias_(expr.copy(), name))
            named[name] = expr
        return exp.column(name, table=UNION_ALIAS)

    items = []
    for item in select.expressions:
        if item.find(exp.Window) is None:
            items.append(exp.alias_(exp.column(item.alias_or_name, table=UNION_ALIAS), item.alias_or_name))
            continue
        copy = item.copy()
        _lift(copy, column_for)
        items.append(copy)
    inner = select.copy()
    inner.set("expressions", [i.copy() for i in plain] + hidden)
    union = _as_union(inner)
    if union is None:
        return None
    return exp.select(*items).from_(exp.Subquery(this=union, alias=exp.TableAlias(this=exp.to_identifier(UNION_ALIAS))))


def _lift(node: exp.Expr, column_for: Callable[[exp.Expr], exp.Expr]) -> None:
    """Replace (in place) each largest part of ``node`` without a window that reads a
    column by ``column_for(part)``; a window's function stays, its arguments are lifted."""
    for child in list(node.iter_expressions()):
        if (isinstance(node, exp.Window) and child is node.this) or isinstance(child, _STRUCTURE):
            _lift(child, column_for)
        elif child.find(exp.Window) is None:
            if child.find(exp.Column) is not None:
                child.replace(column_for(child))
        else:
            _lift(child, column_for)


def grouping_sets_of(group: exp.Group) -> list[list[exp.Expr]] | None:
    """The grouping sets of a GROUP BY (plain keys in every set; ROLLUP's prefixes; CUBE's
    subsets; the listed sets), each a list of key expressions; None when a key is neither
    (an ordinal or a nested set).

    >>> from sparkmv.analysis.query import parse_query
    >>> g = parse_query("SELECT 1 FROM t GROUP BY a, CUBE (b, c)").args["group"]
    >>> [[k.sql() for k in s] for s in grouping_sets_of(g)]
    [['a', 'b', 'c'], ['a', 'b'], ['a', 'c'], ['a']]
    """
    product: list[list[list[exp.Expr]]] = []
    for key in group.expressions:
        if isinstance(key, exp.Rollup):
            items = [unparen(e) for e in key.expressions]
            product.append([items[:n] for n in range(len(items), -1, -1)])
        elif isinstance(key, exp.Cube):
            items = [unparen(e) for e in key.expressions]
            subsets = [c for n in range(len(items), -1, -1) for c in itertools.combinations(items, n)]
            product.append([list(c) for c in subsets])
        elif isinstance(key, exp.GroupingSets):
            product.append([_set_items(s) for s in key.expressions])
        elif isinstance(key, exp.Literal) or isinstance(key, exp.Tuple):
            return None
        else:
            product.append([[unparen(key)]])
    return [_distinct([k for part in combo for k in part]) for combo in itertools.product(*product)]


def _set_items(node: exp.Expr) -> list[exp.Expr]:
    if isinstance(node, exp.Tuple):
        return [unparen(e) for e in node.expressions]
    return [unparen(node)]


def _distinct(keys: list[exp.Expr]) -> list[exp.Expr]:
    out: list[exp.Expr] = []
    for key in keys:
        if not any(_same(key, k) for k in out):
            out.append(key)
    return out


def _roots(select: exp.Select, arg: str) -> list[exp.Expr]:
    value = select.args.get(arg)
    if value is None:
        return []
    return list(value) if isinstance(value, list) else [value]


def _rewrite(root: exp.Expr, keys: list[exp.Expr], kept: list[exp.Expr]) -> None:
    """In ``root`` (in place): ``grouping`` / ``grouping_id`` calls as literals, and each
    key outside ``kept`` as NULL where it is read as a key (outside aggregate calls)."""
    for node in list(root.dfs()):
        if node.parent is None and node is not root:
            continue  # replaced with an ancestor
        if isinstance(node, exp.Grouping | exp.GroupingId):
            node.replace(_grouping_literal(node, keys, kept))
        elif _is_key(node, keys) and not _is_key(node, kept) and not _inside_aggregate(node, root):
            if isinstance(node.parent, exp.Select):  # a select item: keep its output name
                node.replace(exp.alias_(exp.null(), node.alias_or_name))
            else:
                node.replace(exp.null())


def _grouping_literal(call: exp.Expr, keys: list[exp.Expr], kept: list[exp.Expr]) -> exp.Expr:
    """``grouping(x)`` (TINYINT 1 when ``x`` is rolled up) or ``grouping_id(x, ...)`` (BIGINT,
    the first argument's bit the highest; no arguments: every key, in GROUP BY order)."""
    args = [unparen(a) for a in call.expressions] or ([unparen(call.this)] if call.this is not None else keys)
    bits = [0 if _is_key(a, kept) else 1 for a in args]
    if isinstance(call, exp.Grouping):
        return exp.cast(exp.Literal.number(bits[0]), "TINYINT")
    return exp.cast(exp.Literal.number(int("".join(map(str, bits)) or "0", 2)), "BIGINT")


def _is_key(node: exp.Expr, keys: list[exp.Expr]) -> bool:
    return not isinstance(node, exp.Alias) and any(_same(unparen(node), k) for k in keys)


def _inside_aggregate(node: exp.Expr, root: exp.Expr) -> bool:
    parent = node.parent
    while parent is not None and parent is not root.parent:
        if is_aggregate(parent):
            return True
        parent = parent.parent
    return False
