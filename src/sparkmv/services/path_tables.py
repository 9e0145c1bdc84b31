"""The external tables bound to path references (``parquet.`/data/x```,
:mod:`sparkmv.analysis.paths`): created when an MV's query first reads the path.

``CREATE MATERIALIZED VIEW m AS SELECT ... FROM parquet.`/data/x``` stores the query reading
``__smv_path_parquet_<hash>`` (an external table ``USING parquet LOCATION '/data/x'``), so the
MV is refreshed by PCT / INCREMENTAL like one over any external table of files; the same path
read by another MV of the namespace reuses the table. ``sparkmv pipeline run`` binds the path
references of SDP definitions the same way.
"""

from __future__ import annotations

import dataclasses
import threading

from sparkmv.analysis.paths import PathRef, bind_paths
from sparkmv.errors import ObjectExistsError, SparkMvError
from sparkmv.refresh.runtime import Runtime
from sparkmv.sql.statements import CreateExternalTable, CreateMaterializedView

_CREATING = threading.Lock()
"""Two datasets of a pipeline refreshing at once may read the same path: one creates it."""


def bind_statement(rt: Runtime, stmt: CreateMaterializedView) -> CreateMaterializedView:
    """``stmt`` reading the external tables of its path references (created when missing);
    ``stmt`` itself when its query has none.

    Raises:
        SourceError: a path that does not exist or holds no data of its format.
        ParseError: the query does not parse.
    """
    query, refs = bind_paths(stmt.query, stmt.name.namespace)
    if not refs:
        return stmt
    ensure_path_tables(rt, refs)
    return dataclasses.replace(stmt, query=query)


def ensure_path_tables(rt: Runtime, refs: list[PathRef]) -> list[PathRef]:
    """Create the external table of each reference that has none (its schema read now, as
    ``CREATE EXTERNAL TABLE`` does); the references created.

    Raises:
        SourceError: a path that does not exist or holds no data of its format, with the
            reference in the message.
        SparkMvError: a table of that name exists but reads another format or location.
    """
    created: list[PathRef] = []
    for ref in refs:
        with rt.catalog.read() as s:
            row = rt.catalog.objects.find(s, ref.table)
        if row is not None:
            _check_same(ref, row.format, row.location)
            continue
        with _CREATING:
            with rt.catalog.read() as s:
                if rt.catalog.objects.find(s, ref.table) is not None:
                    continue
            from sparkmv.services.ddl import create_external_table  # imports pyspark

            stmt = CreateExternalTable(ref.table, ref.path, ref.format, options=ref.options)
            try:
                create_external_table(rt, stmt)
            except ObjectExistsError:
                continue
            except SparkMvError as exc:
                raise type(exc)(f"{ref.format}.`{ref.path}`: {exc}") from exc
            created.append(ref)
    return created


def _check_same(ref: PathRef, fmt: str | None, location: str | None) -> None:
    from sparkmv.storage.warehouse import normalize

    if fmt != ref.format or normalize(location or "") != normalize(ref.path):
        raise SparkMvError(
            f"{ref.format}.`{ref.path}`: table {ref.table.qualified} already exists for "
            f"{fmt}.`{location}` (drop it to bind the path again)"
        )
