"""Running one parsed statement for :class:`~sparkmv.client.client.Client`: queries (with
query rewrite), definitions (DDL), refreshes, and the catalog's own views (SHOW, DESCRIBE).

Everything that pulls in pyspark, pyiceberg or sqlglot is imported where it is used, so that
catalog-only statements start fast.
"""

from __future__ import annotations

from types import ModuleType
from typing import TYPE_CHECKING

from sparkmv.catalog import ObjectKind, RunState
from sparkmv.client.results import Rows, StatementResult
from sparkmv.errors import ObjectNotFoundError
from sparkmv.names import ObjectName
from sparkmv.refresh.result import RefreshRun

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

    from sparkmv.client.client import Client
    from sparkmv.refresh.lifecycle import ProgressCallback
    from sparkmv.sql import statements as st


def execute_statement(
    client: Client, statement: str, progress: ProgressCallback | None, prefer_rows: bool
) -> StatementResult:
    """Parse and run one statement (see :meth:`Client.execute`).

    Raises:
        SparkMvError: a parse error, or whatever the statement raises.
    """
    from sparkmv.sql import statements as st
    from sparkmv.sql.parser import parse_statement

    stmt = parse_statement(statement)
    if isinstance(stmt, st.Query | st.ExplainQuery | st.SetVariable):
        return _query(client, stmt, prefer_rows)
    if isinstance(stmt, st.RefreshMaterializedViews):
        return _refresh_pass(client, stmt)
    if isinstance(stmt, st.RefreshMaterializedView | st.RefreshTable | st.ExplainRefresh | st.CancelRefresh):
        return _refresh(client, stmt, progress)
    if isinstance(stmt, st.Show):
        return StatementResult(rows=show(client, stmt.what))
    if isinstance(stmt, st.Describe):
        return StatementResult(dataframe=describe(client, stmt.name, stmt.extended))
    return _definition(client, stmt, progress)


def _query(client: Client, stmt: st.Query | st.ExplainQuery | st.SetVariable, prefer_rows: bool) -> StatementResult:
    """SELECT (answered from the catalog, from MVs by query rewrite, or as written),
    EXPLAIN of a SELECT, and ``SET enable_materialized_view_rewrite``."""
    from sparkmv.sql import statements as st

    rt = client.runtime
    if isinstance(stmt, st.SetVariable):
        client.rewrite_enabled = stmt.value
        return StatementResult(message=f"{stmt.name} = {str(stmt.value).lower()}")
    if isinstance(stmt, st.ExplainQuery):
        from sparkmv.client.explain import explain_query
        from sparkmv.services.rewrite import rewrite

        return StatementResult(message=explain_query(rewrite(rt, stmt.sql, count=False), client.rewrite_enabled))
    if prefer_rows:
        from sparkmv.client.catalog_query import system_table_rows

        answer = system_table_rows(rt, stmt.sql)
        if answer is not None:
            return StatementResult(rows=Rows(*answer))
    from sparkmv.client.queries import run_query, run_rewritten

    if client.rewrite_enabled:
        from sparkmv.services.rewrite_log import rewrite_logged

        rewritten = rewrite_logged(rt, stmt.sql)  # also recorded in sparkmv.rewrite_log
        if rewritten.rewritten:
            return StatementResult(dataframe=run_rewritten(rt, rewritten.sql, rewritten.mvs))
    return StatementResult(dataframe=run_query(rt, stmt.sql))


def _refresh_pass(client: Client, stmt: st.RefreshMaterializedViews) -> StatementResult:
    """``REFRESH MATERIALIZED VIEW a, b, ...`` / ``REFRESH ALL MATERIALIZED VIEWS``: a line
    per MV (``<name>: run 7: SUCCESS (...)`` or ``<name>: not run: ...``), in the order given
    (ALL: the order they finished)."""
    result = client.refresh_many(None if stmt.every else list(stmt.names), stmt.force)
    order = list(stmt.names) if not stmt.every else [*result.runs, *result.not_run]
    lines = [
        f"{name.display}: {run_text(result.runs[name]) if name in result.runs else result.not_run[name]}"
        for name in order
    ]
    if not lines:
        lines = ["no materialized view to refresh"]
    failure = result.failure_text(len(order)) if result.failed else None
    return StatementResult(message="\n".join(lines), failure=failure)


