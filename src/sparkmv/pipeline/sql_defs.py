"""SQL definition files: SDP's ``CREATE MATERIALIZED VIEW`` and ``CREATE TEMPORARY VIEW``.

Accepted (Spark Declarative Pipelines' SQL, pyspark 4.1)::

    CREATE [OR REFRESH] MATERIALIZED VIEW name
        [PARTITIONED BY (col)] [COMMENT 'text'] [TBLPROPERTIES ('k' = 'v', ...)]
        AS <select>
    CREATE [OR REPLACE] TEMPORARY VIEW name [COMMENT 'text'] AS <select>

Refused with the statement's position (not yet supported): streaming tables and flows
(``CREATE STREAMING TABLE``, ``CREATE FLOW``), ``SET``/``USE`` statements, a column list,
``CLUSTER BY``, more than one partition column. The ``<select>`` is checked by sqlglot
(Spark dialect) before anything runs.
"""

from __future__ import annotations

from pathlib import Path

from sparkmv.analysis.query import parse_query
from sparkmv.errors import SparkMvError
from sparkmv.names import ObjectName
from sparkmv.pipeline.model import MATERIALIZED_VIEW, TEMPORARY_VIEW, Dataset, PipelineDefinitionError
from sparkmv.sql.cursor import Cursor
from sparkmv.sql.parser import properties_clause
from sparkmv.sql.script import shift_position, split_statements


def load_sql_file(path: Path, namespace: str) -> list[Dataset]:
    """The datasets defined in SQL file ``path`` (names without a namespace get ``namespace``).

    Raises:
        PipelineDefinitionError: ``<path>: <problem> (statement N)`` for the first statement
            that does not parse or is not supported, with its line and column in the file.
    """
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise PipelineDefinitionError(f"{path}: cannot read the file: {exc}") from exc
    out: list[Dataset] = []
    for number, (piece, line, col) in enumerate(split_statements(text), 1):
        try:
            out.append(_statement(piece, path, line, namespace))
        except SparkMvError as exc:
            message = shift_position(str(exc), line, col)
            if message == str(exc):
                message = f"{message} (statement {number}, line {line})"
            raise PipelineDefinitionError(f"{path}: {message}") from None
    return out


def _statement(sql: str, path: Path, line: int, namespace: str) -> Dataset:
    """One statement as a dataset."""
    c = Cursor(sql)
    c.expect("CREATE")
    if c.accept("OR", "REFRESH") or c.accept("OR", "REPLACE"):
        pass
    if c.accept("MATERIALIZED", "VIEW"):
        kind = MATERIALIZED_VIEW
    elif c.accept("TEMPORARY", "VIEW") or c.accept("TEMP", "VIEW"):
        kind = TEMPORARY_VIEW
    elif c.peek("STREAMING", "TABLE") or c.peek("FLOW") or c.peek("STREAMING", "LIVE"):
        raise SparkMvError(
            "streaming tables and flows are not supported by sparkmv pipeline yet "
            "(materialized views and temporary views are)"
        )
    else:
        raise c.error("MATERIALIZED VIEW or TEMPORARY VIEW after CREATE")
    first = c.i
    name = c.name()
    if c.i - first == 1:  # one word: the spec's database
        name = ObjectName(namespace, name.name)
    ds = Dataset(name, kind, path, line)
    _clauses(c, ds)
    query = c.rest()
    parse_query(query)  # a syntax error here names its position before anything runs
    ds.query = query
    return ds


def _clauses(c: Cursor, ds: Dataset) -> None:
    """``PARTITIONED BY``, ``COMMENT``, ``TBLPROPERTIES`` in any order, up to ``AS``."""
    mv = ds.kind == MATERIALIZED_VIEW
    while not c.accept("AS"):
        if c.peek("("):
            raise SparkMvError("a column list is not supported by sparkmv pipeline: give the columns in the query")
        if mv and c.accept("PARTITIONED", "BY"):
            c.expect("(")
            ds.partition_by = c.ident().lower()
            if not c.accept(")"):
                raise SparkMvError(f"{ds.name.qualified}: sparkmv partitions a materialized view by one column")
        elif c.accept("COMMENT"):
            ds.comment = c.string()
        elif mv and c.accept("TBLPROPERTIES"):
            ds.properties.update(properties_clause(c))
        elif c.peek("CLUSTER", "BY"):
            raise SparkMvError("CLUSTER BY is not supported by sparkmv pipeline")
        else:
            raise c.error("PARTITIONED BY, COMMENT, TBLPROPERTIES or AS" if mv else "COMMENT or AS")
