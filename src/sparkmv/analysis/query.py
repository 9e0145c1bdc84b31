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
from collections.abc import Iterable, Mapping

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


def table_occurrences(query: exp.Expr) -> list[ObjectName]:
    """Every base table reference of a query, in its order (a table read twice appears
    twice; CTE names excluded): the inputs :func:`bind_occurrences` binds one by one.

    >>> [str(n) for n in table_occurrences(parse_query("SELECT * FROM t JOIN u ON t.a = u.a JOIN t v ON v.b = t.b"))]
    ['t', 'u', 't']
    """
    return [table_name(table) for table in _table_refs(query)]


def bind_occurrences(query: exp.Query, views: list[str | None]) -> str:
    """Spark SQL text of ``query`` with its ``i``-th table reference (in the order of
    :func:`table_occurrences`) replaced by the temp view ``views[i]`` (kept when None),
    keeping its alias as :func:`bind_tables` does.

    >>> bind_occurrences(parse_query("SELECT * FROM t JOIN t u ON t.a = u.a"), ["v1", "v2"])
    'SELECT * FROM v1 AS t JOIN v2 AS u ON t.a = u.a'
    """
    bound = query.copy()
    for table, view in zip(_table_refs(bound), views, strict=True):
        if view is not None:
            table.replace(exp.alias_(exp.to_table(view), table.alias or table.name, table=True))
    return bound.sql(DIALECT)


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
    ``exclude``: only rows whose ``column`` is none of them), by :func:`partition_predicate`.

    >>> filter_partitions("SELECT 1 AS m", "m", ["a", None])
    "SELECT * FROM (SELECT 1 AS m) AS __smv_q WHERE `m` IN ('a') OR `m` IS NULL"
    >>> filter_partitions("SELECT 1 AS m", "m", ["2024-01-01"], "date", exclude=True)
    "SELECT * FROM (SELECT 1 AS m) AS __smv_q WHERE `m` IS NULL OR NOT `m` IN (CAST('2024-01-01' AS DATE))"
    >>> filter_partitions("SELECT 1 AS m", "m", [], exclude=True)
    'SELECT * FROM (SELECT 1 AS m) AS __smv_q WHERE TRUE'
    """
    where = partition_predicate(exp.column(column, quoted=True), values, kind, exclude)
    return f"SELECT * FROM ({sql}) AS __smv_q WHERE {where.sql(DIALECT)}"


def partition_literal(text: str | None, kind: str) -> exp.Expr:
    """The Spark SQL literal (a sqlglot tree) of a typed partition value given in its one
    text form (:mod:`sparkmv.storage.partition_values`); ``NULL`` for None.

    Raises:
        PartitionValueError: when ``text`` is not a value of ``kind``.

    >>> [partition_literal(v, k).sql(DIALECT) for v, k in
    ...  [("2024-01-01", "date"), ("2024-01-01 10:00:00", "timestamp"), ("it's", "string"), ("007", "integer"),
    ...   ("true", "boolean"), (None, "date")]]
    ["CAST('2024-01-01' AS DATE)", "CAST('2024-01-01 10:00:00' AS TIMESTAMP_NTZ)", "'it\\\\'s'", '7', 'TRUE', 'NULL']
    """
    from sparkmv.storage.partition_values import parse, to_text

    value = parse(text, kind)
    if value is None:
        return exp.Null()
    canon = to_text(value)
    assert canon is not None
    if kind == "integer":
        return exp.Literal.number(canon)
    if kind == "boolean":
        return exp.Boolean(this=bool(value))
    literal = exp.Literal.string(canon)
    cast = {"date": "DATE", "timestamp": "TIMESTAMP_NTZ", "timestamptz": "TIMESTAMP"}.get(kind)
    return exp.cast(literal, exp.DataType.build(cast, dialect=DIALECT)) if cast else literal


def partition_predicate(column: exp.Expr, values: Iterable[str | None], kind: str, exclude: bool = False) -> exp.Expr:
    """``column`` is one of ``values`` (typed partition values in their text form, None for
    NULL), or with ``exclude`` none of them; NULL is matched with ``IS NULL``, never ``IN``.

    Raises:
        PartitionValueError: when a value is not of ``kind``.

    >>> m = exp.column("m")
    >>> [partition_predicate(m, v, "integer", x).sql(DIALECT) for v, x in
    ...  [(["1", None], False), (["1", None], True), ([None], True), ([], False), (["2"], True)]]
    ['m IN (1) OR m IS NULL', 'NOT m IS NULL AND NOT m IN (1)', 'NOT m IS NULL', 'FALSE', 'm IS NULL OR NOT m IN (2)']
    """
    values = list(values)
    literals = [partition_literal(v, kind) for v in values if v is not None]
    has_null = any(v is None for v in values)
    listed = exp.In(this=column.copy(), expressions=literals) if literals else None
    is_null = exp.Is(this=column.copy(), expression=exp.Null())
    if not exclude:
        parts: list[exp.Expr] = [p for p in (listed, is_null if has_null else None) if p is not None]
        return exp.or_(*parts, copy=False) if parts else exp.false()
    if not values:
        return exp.true()
    if has_null:
        kept: list[exp.Expr] = [exp.not_(is_null, copy=False)]
        if listed is not None:
            kept.append(exp.not_(listed, copy=False))
        return exp.and_(*kept, copy=False)
    assert listed is not None
    return exp.or_(is_null, exp.not_(listed, copy=False), copy=False)


def restrict_tables(query: exp.Query, conditions: Mapping[ObjectName, exp.Expr]) -> exp.Query:
    """A copy of ``query`` in which every reference to a table of ``conditions`` reads only
    the rows meeting its condition (over the table's unqualified columns): ``FROM t AS x``
    becomes ``FROM (SELECT * FROM t WHERE <condition>) AS x``; a reference without an alias
    keeps the table's name as alias, so qualified columns still resolve.

    >>> q = parse_query("SELECT a FROM t JOIN u ON t.k = u.k")
    >>> restrict_tables(q, {ObjectName("default", "t"): exp.column("p").eq(1)}).sql(DIALECT)
    'SELECT a FROM (SELECT * FROM t WHERE p = 1) AS t JOIN u ON t.k = u.k'
    """
    bound = query.copy()
    for table in _table_refs(bound):
        condition = conditions.get(table_name(table))
        if condition is None:
            continue
        alias = table.alias or table.name
        source = table.copy()
        source.set("alias", None)
        inner = exp.select("*").from_(source).where(condition.copy())
        table.replace(exp.Subquery(this=inner, alias=exp.TableAlias(this=exp.to_identifier(alias))))
    return bound