def _refresh(client: Client, stmt: st.Statement, progress: ProgressCallback | None) -> StatementResult:
    """REFRESH MATERIALIZED VIEW / TABLE (synchronous or queued), EXPLAIN REFRESH, CANCEL."""
    from sparkmv.refresh.planner import RefreshRequest
    from sparkmv.sql import statements as st

    rt = client.runtime
    if isinstance(stmt, st.RefreshMaterializedView):
        from sparkmv.refresh.context import check_request

        check_request(rt.catalog, rt.iceberg, stmt.name, stmt.start, stmt.end)
        if stmt.asynchronous:
            request = RefreshRequest(stmt.force, stmt.start, stmt.end)
            return _queued_result(stmt.name, client.request_refresh(stmt.name, request))
        run = client.refresh(stmt.name, stmt.force, stmt.start, stmt.end, progress)
        return StatementResult(message=run_text(run), run=run)
    if isinstance(stmt, st.RefreshTable):
        if stmt.asynchronous:
            return _queued_result(stmt.name, client.request_table_refresh(stmt.name))
        run = client.refresh_table(stmt.name, progress=progress)
        return StatementResult(message=run_text(run), run=run)
    if isinstance(stmt, st.ExplainRefresh):
        from sparkmv.client.explain import analyzed_text, explain_refresh

        estimate = explain_refresh(rt, stmt.refresh)
        if not stmt.analyze:
            return StatementResult(message=estimate)
        r = stmt.refresh
        run = client.refresh(r.name, r.force, r.start, r.end, progress)
        return StatementResult(message=estimate + "\n" + analyzed_text(run), run=run)
    assert isinstance(stmt, st.CancelRefresh), stmt
    return StatementResult(message=client.cancel(stmt.name))


def _definition(client: Client, stmt: st.Statement, progress: ProgressCallback | None) -> StatementResult:
    """CREATE / ALTER / DROP of tables, MVs and external catalogs (a non-deferred MV is
    built by its first refresh, here; CREATE OR REPLACE builds the new definition hidden and
    swaps it in, :mod:`sparkmv.services.replace`)."""
    from sparkmv.sql import statements as st

    rt = client.runtime
    if isinstance(stmt, st.CreateMaterializedView):
        from sparkmv.services.path_tables import bind_statement

        stmt = bind_statement(rt, stmt)  # format.`path` references read as external tables
    if isinstance(stmt, st.CreateMaterializedView) and stmt.or_replace:
        from sparkmv.services.replace import replace_materialized_view

        replaced = replace_materialized_view(rt, stmt, progress)
        text = replaced.message if not replaced.replaced else f"{replaced.message}; {run_text(replaced.run)}"
        return StatementResult(message=text, run=replaced.run)
    if isinstance(stmt, st.CreateMaterializedView):
        message = _ddl().create_materialized_view(rt, stmt)
        if not stmt.deferred and "already exists" not in message:
            run = client.refresh(stmt.name, progress=progress)
            return StatementResult(message=f"{message}; {run_text(run)}", run=run)
        return StatementResult(message=message)
    if isinstance(stmt, st.CreateExternalCatalog | st.DropCatalog):
        from sparkmv.services import catalogs

        if isinstance(stmt, st.DropCatalog):
            return StatementResult(message=catalogs.drop_catalog(rt, stmt))
        return StatementResult(message=catalogs.create_external_catalog(rt, stmt))
    handlers = {
        st.CreateExternalTable: "create_external_table",
        st.CreateRefreshableTable: "create_table",
        st.DropObject: "drop_object",
        st.AlterMaterializedView: "alter_materialized_view",
    }
    handler = handlers.get(type(stmt))
    if handler is None:
        raise AssertionError(f"unhandled statement {stmt!r}")
    return StatementResult(message=getattr(_ddl(), handler)(rt, stmt))


