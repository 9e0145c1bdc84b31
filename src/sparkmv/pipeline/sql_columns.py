"""Column lists of SQL definitions: SDP's user-specified schema.

``CREATE MATERIALIZED VIEW t (id BIGINT COMMENT 'the id', name STRING) AS SELECT ...``
(streaming tables alike) declares the table's schema. Spark's SDP merges the query's schema
into the declared one and requires the result to equal the declared schema
(``USER_SPECIFIED_AND_INFERRED_SCHEMA_NOT_COMPATIBLE`` otherwise): every query column must be
declared (matched by name, case-insensitively, the declared spelling kept), with the same
type, and nullable only where the declaration is; the table's columns come in the declared
order. sparkmv stores the query projected onto the declared columns (:func:`project_columns`)
and checks the types before the MV is built (:func:`check_schema`). A declared column the
query does not give is refused (SDP keeps it as a column of NULLs). Comments are not kept
(sparkmv's MVs carry no column docs).

``CREATE VIEW v (a COMMENT 'c', b) AS ...`` (a persisted view; no types, as Spark's parser
allows only there) renames the query's columns by position, as Spark's views do.

The list may also hold expectations (``CONSTRAINT name EXPECT (cond) [ON VIOLATION ...]``,
:mod:`sparkmv.sql.constraints`), before, between or after the columns, as on Databricks;
they are returned apart and are no columns.

>>> cols, _ = parse_columns(Cursor("(id BIGINT COMMENT 'the id', Name DECIMAL(10, 2) NOT NULL) AS"), True)
>>> [(c.name, c.type, c.nullable, c.comment) for c in cols]
[('id', 'BIGINT', True, 'the id'), ('Name', 'DECIMAL(10, 2)', False, None)]
>>> project_columns("SELECT 1 AS id", cols)
'SELECT `id`, `name` AS `Name` FROM (SELECT 1 AS id) AS __smv_columns'
>>> project_columns("SELECT 1, 2", parse_columns(Cursor("(a COMMENT 'c', b)"), False)[0])
'SELECT * FROM (SELECT 1, 2) AS __smv_columns(`a`, `b`)'
>>> cols, exps = parse_columns(Cursor("(CONSTRAINT ok EXPECT (id > 0) ON VIOLATION DROP ROW, id INT)"), True)
>>> [c.name for c in cols], exps
(['id'], [Expectation(name='ok', condition='id > 0', action='drop')])
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sparkmv.analysis.expectations import Expectation
from sparkmv.errors import SparkMvError
from sparkmv.sql.constraints import parse_constraint
from sparkmv.sql.cursor import Cursor

ALIAS = "__smv_columns"
"""The derived table the declared columns are projected from."""

_ENDS = ("COMMENT", "NOT", ",", ")")


@dataclass(frozen=True)
class DeclaredColumn:
    """One column of a column list: ``type`` as written (None in a view's list)."""

    name: str
    type: str | None = None
    nullable: bool = True
    comment: str | None = None


def parse_columns(c: Cursor, typed: bool) -> tuple[list[DeclaredColumn], list[Expectation]]:
    """The column list at ``c`` (``(`` next): ``name [type] [NOT NULL] [COMMENT 'x']``, ...,
    mixed with expectations ``CONSTRAINT name EXPECT (cond) [ON VIOLATION ...]``
    (:mod:`sparkmv.sql.constraints`), as Databricks writes them; ``typed``: a materialized
    view's or streaming table's list, where Spark's parser needs a type for each column.
    Returns the columns and the expectations, each in the order written.

    Raises:
        ParseError: a malformed list, a column without a type where one is needed, a bad
            constraint (naming its position).
    """
    c.expect("(")
    out: list[DeclaredColumn] = []
    expectations: list[Expectation] = []
    while True:
        if c.peek("CONSTRAINT"):
            expectations.append(parse_constraint(c))
            if c.accept(")"):
                return out, expectations
            c.expect(",")
            continue
        name = c.ident()
        kind: str | None = None
        if not any(c.peek(w) for w in _ENDS):
            kind = _type(c)
        elif typed:
            raise c.error(f"a type for column {name} (a materialized view's column list gives types)")
        nullable = not c.accept("NOT", "NULL")
        comment = c.string() if c.accept("COMMENT") else None
        out.append(DeclaredColumn(name, kind, nullable, comment))
        if c.accept(")"):
            return out, expectations
        c.expect(",")


def _type(c: Cursor) -> str:
    """A type's text, up to the next ``NOT`` / ``COMMENT`` / ``,`` / ``)`` outside brackets."""
    start = c.words[c.i].start
    depth = 0
    end = start
    while not c.at_end():
        w = c.words[c.i]
        if depth == 0 and not w.is_string and w.text in _ENDS:
            break
        depth += w.text.count("(") + w.text.count("<") - w.text.count(")") - w.text.count(">")
        end = w.end
        c.i += 1
    return c.sql[start : end + 1].strip()


def _quote(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"


def project_columns(query: str, columns: list[DeclaredColumn]) -> str:
    """``query`` projected onto ``columns``: by name for a typed list (SDP's schema), by
    position for a view's list (Spark's view column names)."""
    if columns and columns[0].type is None:
        names = ", ".join(_quote(col.name) for col in columns)
        return f"SELECT * FROM ({query}) AS {ALIAS}({names})"
    items = []
    for col in columns:
        lower = col.name.lower()
        items.append(_quote(lower) if lower == col.name else f"{_quote(lower)} AS {_quote(col.name)}")
    return f"SELECT {', '.join(items)} FROM ({query}) AS {ALIAS}"


def check_schema(where: str, columns: list[DeclaredColumn], produced: Any, declared: Any) -> None:
    """Check a typed column list against the query's Spark schema ``produced`` (a
    ``StructType``), ``declared`` being the declared types as Spark parses them (a
    ``StructType`` of the same columns), as SDP's schema validation does.

    Raises:
        SparkMvError: ``<where>: the query's schema is not compatible with the declared
            schema (...)``: a query column not declared, a declared column the query does
            not give, another type, or a nullable column declared NOT NULL.
    """
    by_name = {f.name.lower(): f for f in produced.fields}
    problems = [f"column {f.name} is not declared" for f in produced.fields if f.name.lower() not in _names(columns)]
    for col, want in zip(columns, declared.fields, strict=True):
        got = by_name.get(col.name.lower())
        if got is None:
            problems.append(f"declared column {col.name} is not in the query")
        elif got.dataType != want.dataType:
            problems.append(
                f"column {col.name} is {got.dataType.simpleString()}, declared {want.dataType.simpleString()}"
            )
        elif got.nullable and not col.nullable:
            problems.append(f"column {col.name} is nullable, declared NOT NULL")
    if problems:
        raise SparkMvError(
            f"{where}: the query's schema is not compatible with the declared schema "
            f"(USER_SPECIFIED_AND_INFERRED_SCHEMA_NOT_COMPATIBLE): {'; '.join(problems)}"
        )


def _names(columns: list[DeclaredColumn]) -> set[str]:
    return {c.name.lower() for c in columns}


def declared_ddl(columns: list[DeclaredColumn]) -> str:
    """The columns as a Spark DDL schema string (for ``StructType.fromDDL``)."""
    return ", ".join(f"{_quote(c.name)} {c.type}" for c in columns)
