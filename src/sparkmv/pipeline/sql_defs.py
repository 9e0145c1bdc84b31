"""SQL definition files: SDP's materialized views, temporary views, streaming tables and flows.

Accepted (Spark Declarative Pipelines' SQL, pyspark 4.1)::

    CREATE [OR REFRESH] MATERIALIZED VIEW name
        [PARTITIONED BY (col)] [COMMENT 'text'] [TBLPROPERTIES ('k' = 'v', ...)]
        AS <select>
    CREATE [OR REPLACE] TEMPORARY VIEW name [COMMENT 'text'] AS <select>
    CREATE [OR REFRESH] STREAMING TABLE name
        [PARTITIONED BY (col)] [COMMENT 'text'] [TBLPROPERTIES (...)] [AS <select>]
    CREATE FLOW name [COMMENT 'text'] AS INSERT INTO target [BY NAME] <select>
    CREATE FLOW name AS AUTO CDC INTO target ... / CREATE STREAMING TABLE t FLOW AUTO CDC ...
        (:mod:`sparkmv.pipeline.auto_cdc_sql`)

A ``STREAM(t)`` in a ``FROM`` (read the new rows of ``t``) is rewritten to ``t`` and recorded
in :attr:`Dataset.streams`; what a streaming table does with it is in
:mod:`sparkmv.pipeline.flows`. Refused with the statement's position: ``SET``/``USE``
statements, a column list, ``CLUSTER BY``, more than one partition column. The ``<select>`` is
checked by sqlglot (Spark dialect) before anything runs.
"""

from __future__ import annotations

from pathlib import Path

from sqlglot import exp

from sparkmv.analysis.query import DIALECT, parse_query
from sparkmv.errors import SparkMvError
from sparkmv.names import ObjectName
from sparkmv.pipeline.auto_cdc_sql import parse_auto_cdc
from sparkmv.pipeline.model import (
    FLOW,
    MATERIALIZED_VIEW,
    STREAMING_TABLE,
    TEMPORARY_VIEW,
    Dataset,
    PipelineDefinitionError,
)
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
    elif c.accept("STREAMING", "TABLE"):
        kind = STREAMING_TABLE
    elif c.accept("FLOW"):
        kind = FLOW
    else:
        raise c.error("MATERIALIZED VIEW, TEMPORARY VIEW, STREAMING TABLE or FLOW after CREATE")
    ds = Dataset(_name(c, namespace), kind, path, line)
    if not _clauses(c, ds):
        if c.accept("FLOW", "AUTO", "CDC"):  # CREATE STREAMING TABLE t FLOW AUTO CDC ...
            ds.auto_cdc = parse_auto_cdc(c, ds.name.name, ds.name, path, line, namespace)
        return ds  # a streaming table fed by flows only, or by its AUTO CDC flow
    if kind == FLOW and c.accept("AUTO", "CDC", "INTO"):  # sparkmv.pipeline.auto_cdc_sql
        ds.target = _name(c, namespace)
        ds.auto_cdc = parse_auto_cdc(c, ds.name.name, ds.target, path, line, namespace)
        return ds
    if kind == FLOW:
        c.expect("INSERT", "INTO")
        ds.target = _name(c, namespace)
        c.accept("BY", "NAME")  # columns are always matched by name
    ds.query, ds.streams = unstream(c.rest(), namespace)
    return ds


def _name(c: Cursor, namespace: str) -> ObjectName:
    """A dataset name; one word is read in the spec's database."""
    first = c.i
    name = c.name()
    return ObjectName(namespace, name.name) if c.i - first == 1 else name


def unstream(query: str, namespace: str) -> tuple[str, list[ObjectName]]:
    """``query`` with each ``STREAM(t)`` read as ``t``, and the tables read so (one-word
    names in ``namespace``).

    >>> unstream("SELECT a FROM STREAM(src) AS s WHERE a > 1", "default")
    ('SELECT a FROM src AS s WHERE a > 1', [ObjectName(namespace='default', name='src')])

    Raises:
        SparkMvError: the query does not parse (naming the position), or ``STREAM`` is not
            given one table name.
    """
    tree = parse_query(query)  # a syntax error here names its position before anything runs
    streams: list[ObjectName] = []
    for table in list(tree.find_all(exp.Table)):
        call = table.this
        if not (isinstance(call, exp.Anonymous) and str(call.this).upper() == "STREAM"):
            continue
        args = call.expressions
        if len(args) != 1 or not isinstance(args[0], exp.Column):
            raise SparkMvError(f"STREAM takes one table name: {call.sql(DIALECT)}")
        column: exp.Column = args[0]
        parts = [p.name for p in column.parts]
        name = ObjectName.parse(".".join(parts)) if len(parts) > 1 else ObjectName(namespace, parts[0].lower())
        streams.append(name)
        plain = exp.to_table(".".join(parts), dialect=DIALECT)
        if table.args.get("alias") is not None:
            plain.set("alias", table.args["alias"])
        table.replace(plain)
    return (tree.sql(DIALECT) if streams else query), streams


def _clauses(c: Cursor, ds: Dataset) -> bool:
    """``PARTITIONED BY``, ``COMMENT``, ``TBLPROPERTIES`` in any order, up to ``AS`` (True);
    False at the end of a streaming table's statement without ``AS``."""
    mv = ds.kind in (MATERIALIZED_VIEW, STREAMING_TABLE)
    while not c.accept("AS"):
        if ds.kind == STREAMING_TABLE and (c.at_end() or c.peek("FLOW", "AUTO", "CDC")):
            return False
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
    return True
