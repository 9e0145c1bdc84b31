"""Merging select-project-join derived tables into the query that reads them.

A derived table (or a CTE, inlined) that is a plain select-project-join — base tables and
such derived tables joined by inner joins, a WHERE, a select list of named columns and
expressions, and nothing else: no aggregate, window, DISTINCT, GROUP BY, HAVING, LIMIT,
ORDER BY, set operation or subquery — means the same as its body spliced into the query
that reads it: its sources join the outer FROM, its WHERE (and the ON of the join that read
it) joins the outer WHERE, and each outer reference to one of its columns is replaced by
the expression the derived table computes for it (in parentheses where an operator
surrounds it). TPC-H Q7, Q8 and Q9 aggregate such a derived table; merged, they are inner
joins with GROUP BY, which the delta rules maintain (sqlglot's optimizer
``merge_subqueries`` does the same on a fully qualified query, which needs every base
table's schema).

The merge is an analysis step only: the MV's query is stored and fully refreshed as
written; the incremental refresh maintains the merged query, which yields the same rows
with the same column names. A derived table is merged only where that is sure to hold:

- the outer SELECT and the derived table join their sources by inner joins only, none
  NATURAL or with USING (an outer join's NULL-extended rows would see the derived table's
  expressions computed, not NULL; NATURAL and USING match columns by name), no subquery,
  no ``*`` select item and no lambda; an outer select item that reads a derived column is
  a column (it becomes ``<expression> AS <its name>``) or aliased, so its name stays;
- the derived table names no column list (``AS d(a, b)``) and its table aliases are not
  those of the outer query's other sources;
- when the outer query has more than one source, every column of the outer SELECT and of
  the derived body is qualified by its table (so no reference changes its meaning among
  the merged sources; no schema is read to tell which table an unqualified column is of).

An unqualified outer column named as a derived column is that column: the query is valid
Spark SQL, so another source having the name would have made it ambiguous, and Spark
resolves a ``GROUP BY`` name to a source column before a select alias.

>>> from sparkmv.analysis.query import parse_query
>>> q = parse_query("SELECT y, sum(v) AS s FROM (SELECT extract(year FROM d) AS y, a * (1 - b) AS v "
...                 "FROM t JOIN u ON t.k = u.k WHERE c > 0) AS x GROUP BY y")
>>> print(merge_derived(q).sql())
SELECT EXTRACT(YEAR FROM d) AS y, SUM(a * (1 - b)) AS s FROM t JOIN u ON t.k = u.k WHERE c > 0 \
GROUP BY EXTRACT(YEAR FROM d)
>>> merge_derived(parse_query("SELECT k, n FROM (SELECT k, count(*) AS n FROM t GROUP BY k) AS g")) is None
True
"""

from __future__ import annotations

from sqlglot import exp

from sparkmv.analysis.constructs import ORDERING, is_aggregate
from sparkmv.analysis.keyed import inline_ctes

_INNER_KINDS = ("", "INNER", "CROSS")
_ATOMIC = (exp.Column, exp.Literal, exp.Func, exp.Paren, exp.Null, exp.Boolean)
"""Expressions that need no parentheses wherever they replace a column."""
_PLAIN_PARENTS = (exp.Alias, exp.Func, exp.Group, exp.Where, exp.Having, exp.Ordered, exp.Paren)
"""Parents of a column whose replacement needs no parentheses (no operator binds it)."""
_CLAUSES = ("with_", "distinct", "group", "having", "qualify", "limit", "offset", "laterals", *ORDERING)


def merge_derived(query: exp.Query) -> exp.Query | None:
    """``query`` (a copy, CTEs inlined) with every derived table of its top SELECT that
    the module's conditions allow merged, nested ones too; None when none is merged (or
    ``query`` is not a SELECT, or a CTE cannot be inlined). Raises nothing."""
    inlined = inline_ctes(query)
    if isinstance(inlined, str) or not isinstance(inlined, exp.Select) or not _outer_ok(inlined):
        return None
    merged = False
    while True:
        _prepare(inlined)
        derived = next((s for s in _sources(inlined) if _mergeable(inlined, s)), None)
        if not isinstance(derived, exp.Subquery):
            return inlined if merged else None
        _merge(inlined, derived)
        merged = True


