"""Resolving a defining query's columns against its base tables' schemas, for incremental
maintenance that must know which table a column comes from: the side of an outer join
(TPC-H Q13 writes ``customer LEFT OUTER JOIN orders ON c_custkey = o_custkey``), and the
columns of a derived table, CTE or inlined temporary view that a join reads (a derived
table is merged into its reader only when every column is qualified:
:mod:`sparkmv.analysis.merge`).

Two steps, each only where the schemas decide it (nothing is guessed):

- ``*`` and ``t.*`` in a SELECT whose sources' columns are all known (base tables by their
  schema, derived tables and CTEs by their select lists) become the columns they stand for,
  in order, as Spark expands them (sqlglot's ``qualify_columns`` does the same with a full
  schema);
- an unqualified column that exactly one source of its SELECT has is qualified by that
  source. A column no source or several sources have, or an output alias (Spark's lateral
  alias), stays as written, so the query means what it meant.

>>> from sparkmv.analysis.query import parse_query
>>> q = parse_query("SELECT c_id, count(o_id) AS n FROM c LEFT JOIN o ON c_id = o_cid GROUP BY c_id")
>>> qualify_unqualified(q, {"default.c": {"c_id"}, "default.o": {"o_id", "o_cid"}}).sql()
'SELECT c.c_id, COUNT(o.o_id) AS n FROM c LEFT JOIN o ON c.c_id = o.o_cid GROUP BY c.c_id'
>>> q = parse_query("SELECT s.k, u.v FROM (SELECT * FROM t WHERE x > 0) AS s JOIN u ON s.k = u.k")
>>> qualify_unqualified(q, {"default.t": ["k", "x"], "default.u": ["k", "v"]}).sql()
'SELECT s.k, u.v FROM (SELECT t.k, t.x FROM t WHERE t.x > 0) AS s JOIN u ON s.k = u.k'
"""

from __future__ import annotations

from collections.abc import Collection, Mapping

from sqlglot import exp
from sqlglot.errors import SqlglotError
from sqlglot.optimizer.scope import Scope, traverse_scope

from sparkmv.analysis.query import table_name
from sparkmv.errors import SparkMvError


def qualify_unqualified(query: exp.Query, columns: Mapping[str, Collection[str]]) -> exp.Query:
    """A copy of ``query`` with its stars expanded and its unqualified columns qualified by
    the one source of their SELECT that has a column of that name (module docstring; base
    tables by ``columns``: qualified table name -> column names in table order,
    case-insensitive; derived tables and CTEs by their output names). The query unchanged
    when sqlglot cannot scope it.
    """
    copy = query.copy()
    known = {name.lower(): list(cols) for name, cols in columns.items()}
    try:
        scopes = traverse_scope(copy)
    except SqlglotError:
        return query.copy()
    for scope in scopes:  # innermost first: a derived table is expanded before its reader
        if isinstance(scope.expression, exp.Select):
            _expand_stars(scope, known)
        if scope.parent is None and len(scope.selected_sources) < 2:
            continue  # the top SELECT of one source: its columns are unambiguous as written
        for column in scope.unqualified_columns:
            sources = {alias: source for alias, (_, source) in scope.selected_sources.items()}
            owners = [alias for alias, source in sources.items() if column.name.lower() in _names(source, known)]
            if len(owners) == 1 and owners[0]:  # an unaliased derived table has no name to qualify by
                column.set("table", exp.to_identifier(owners[0]))
    return copy


def _expand_stars(scope: Scope, known: dict[str, list[str]]) -> None:
    """Replace ``*`` / ``t.*`` items of the scope's SELECT by its sources' columns, when
    every source they stand for has known columns (in place)."""
    select = scope.expression
    if not any(_star_of(item) is not None for item in select.expressions):
        return
    sources = {alias: source for alias, (_, source) in scope.selected_sources.items()}
    items: list[exp.Expr] = []
    for item in select.expressions:
        star = _star_of(item)
        if star is None:
            items.append(item)
            continue
        aliases = list(sources) if star == "" else [a for a in sources if a.lower() == star]
        expanded = [(a, _ordered_names(sources[a], known)) for a in aliases]
        if not aliases or any(not names for _, names in expanded) or _has_modifiers(item):
            return  # a source of unknown columns: the star stays as written
        items += [exp.column(n, table=a) for a, names in expanded for n in names]
    select.set("expressions", items)


def _star_of(item: exp.Expr) -> str | None:
    """``""`` for ``*``, the table's alias (lower case) for ``t.*``, None for other items."""
    if isinstance(item, exp.Star):
        return ""
    if isinstance(item, exp.Column) and isinstance(item.this, exp.Star) and not item.args.get("db"):
        return item.table.lower()
    return None


def _has_modifiers(item: exp.Expr) -> bool:
    """``* EXCEPT (...)`` / ``REPLACE``: not expanded here."""
    star = item if isinstance(item, exp.Star) else item.this
    return any(star.args.get(k) for k in ("except_", "except", "replace", "rename"))


def _ordered_names(source: object, known: dict[str, list[str]]) -> list[str]:
    """A source's column names in order (empty when unknown or not plain names)."""
    if isinstance(source, exp.Table):
        try:
            return known.get(table_name(source).qualified.lower(), [])
        except SparkMvError:
            return []
    if isinstance(source, Scope) and isinstance(source.expression, exp.Query):
        names = source.expression.named_selects
        return names if all(names) and len(names) == len(source.expression.selects) else []
    return []


def _names(source: object, known: dict[str, list[str]]) -> set[str]:
    """The column names of one source of a scope: a base table's from ``known``, a derived
    table's or CTE's from its select list."""
    if isinstance(source, exp.Table):
        try:
            return {c.lower() for c in known.get(table_name(source).qualified.lower(), ())}
        except SparkMvError:  # a name sparkmv cannot parse has no known columns
            return set()
    if isinstance(source, Scope) and isinstance(source.expression, exp.Query):
        return {n.lower() for n in source.expression.named_selects}
    return set()
