"""Queries that read only system tables (``sparkmv.task_runs``, ...), answered from the
catalog in plain Python with sqlglot's executor: no Spark, no pyspark import.

Used where the caller only prints the rows (the ``sparkmv sql`` command). A query the plain
evaluator cannot answer exactly as written (a function it lacks, values it cannot compare)
returns None, and the caller runs it on Spark as every other query.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from sparkmv.analysis.query import parse_query, referenced_tables
from sparkmv.client.system_tables import SYSTEM_TABLES

if TYPE_CHECKING:
    from sparkmv.refresh.runtime import Runtime


def system_table_rows(rt: Runtime, sql: str) -> tuple[list[str], list[tuple[Any, ...]]] | None:
    """Column names and rows of ``sql`` when it reads system tables only, else None.

    Raises:
        ParseError: when ``sql`` does not parse.
    """
    from sqlglot.errors import SqlglotError
    from sqlglot.executor import execute

    query = parse_query(sql)
    names = referenced_tables(query)
    if not names or any(n.namespace != "sparkmv" or n.name not in SYSTEM_TABLES for n in names):
        return None
    tables: dict[str, list[dict[str, Any]]] = {}
    for name in names:
        schema, rows = SYSTEM_TABLES[name.name]
        tables[name.name] = [dict(zip(schema.names, row, strict=True)) for row in rows(rt)]
    types: dict[str, dict[str, dict[str, str]]] | None = None
    if any(not rows for rows in tables.values()):  # an empty table has no columns to read types from
        types = {"sparkmv": {n: dict(SYSTEM_TABLES[n][0].columns) for n in tables}}
    try:
        result = execute(query, dialect="spark", tables={"sparkmv": tables}, schema=types)
    except (SqlglotError, TypeError, ValueError, KeyError, ArithmeticError, NotImplementedError):
        return None  # not answerable exactly here: Spark answers it
    return list(result.columns), [tuple(r) for r in result.rows]