def _prepare(outer: exp.Select) -> None:
    """Make the derived tables of ``outer`` mergeable where only their spelling stops it
    (in place): beside other sources, the unqualified columns of a body with one source are
    qualified by it (a derived table sees no outer column, so they can only be its
    source's), and a body
    source whose alias another source of ``outer`` has is renamed (a CTE read twice,
    TPC-DS q39's ``inv inv1, inv inv2``, inlines the same alias in both)."""
    taken = {s.alias_or_name.lower() for s in _sources(outer)}
    for source in _sources(outer):
        if not isinstance(source, exp.Subquery) or not isinstance(source.this, exp.Select):
            continue
        body = source.this
        inner = _sources(body)
        if not all(isinstance(i, exp.Table | exp.Subquery) for i in inner):
            continue
        if not all(each.alias_or_name for each in inner):
            continue  # an unaliased derived table: nothing to qualify or rename by
        for each in inner:
            name = each.alias_or_name.lower()
            if name in taken:
                fresh = next(f"{name}_{i}" for i in range(2, 1000) if f"{name}_{i}" not in taken)
                _rename(body, each, name, fresh)
                name = fresh
            taken.add(name)
        if len(inner) == 1 and len(_sources(outer)) > 1:  # beside other sources, say the table
            _qualify_single_source(body, inner[0].alias_or_name.lower())


def _rename(body: exp.Select, source: exp.Expr, old: str, new: str) -> None:
    """Alias ``source`` of ``body`` as ``new`` and requalify ``body``'s own columns."""
    alias = source.args.get("alias")
    if alias is not None:
        alias.set("this", exp.to_identifier(new))
    else:
        source.set("alias", exp.TableAlias(this=exp.to_identifier(new)))
    for node in _own_nodes(body):
        if isinstance(node, exp.Column) and node.table.lower() == old and not node.args.get("db"):
            node.set("table", exp.to_identifier(new))


def _qualify_single_source(body: exp.Select, name: str) -> None:
    """Qualify ``body``'s own unqualified columns by its one source ``name``, unless one is
    named as an earlier select item's alias (Spark's lateral column alias) or the body
    holds a subquery (whose columns might be the body's)."""
    aliases = {i.alias.lower() for i in body.expressions if isinstance(i, exp.Alias)}
    own = _own_nodes(body)
    if any(isinstance(n, exp.Query) and n is not body for n in own):
        return
    columns = [n for n in own if isinstance(n, exp.Column) and not n.table and not isinstance(n.this, exp.Star)]
    if any(c.name.lower() in aliases for c in columns):
        return
    for column in columns:
        column.set("table", exp.to_identifier(name))


def _sources(select: exp.Select) -> list[exp.Expr]:
    from_ = select.args.get("from_")
    return ([from_.this] if from_ is not None else []) + [j.this for j in select.args.get("joins") or []]


def _inner_joins(select: exp.Select) -> bool:
    """Only inner, cross or comma joins, none NATURAL or with USING (they match columns by
    name, which a merge changes)."""
    return all(
        not j.side and (j.kind or "").upper() in _INNER_KINDS and not j.args.get("using") and not j.args.get("method")
        for j in select.args.get("joins") or []
    )


def _own_nodes(select: exp.Select) -> list[exp.Expr]:
    """The nodes of ``select`` outside its derived tables (pre-order)."""
    out: list[exp.Expr] = []
    stack: list[exp.Expr] = [select]
    while stack:
        node = stack.pop()
        if isinstance(node, exp.Subquery) and isinstance(node.parent, exp.From | exp.Join):
            continue  # a derived table: its own scope
        out.append(node)
        stack.extend(reversed(list(node.iter_expressions())))
    return out


def _outer_ok(select: exp.Select) -> bool:
    """The outer SELECT's own conditions (module docstring)."""
    if not _inner_joins(select) or select.args.get("laterals"):
        return False
    for node in _own_nodes(select):
        if isinstance(node, exp.Lambda) or (isinstance(node, exp.Query) and node is not select):
            return False
        if isinstance(node, exp.Exists) or (isinstance(node, exp.In) and node.args.get("query") is not None):
            return False
    return not any(_is_star(item) for item in select.expressions)


def _is_star(item: exp.Expr) -> bool:
    return isinstance(item, exp.Star) or (isinstance(item, exp.Column) and isinstance(item.this, exp.Star))


