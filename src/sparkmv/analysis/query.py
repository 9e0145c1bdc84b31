"""Parsing a defining query and binding its table references.

>>> q = parse_query("SELECT a, count(*) AS n FROM sales.orders o JOIN dim GROUP BY a")
>>> [t.qualified for t in referenced_tables(q)]
['sales.orders', 'default.dim']
>>> bind_tables(q, {ObjectName("sales", "orders"): "v0", ObjectName("default", "dim"): "v1"})
'SELECT a, COUNT(*) AS n FROM v0 AS o JOIN v1 AS dim ON TRUE GROUP BY a'
"""

from __future__ import annotations

import logging
import re

import sqlglot
from sqlglot import exp
from sqlglot.errors import ParseError as SqlglotParseError
from sqlglot.errors import TokenError

from sparkmv.errors import AnalysisError, ParseError
from sparkmv.names import ObjectName, is_identifier

DIALECT = "spark"
# sqlglot warns on stderr when it falls back to a generic command; sparkmv reports its own error.
logging.getLogger("sqlglot").setLevel(logging.ERROR)


def parse_error_message(sql: str, exc: Exception) -> str:
    """A one-line parse error with line and column, from a sqlglot error."""
    errors = getattr(exc, "errors", None) or []
    if errors:
        first = errors[0]
        desc = str(first.get("description", "syntax error"))
        line, col = first.get("line"), first.get("col")
        near = (first.get("highlight") or "").strip()
        desc = _readable_tokens(desc)
        where = f" at line {line}, column {col}" if line else ""
        return f"cannot parse SQL{where}: {desc}" + (f" near '{near}'" if near else "")
    return f"cannot parse SQL: {str(exc).splitlines()[0] if str(exc) else type(exc).__name__}"


_TOKEN_REPR = re.compile(r"<Token token_type: TokenType\.(\w+), text: (.*?), line: \d+, col: \d+.*?>")


def _readable_tokens(desc: str) -> str:
    """Replace sqlglot's ``<Token ...>`` reprs in an error description by the token text.

    >>> _readable_tokens("Expected table name but got <Token token_type: TokenType.SENTINEL, "
    ...                  "text: SENTINEL, line: 1, col: 1, start: 0, end: 0, comments: []>")
    'Expected table name but got end of statement'
    """

    def one(m: re.Match[str]) -> str:
        return "end of statement" if m.group(1) == "SENTINEL" else repr(m.group(2))

    return _TOKEN_REPR.sub(one, desc)


def parse_query(sql: str) -> exp.Query:
    """Parse a SELECT (with CTEs and set operations) in the Spark dialect.

    Raises:
        ParseError: when it does not parse (the message gives line and column), or is not
            a query.
    """
    try:
        parsed = sqlglot.parse(sql, read=DIALECT)
    except (SqlglotParseError, TokenError) as exc:
        raise ParseError(parse_error_message(sql, exc)) from exc
    statements = [p for p in parsed if p is not None]
    if len(statements) != 1 or not isinstance(statements[0], exp.Query):
        raise ParseError("expected exactly one SELECT query")
    return statements[0]


def _cte_names(query: exp.Expr) -> set[str]:
    return {cte.alias_or_name.lower() for cte in query.find_all(exp.CTE)}


def table_name(table: exp.Table) -> ObjectName:
    """The object name of a table reference (``catalog.namespace.name``: a table of an
    external catalog).

    Raises:
        AnalysisError: for names of four or more parts or names that are not identifiers.
    """
    if isinstance(table.this, exp.Dot):
        raise AnalysisError(
            f"table name '{table.sql(DIALECT)}' has too many parts; use namespace.name or catalog.namespace.name"
        )
    parts = [p for p in (table.catalog, table.db, table.name) if p]
    if not all(is_identifier(p) for p in parts):
        raise AnalysisError(f"invalid table name '{table.sql(DIALECT)}'")
    return ObjectName.parse(".".join(parts), allow_reserved=True)


def _table_refs(query: exp.Expr) -> list[exp.Table]:
    ctes = _cte_names(query)
    refs = []
    for table in query.find_all(exp.Table):
        if isinstance(table.this, exp.Func) or not table.name:
            continue  # table-valued functions such as range(10)
        if not table.db and table.name.lower() in ctes:
            continue
        refs.append(table)
    return refs


def referenced_tables(query: exp.Expr) -> list[ObjectName]:
    """Distinct base tables a query reads, in order of first appearance (CTE names excluded).

    Raises:
        AnalysisError: for malformed names.
    """
    seen: list[ObjectName] = []
    for table in _table_refs(query):
        name = table_name(table)
        if name not in seen:
            seen.append(name)
    return seen


def bind_tables(query: exp.Query, views: dict[ObjectName, str]) -> str:
    """Spark SQL text of ``query`` with each base table replaced by its temp view name.

    A reference without an alias keeps its table name as alias, so qualified columns
    (``orders.o_orderkey``) still resolve.
    """
    bound = query.copy()
    for table in _table_refs(bound):
        name = table_name(table)
        if name not in views:
            continue
        alias = table.alias or table.name
        table.replace(exp.alias_(exp.to_table(views[name]), alias, table=True))
    return bound.sql(DIALECT)


def filter_partitions(
    sql: str, column: str, values: list[str | None], kind: str = "string", exclude: bool = False
) -> str:
    """Wrap ``sql`` so only rows whose ``column`` is one of ``values`` remain (with
    ``exclude``: only rows whose ``column`` is none of them). Values are partition values
    in their one text form, compared as typed literals of ``kind``
    (:mod:`sparkmv.storage.partition_values`).

    >>> filter_partitions("SELECT 1 AS m", "m", ["a", None])
    "SELECT * FROM (SELECT 1 AS m) AS __smv_q WHERE `m` IN ('a') OR `m` IS NULL"
    >>> filter_partitions("SELECT 1 AS m", "m", ["2024-01-01"], "date", exclude=True)
    "SELECT * FROM (SELECT 1 AS m) AS __smv_q WHERE `m` IS NULL OR NOT (`m` IN (DATE '2024-01-01'))"
    >>> filter_partitions("SELECT 1 AS m", "m", [], exclude=True)
    'SELECT * FROM (SELECT 1 AS m) AS __smv_q WHERE TRUE'
    """
    from sparkmv.storage.partition_values import spark_literal

    col = f"`{column}`"
    literals = [spark_literal(v, kind) for v in values if v is not None]
    has_null = any(v is None for v in values)
    listed = f"{col} IN ({', '.join(literals)})" if literals else None
    if not exclude:
        preds = [p for p in (listed, f"{col} IS NULL" if has_null else None) if p]
        where = " OR ".join(preds) if preds else "FALSE"
    elif not values:
        where = "TRUE"
    elif has_null:
        where = f"{col} IS NOT NULL" + (f" AND NOT ({listed})" if listed else "")
    else:
        where = f"{col} IS NULL OR NOT ({listed})"
    return f"SELECT * FROM ({sql}) AS __smv_q WHERE {where}"
