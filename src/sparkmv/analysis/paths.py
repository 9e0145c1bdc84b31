"""Spark SQL's path references, ``format.`path```: a query reading files directly.

Spark reads ``SELECT * FROM parquet.`/data/lineitem``` as the files under that path
(``spark.sql.runSQLOnFiles``). sparkmv reads base tables from its catalog, so each distinct
path reference is bound to an external table of sparkmv with a stable name derived from the
format and the path (:func:`sparkmv.names.path_table_name`), in the namespace of the MV that
reads it; the query then reads that name, and PCT / INCREMENTAL work over it as over any
external table of files. This module only finds and rewrites the references (no Spark, no
catalog); creating the tables is :mod:`sparkmv.services.path_tables`.

>>> sql, refs = bind_paths("SELECT a FROM parquet.`/data/li/` AS l JOIN csv.`/d/c` c ON l.a = c._c0", "default")
>>> sql  # doctest: +ELLIPSIS
'SELECT a FROM default.__smv_path_parquet_... AS l JOIN default.__smv_path_csv_... AS c ON l.a = c._c0'
>>> [(r.format, r.path) for r in refs]
[('parquet', '/data/li'), ('csv', '/d/c')]
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlglot import exp

from sparkmv.analysis.query import DIALECT, parse_query
from sparkmv.names import ObjectName, is_identifier, path_table_name

PATH_FORMATS = ("parquet", "json", "csv", "orc", "text", "delta")
"""The formats of ``format.`path``` references sparkmv binds (Spark's file sources that
sparkmv reads as external tables)."""

CSV_OPTIONS = {"inferSchema": "false"}
"""Reader options of a CSV path table: Spark reads ``csv.`path``` with its defaults (no
header, no schema inference: columns ``_c0``, ``_c1``, ... of type string), so the table
does too (sparkmv's ``CREATE EXTERNAL TABLE ... USING csv`` infers types unless told not to)."""


@dataclass(frozen=True)
class PathRef:
    """One path reference: ``format`` (lower case), ``path`` (as written, without a trailing
    ``/``) and the external table it is bound to."""

    format: str
    path: str
    table: ObjectName

    @property
    def options(self) -> dict[str, str]:
        """The reader options that read the files as Spark's ``format.`path``` does."""
        return dict(CSV_OPTIONS) if self.format == "csv" else {}


def path_ref(table: exp.Table, namespace: str) -> PathRef | None:
    """The path reference ``table`` is (``format.`path``` with a known format and a name that
    is not a plain identifier, so not a table of a database named like a format), else None."""
    if table.catalog or not table.db or table.db.lower() not in PATH_FORMATS:
        return None
    ident = table.this
    if not isinstance(ident, exp.Identifier) or not ident.quoted or is_identifier(ident.name):
        return None
    fmt = table.db.lower()
    path = ident.name.rstrip("/") or ident.name
    return PathRef(fmt, path, path_table_name(namespace, fmt, path))


def bind_paths(query: str, namespace: str) -> tuple[str, list[PathRef]]:
    """``query`` with each path reference replaced by its table's name (aliases kept; the
    bare reference gets no alias, as Spark names its columns without one), and the distinct
    references in order of appearance; ``query`` unchanged (same text) when it has none.

    Raises:
        ParseError: the query does not parse.
    """
    tree = parse_query(query)
    refs: list[PathRef] = []
    for table in list(tree.find_all(exp.Table)):
        ref = path_ref(table, namespace)
        if ref is None:
            continue
        if ref not in refs:
            refs.append(ref)
        plain = exp.to_table(ref.table.qualified, dialect=DIALECT)
        if table.args.get("alias") is not None:
            plain.set("alias", table.args["alias"])
        table.replace(plain)
    return (tree.sql(DIALECT) if refs else query), refs
