"""SQL definition files: SDP's materialized views, views, temporary views, streaming tables
and flows, with the ``SET`` and ``USE`` statements between them.

Accepted (Spark Declarative Pipelines' SQL, pyspark 4.1+)::

    CREATE [OR REFRESH] MATERIALIZED VIEW name [(col TYPE [NOT NULL] [COMMENT 'c'] | expectation, ...)]
        [PARTITIONED BY (col, ...)] [CLUSTER BY (col, ...)] [COMMENT 'text']
        [TBLPROPERTIES ('k' = 'v', ...)] AS <select>
    CREATE [OR REPLACE] VIEW name [(col [COMMENT 'c'] | expectation, ...)] [COMMENT 'text']
        [TBLPROPERTIES (...)] AS <select>
    CREATE [OR REPLACE] TEMPORARY VIEW name [COMMENT 'text'] AS <select>
    CREATE [OR REFRESH] STREAMING TABLE name [(col TYPE ... | expectation, ...)] [PARTITIONED BY (...)]
        [CLUSTER BY (...)] [COMMENT 'text'] [TBLPROPERTIES (...)] [AS <select>]
    CREATE FLOW name [COMMENT 'text'] AS INSERT INTO target [BY NAME] <select>
    SET key = value
    USE SCHEMA | DATABASE | NAMESPACE [spark_catalog.]name ;  SET CATALOG spark_catalog
    CREATE FLOW name AS AUTO CDC INTO target ... / CREATE STREAMING TABLE t FLOW AUTO CDC ...
        (:mod:`sparkmv.pipeline.auto_cdc_sql`)

where an expectation is ``CONSTRAINT name EXPECT (condition) [ON VIOLATION { DROP ROW | FAIL
UPDATE }]`` (:mod:`sparkmv.sql.constraints`, kept in :attr:`Dataset.expectations`; refused on a
temporary view, and when its condition is not a deterministic condition over one row).

A ``STREAM(t)`` in a ``FROM`` (read the new rows of ``t``) is rewritten to ``t`` and recorded
in :attr:`Dataset.streams`; what a streaming table does with it is in
:mod:`sparkmv.pipeline.flows`. ``format.`path``` references stay in the query and are bound to
external tables when the dataset runs (:mod:`sparkmv.analysis.paths`).

As SDP: a ``SET`` applies to the datasets after it in the same file (:attr:`Dataset.conf`,
applied around that dataset's refresh); ``USE SCHEMA s`` names the datasets after it, and
the tables their queries read without a schema, in ``s`` (temporary views always live in the
pipeline's schema); each file starts again from the pipeline's schema and no ``SET``;
``${key}`` is replaced by the spec's ``configuration`` value before a statement is parsed
(:func:`sparkmv.pipeline.sql_context.substitute`). A persisted ``CREATE VIEW`` is kept as a
materialized view (readable by any reader, refreshed by each run). Differences from SDP:
an MV is partitioned by the first ``PARTITIONED BY`` column (partition change tracking
follows it; the contents are the same); ``CLUSTER BY`` is a layout hint sparkmv does not
apply; column comments are not kept. The ``<select>`` is checked by sqlglot (Spark dialect)
before anything runs.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path

from sqlglot import exp

from sparkmv.analysis.expectations import check_expectations
from sparkmv.analysis.paths import PATH_FORMATS, path_ref
from sparkmv.analysis.query import DIALECT, parse_query
from sparkmv.errors import AnalysisError, SparkMvError
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
from sparkmv.pipeline.sql_columns import parse_columns, project_columns
from sparkmv.pipeline.sql_context import FileContext, substitute
from sparkmv.sql.cursor import Cursor
from sparkmv.sql.parser import properties_clause
from sparkmv.sql.script import shift_position, split_statements


def load_sql_file(
    path: Path, namespace: str, variables: Mapping[str, str] | None = None, root: Path | None = None
) -> list[Dataset]:
    """The datasets defined in SQL file ``path`` (names without a namespace get ``namespace``,
    or the one of the ``USE SCHEMA`` before them); ``variables``: the spec's configuration,
    for ``${key}``; ``root``: the folder a relative ``format.`path``` is read from (the
    spec's, where ``spark-pipelines`` runs).

    Raises:
        PipelineDefinitionError: ``<path>: <problem> (statement N)`` for the first statement
            that does not parse or is not supported, with its line and column in the file.
    """
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise PipelineDefinitionError(f"{path}: cannot read the file: {exc}") from exc
    out: list[Dataset] = []
    ctx = FileContext(namespace, namespace)
    for number, (piece, line, col) in enumerate(split_statements(text), 1):
        try:
            piece = absolute_paths(substitute(piece, variables or {}), root)
            if not ctx.apply(piece):
                out.append(_statement(piece, path, line, ctx))
        except SparkMvError as exc:
            message = shift_position(str(exc), line, col)
            if message == str(exc):
                message = f"{message} (statement {number}, line {line})"
            raise PipelineDefinitionError(f"{path}: {message}") from None
    return out


def _statement(sql: str, path: Path, line: int, ctx: FileContext) -> Dataset:
    """One CREATE statement as a dataset."""
    c = Cursor(sql)
    c.expect("CREATE")
    if c.accept("OR", "REFRESH") or c.accept("OR", "REPLACE"):
        pass
    persisted_view = False
    if c.accept("MATERIALIZED", "VIEW"):
        kind = MATERIALIZED_VIEW
    elif c.accept("TEMPORARY", "VIEW") or c.accept("TEMP", "VIEW"):
        kind = TEMPORARY_VIEW
    elif c.accept("STREAMING", "TABLE"):
        kind = STREAMING_TABLE
    elif c.accept("FLOW"):
        kind = FLOW
    elif c.accept("VIEW"):
        kind, persisted_view = MATERIALIZED_VIEW, True  # kept as an MV: readable by any reader
    else:
        raise c.error("MATERIALIZED VIEW, VIEW, TEMPORARY VIEW, STREAMING TABLE or FLOW after CREATE")
    ds = Dataset(_dataset_name(c, kind, ctx), kind, path, line)
    ds.conf = dict(ctx.conf)
    columns, ds.expectations = parse_columns(c, not persisted_view) if kind != FLOW and c.peek("(") else ([], [])
    _check_expectations(ds)
    if not _clauses(c, ds, persisted_view):
        ds.columns = columns
        if c.accept("FLOW", "AUTO", "CDC"):  # CREATE STREAMING TABLE t FLOW AUTO CDC ...
            ds.auto_cdc = parse_auto_cdc(c, ds.name.name, ds.name, path, line, ctx.namespace)
        return ds  # a streaming table fed by flows only, or by its AUTO CDC flow
    if kind == FLOW and c.accept("AUTO", "CDC", "INTO"):  # sparkmv.pipeline.auto_cdc_sql
        ds.target = _name(c, ctx.namespace)
        ds.auto_cdc = parse_auto_cdc(c, ds.name.name, ds.target, path, line, ctx.namespace)
        return ds
    if kind == FLOW:
        c.expect("INSERT", "INTO")
        ds.target = _name(c, ctx.namespace)
        c.accept("BY", "NAME")  # columns are always matched by name
    ds.query, ds.streams = unstream(_qualified(c.rest(), ctx), ctx.namespace)
    if columns and not persisted_view:  # spark-pipelines (4.3) keeps a view's own column names
        ds.query = project_columns(ds.query, columns)
        ds.columns = columns
    return ds


def _check_expectations(ds: Dataset) -> None:
    """Refuse expectations that cannot be kept (:func:`check_expectations`), and any on a
    temporary view (it is inlined into the queries that read it: it has no rows of its own).

    Raises:
        AnalysisError: naming the expectation and the problem.
    """
    if ds.expectations and ds.kind == TEMPORARY_VIEW:
        raise AnalysisError(
            f"temporary view {ds.name.display}: expectations on a temporary view are not supported by sparkmv "
            "pipeline (put them on the materialized view or streaming table that reads it)"
        )
    check_expectations(ds.name.display, ds.expectations)


def _dataset_name(c: Cursor, kind: str, ctx: FileContext) -> ObjectName:
    """A dataset's name: a temporary view's is one word, in the pipeline's schema (as SDP,
    whatever ``USE SCHEMA`` said)."""
    first = c.i
    name = _name(c, ctx.pipeline_namespace if kind == TEMPORARY_VIEW else ctx.namespace)
    if kind == TEMPORARY_VIEW and c.i - first > 1:
        raise SparkMvError(
            f"temporary view {name.display}: a temporary view's name has no schema (INVALID_TEMP_OBJ_QUALIFIER)"
        )
    return name


def _name(c: Cursor, namespace: str) -> ObjectName:
    """A dataset name; one word is read in ``namespace``."""
    first = c.i
    name = c.name()
    return ObjectName(namespace, name.name) if c.i - first == 1 else name


def _qualified(query: str, ctx: FileContext) -> str:
    """``query`` with its one-word table names read in the current schema when ``USE
    SCHEMA`` changed it (CTE names and path references kept)."""
    if ctx.namespace == ctx.pipeline_namespace:
        return query
    tree = parse_query(query)
    ctes = {c.alias_or_name.lower() for c in tree.find_all(exp.CTE)}
    changed = False
    for table in tree.find_all(exp.Table):
        if table.db or not table.name or isinstance(table.this, exp.Func) or table.name.lower() in ctes:
            continue
        table.set("db", exp.to_identifier(ctx.namespace))
        changed = True
    return tree.sql(DIALECT) if changed else query


_RELATIVE_PATH = re.compile(rf"\b({'|'.join(PATH_FORMATS)})\.`(?![/`])(?![A-Za-z][\w+.-]*:)([^`]+)`", re.I)


def absolute_paths(sql: str, root: Path | None) -> str:
    """``sql`` with each relative ``format.`path``` made absolute under ``root`` (unchanged
    when ``root`` is None).

    >>> absolute_paths("SELECT * FROM json.`data/x` JOIN parquet.`/abs` JOIN csv.`s3://b/k`", Path("/p"))
    'SELECT * FROM json.`/p/data/x` JOIN parquet.`/abs` JOIN csv.`s3://b/k`'
    """
    if root is None:
        return sql
    return _RELATIVE_PATH.sub(lambda m: f"{m.group(1)}.`{(root / m.group(2)).as_posix()}`", sql)


_PART = r"(?:`[^`]+`|[A-Za-z_]\w*)"
_STREAM_KEYWORD = re.compile(rf"(\b(?:FROM|JOIN)\s+)STREAM\s+(?!\()({_PART}(?:\.{_PART})*)", re.I)
"""``FROM STREAM t`` (SDP's spelling without parentheses) read as ``FROM STREAM(t)``."""


def unstream(query: str, namespace: str) -> tuple[str, list[ObjectName]]:
    """``query`` with each ``STREAM(t)`` read as ``t``, and the tables read so (one-word
    names in ``namespace``; ``STREAM(parquet.`/p`)``: the path's table).

    >>> unstream("SELECT a FROM STREAM(src) AS s WHERE a > 1", "default")
    ('SELECT a FROM src AS s WHERE a > 1', [ObjectName(namespace='default', name='src')])
    >>> unstream("SELECT * FROM STREAM src", "default")[0]  # the programming guide's spelling
    'SELECT * FROM src'

    Raises:
        SparkMvError: the query does not parse (naming the position), or ``STREAM`` is not
            given one table name.
    """
    query = _STREAM_KEYWORD.sub(r"\1STREAM(\2)", query)
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
        plain = exp.to_table(".".join(parts), dialect=DIALECT)
        if len(parts) == 2 and (ref := path_ref(_path_table(column), namespace)) is not None:
            plain, name = _path_table(column), ref.table
        elif len(parts) > 1:
            name = ObjectName.parse(".".join(parts))
        else:
            name = ObjectName(namespace, parts[0].lower())
        streams.append(name)
        if table.args.get("alias") is not None:
            plain.set("alias", table.args["alias"])
        table.replace(plain)
    return (tree.sql(DIALECT) if streams else query), streams


def _path_table(column: exp.Column) -> exp.Table:
    """``STREAM(fmt.`path`)``'s argument as the table reference it is."""
    return exp.Table(this=column.this.copy(), db=column.args["table"].copy())


def _clauses(c: Cursor, ds: Dataset, persisted_view: bool) -> bool:
    """``PARTITIONED BY``, ``CLUSTER BY``, ``COMMENT``, ``TBLPROPERTIES`` in any order, up to
    ``AS`` (True); False at the end of a streaming table's statement without ``AS``."""
    table = ds.kind in (MATERIALIZED_VIEW, STREAMING_TABLE) and not persisted_view
    while not c.accept("AS"):
        if ds.kind == STREAMING_TABLE and (c.at_end() or c.peek("FLOW", "AUTO", "CDC")):
            return False
        if table and c.accept("PARTITIONED", "BY"):
            # sparkmv partitions by one column: the first (partition change tracking follows it)
            ds.partition_by = _column_list(c)[0]
        elif table and c.accept("CLUSTER", "BY"):
            ds.properties.setdefault("clusteringColumns", ",".join(_column_list(c)))  # a layout hint
        elif c.accept("COMMENT"):
            ds.comment = c.string()
        elif (table or persisted_view) and c.accept("TBLPROPERTIES"):
            ds.properties.update(properties_clause(c))
        else:
            expected = "PARTITIONED BY, CLUSTER BY, COMMENT, TBLPROPERTIES or AS" if table else "COMMENT or AS"
            raise c.error(expected if not persisted_view else "COMMENT, TBLPROPERTIES or AS")
    return True


def _column_list(c: Cursor) -> list[str]:
    """``(a, b, ...)``: plain column names (as SDP: identity partitioning, one-part names).

    Raises:
        ParseError: a transform such as ``year(d)`` or a dotted name, at its position.
    """
    c.expect("(")
    out = [c.ident().lower()]
    while not c.accept(")"):
        if c.peek("(") or c.peek("."):
            raise c.error("a column name (SDP partitions by plain columns only)")
        c.expect(",")
        out.append(c.ident().lower())
    return out