def show(client: Client, what: str) -> Rows:
    """``SHOW CATALOGS`` / ``SHOW MATERIALIZED VIEWS`` / ``SHOW TABLES``, read from the catalog."""
    if what == "CATALOGS":
        from sparkmv.services import catalogs

        return Rows(catalogs.SHOW_COLUMNS, catalogs.show_catalogs(client.runtime), catalogs.SHOW_SCHEMA)
    from sparkmv.client.system_tables import table_format

    with client.runtime.catalog.read() as s:
        rows = client.runtime.catalog.objects.list(s)
    if what == "MATERIALIZED VIEWS":
        data = [
            (ObjectName(r.namespace, r.name).display, r.state, r.is_active, r.partition_by, r.refresh_scheme)
            for r in rows
            if r.kind == ObjectKind.MATERIALIZED_VIEW
        ]
        schema = "name string, state string, is_active boolean, partition_by string, refresh_scheme string"
        return Rows(["name", "state", "is_active", "partition_by", "refresh_scheme"], data, schema)
    data2 = [
        (
            ObjectName(r.namespace, r.name).display,
            r.kind,
            r.location,
            ",".join(r.partition_columns or []),
            table_format(r),
        )
        for r in rows
    ]
    schema = "name string, kind string, location string, partition_columns string, format string"
    return Rows(["name", "kind", "location", "partition_columns", "format"], data2, schema)


def describe(client: Client, name: ObjectName, extended: bool = False) -> DataFrame:
    """``DESCRIBE [EXTENDED] name``: columns ``column``, ``type``, ``is_partition`` (and the
    object's properties with EXTENDED).

    Raises:
        ObjectNotFoundError: ``table or view '<name>' does not exist``.
    """
    from sparkmv.client.queries import table_dataframe
    from sparkmv.client.system_tables import describe_extended

    rt = client.runtime
    with rt.catalog.read() as s:
        row = rt.catalog.objects.find(s, name)
    if row is None and not rt.iceberg.exists(name) and name.namespace != "sparkmv":
        raise ObjectNotFoundError(f"table or view '{name}' does not exist")
    df = table_dataframe(rt, name, empty=True)
    parts = set()
    if row is not None:
        parts = {c.lower() for c in (row.partition_columns or [])} | (
            {row.partition_by.lower()} if row.partition_by else set()
        )
    data: list[tuple[str, str | None, bool | None]] = [
        (f.name, f.dataType.simpleString(), f.name.lower() in parts) for f in df.schema.fields
    ]
    if extended:
        data += [(f"# {key}", value, None) for key, value in describe_extended(row, name)]
    return client.spark.createDataFrame(data, "column string, type string, is_partition boolean")


def _queued_result(name: ObjectName, run: RefreshRun) -> StatementResult:
    text = f"refresh of '{name}' queued as run {run.run_id}"
    if run.state == RunState.MERGED:
        text = f"refresh of '{name}' recorded as run {run.run_id}: {run.reason}"
    return StatementResult(message=text, run=run)


def _ddl() -> ModuleType:
    """The DDL module, imported on first use (it imports pyspark)."""
    from sparkmv.services import ddl

    return ddl


def run_text(run: RefreshRun) -> str:
    """One line about a finished run: ``run 7: SUCCESS (PCT: ...), 2 partitions, 1 chunks,
    40 rows in 1.2 s`` (the error of a failed one)."""
    text = f"run {run.run_id}: {run.state}"
    if run.mode:
        text += f" ({run.mode}: {run.reason})"
    if run.state == RunState.SUCCESS:
        text += f", {run.partitions_done} partitions, {run.chunks_done} chunks, {run.rows_written} rows"
        if run.duration_seconds is not None:
            text += f" in {run.duration_seconds:.1f} s"
    if run.error:
        text += f": {run.error}"
    return text