def _mergeable(outer: exp.Select, source: exp.Expr) -> bool:
    """Whether the derived table ``source`` of ``outer`` may be merged (module docstring)."""
    if not isinstance(source, exp.Subquery) or not isinstance(source.this, exp.Select):
        return False
    body = source.this
    alias = source.args.get("alias")
    if alias is not None and alias.columns:
        return False
    if any(body.args.get(arg) for arg in _CLAUSES) or not _inner_joins(body) or body.args.get("from_") is None:
        return False
    if any(isinstance(s, exp.Table) and (isinstance(s.this, exp.Func) or s.args.get("sample")) for s in _sources(body)):
        return False
    for node in body.dfs():
        if is_aggregate(node) or isinstance(node, exp.Window | exp.Lambda | exp.Exists | exp.Star):
            return False
        if node is not body and isinstance(node, exp.Query) and not _is_derived(node):
            return False
        if isinstance(node, exp.In) and node.args.get("query") is not None:
            return False
    names = [item.alias_or_name.lower() for item in body.expressions]
    if not all(isinstance(i, exp.Alias | exp.Column) for i in body.expressions) or len(set(names)) < len(names):
        return False
    others = {s.alias_or_name.lower() for s in _sources(outer) if s is not source}
    if others & {s.alias_or_name.lower() for s in _sources(body)}:
        return False
    if others and not _all_qualified(outer, body):
        return False
    return _outer_items_named(outer, source.alias.lower(), set(names))


def _is_derived(node: exp.Expr) -> bool:
    """A derived table in a FROM / JOIN, or its body SELECT (merged after its reader)."""
    if isinstance(node, exp.Select) and isinstance(node.parent, exp.Subquery):
        node = node.parent
    return isinstance(node, exp.Subquery) and isinstance(node.parent, exp.From | exp.Join)


def _all_qualified(outer: exp.Select, body: exp.Select) -> bool:
    own = [n for n in _own_nodes(outer) if isinstance(n, exp.Column)]
    return all(c.table for c in [*own, *body.find_all(exp.Column)])


def _refers(column: exp.Column, alias: str, names: set[str]) -> bool:
    """Whether an outer column names a column of the derived table ``alias``."""
    table = column.table.lower()
    return column.name.lower() in names and (table == alias or (not table and not column.args.get("db")))


def _outer_items_named(outer: exp.Select, alias: str, names: set[str]) -> bool:
    """No outer select item that reads a derived column takes Spark's generated name."""
    for item in outer.expressions:
        if isinstance(item, exp.Alias | exp.Column):
            continue
        if any(_refers(c, alias, names) for c in item.find_all(exp.Column)):
            return False
    return True


def _merge(outer: exp.Select, source: exp.Subquery) -> None:
    """Splice the derived table ``source`` into ``outer`` (in place)."""
    body = source.this
    alias = source.alias.lower()
    exprs = {item.alias_or_name.lower(): item.unalias() for item in body.expressions}
    spelled = {item.alias_or_name.lower(): item.alias_or_name for item in body.expressions}
    on = None
    for node in _own_nodes(outer):
        if not isinstance(node, exp.Column) or not _refers(node, alias, set(exprs)):
            continue
        name = node.name.lower()
        if isinstance(node.parent, exp.Select) and node.arg_key == "expressions":
            node.replace(exp.alias_(_wrapped(exprs[name].copy(), exp.Alias()), spelled[name]))
        else:
            node.replace(_wrapped(exprs[name].copy(), node.parent))
    inner_from = body.args["from_"].this.copy()
    inner_joins = [j.copy() for j in body.args.get("joins") or []]
    joins = list(outer.args.get("joins") or [])
    if isinstance(source.parent, exp.From):
        outer.set("from_", exp.From(this=inner_from))
        outer.set("joins", inner_joins + joins or None)
    else:
        join = source.parent
        assert isinstance(join, exp.Join)
        on = join.args.get("on")
        at = joins.index(join)
        outer.set("joins", [*joins[:at], exp.Join(this=inner_from, kind="CROSS"), *inner_joins, *joins[at + 1 :]])
    for condition in (body.args.get("where"), on):
        if condition is not None:
            inner = condition.this if isinstance(condition, exp.Where) else condition
            outer.where(inner.copy(), copy=False, append=True)


def _wrapped(expr: exp.Expr, parent: exp.Expr | None) -> exp.Expr:
    """``expr`` in parentheses unless it is atomic or ``parent`` binds nothing."""
    if isinstance(expr, _ATOMIC) or isinstance(parent, _PLAIN_PARENTS):
        return expr
    return exp.Paren(this=expr)
