"""Qualifying a defining query's unqualified columns by their table, from the base tables'
column names, for incremental maintenance that must know which side of an outer join a
column comes from (TPC-H Q13 writes ``customer LEFT OUTER JOIN orders ON c_custkey =
o_custkey``). Only a column that exactly one source of its SELECT has is qualified; every
other column is left as written, so the query means what it meant.

>>> from sparkmv.analysis.query import parse_query
>>> q = parse_query("SELECT c_id, count(o_id) AS n FROM c LEFT JOIN o ON c_id = o_cid GROUP BY c_id")
>>> qualify_unqualified(q, {"default.c": {"c_id"}, "default.o": {"o_id", "o_cid"}}).sql()
'SELECT c.c_id, COUNT(o.o_id) AS n FROM c LEFT JOIN o ON c.c_id = o.o_cid GROUP BY c.c_id'
"""

from __future__ import annotations

from collections.abc import Collection, Mapping

from sqlglot import exp
from sqlglot.errors import SqlglotError
from sqlglot.optimizer.scope import Scope, traverse_scope

from sparkmv.analysis.query import table_name
from sparkmv.errors import SparkMvError


def qualify_unqualified(query: exp.Query, columns: Mapping[str, Collection[str]]) -> exp.Query:
    """A copy of ``query`` whose unqualified columns are qualified by the one source of
    their SELECT that has a column of that name (base tables by ``columns``: qualified
    table name -> column names, case-insensitive; derived tables and CTEs by their output
    names). A column no source or several sources have, or an output alias, stays as written.
    The query unchanged when sqlglot cannot scope it.
    """
    copy = query.copy()
    known = {name.lower(): {c.lower() for c in cols} for name, cols in columns.items()}
    try:
        scopes = traverse_scope(copy)
    except SqlglotError:
        return query.copy()
    for scope in scopes:
        if len(scope.sources) < 2:
            continue
        for column in scope.unqualified_columns:
            owners = [alias for alias, source in scope.sources.items() if column.name.lower() in _names(source, known)]
            if len(owners) == 1:
                column.set("table", exp.to_identifier(owners[0]))
    return copy


def _names(source: object, known: dict[str, set[str]]) -> set[str]:
    """The column names of one source of a scope: a base table's from ``known``, a derived
    table's or CTE's from its select list."""
    if isinstance(source, exp.Table):
        try:
            return known.get(table_name(source).qualified.lower(), set())
        except SparkMvError:  # a name sparkmv cannot parse has no known columns
            return set()
    if isinstance(source, Scope) and isinstance(source.expression, exp.Query):
        return {n.lower() for n in source.expression.named_selects}
    return set()
