"""The Python API: :class:`Client`.

>>> import sparkmv                                         # doctest: +SKIP
>>> c = sparkmv.Client(home="/tmp/demo")                   # doctest: +SKIP
>>> c.sql("CREATE EXTERNAL TABLE li USING parquet LOCATION '/data/lineitem'")  # doctest: +SKIP
>>> c.sql("CREATE MATERIALIZED VIEW rev PARTITION BY m AS "
...       "SELECT l_shipmonth AS m, sum(l_extendedprice) AS revenue FROM li GROUP BY 1")  # doctest: +SKIP
>>> c.refresh("rev").state                                 # doctest: +SKIP
'SKIPPED'
>>> c.table("rev").count()                                 # doctest: +SKIP
84
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from types import ModuleType
from typing import TYPE_CHECKING, Any

from sparkmv.catalog import ControlCommand, ObjectKind, RefreshState, RunState, Trigger
from sparkmv.config import Settings
from sparkmv.errors import ObjectNotFoundError, RefreshError, RefreshFailedError, SparkMvError
from sparkmv.names import ObjectName
from sparkmv.refresh.result import RefreshRun
from sparkmv.refresh.runtime import Runtime

# Everything that pulls in pyspark, pyiceberg or sqlglot is imported where it is used, so
# that catalog-only commands (status of runs, cancel, pause, resume) start fast.
if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from sparkmv.analysis.rewrite import RewriteResult
    from sparkmv.refresh.lifecycle import ProgressCallback
    from sparkmv.refresh.planner import RefreshRequest
    from sparkmv.refresh.recovery import RecoveryOutcome
    from sparkmv.services.status import MvStatus

FAILED_STATES = (RunState.FAILED, RunState.CANCELLED)
"""Final states of a synchronous refresh that ``raise_on_failure`` turns into an error."""


@dataclass(frozen=True)
class Rows:
    """A result read from the catalog alone (``SHOW ...``, system tables): printed without Spark.

    Attributes:
        columns: column names; rows: the rows, in column order.
        schema: Spark DDL of the columns, when known (for a DataFrame).
    """

    columns: list[str]
    rows: list[tuple[Any, ...]]
    schema: str | None = None


@dataclass(frozen=True)
class StatementResult:
    """What a statement produced: a DataFrame (queries), rows read from the catalog alone
    (``SHOW``), or a message (everything else)."""

    dataframe: DataFrame | None = None
    message: str | None = None
    run: RefreshRun | None = None
    rows: Rows | None = None


class Client:
    """sparkmv from Python.

    Args:
        home: state directory (default ``SPARKMV_HOME`` or ``./.sparkmv``).
        catalog_url: SQLAlchemy URL of the catalog (default SQLite in ``home``).
        spark: an existing SparkSession to use, classic or Spark Connect (default: one is
            created on first need).
        master, conf: Spark master (``local[*]``, ``spark://host:port``, ``yarn``,
            ``k8s://...``) and extra configuration for a new session.
        remote: Spark Connect URL (``sc://host:port``) for a new session instead of a master
            (default ``SPARKMV_SPARK_REMOTE``).
        recover: resume runs whose lease expired when the client opens (cheap when none).
        rewrite: answer queries from fresh-enough materialized views (query rewrite, see
            :mod:`sparkmv.services.rewrite`); also ``SET enable_materialized_view_rewrite``.

    Raises:
        SparkMvError: when both ``master`` and ``remote`` are given.
        CatalogError: when the catalog database cannot be opened.
    """

    def __init__(
        self,
        home: str | os.PathLike[str] | None = None,
        catalog_url: str | None = None,
        spark: SparkSession | None = None,
        master: str | None = None,
        conf: dict[str, str] | None = None,
        recover: bool = True,
        remote: str | None = None,
        rewrite: bool = True,
    ) -> None:
        if master and remote:
            raise SparkMvError("give a Spark master or a Spark Connect remote, not both")
        self.rewrite_enabled = rewrite
        self.settings = Settings.resolve(home, catalog_url, master, conf, remote=remote)
        self.runtime = Runtime(self.settings, spark=spark)
        if recover and self._has_expired_runs():
            self.recover()

    def _has_expired_runs(self) -> bool:
        with self.runtime.catalog.read() as s:
            return bool(self.runtime.catalog.objects.expired_leases(s))

    # -- statements -----------------------------------------------------------------------------
    def sql(self, statement: str, raise_on_failure: bool = False) -> DataFrame | None:
        """Run one statement; a DataFrame for queries (SELECT, SHOW, DESCRIBE), else None.

        A refresh whose run ends FAILED or CANCELLED is not an error by default (the run is
        recorded; :meth:`execute` returns it); with ``raise_on_failure=True`` it raises
        :class:`RefreshFailedError` carrying the run.

        Raises:
            ParseError, AnalysisError, ObjectNotFoundError, ObjectExistsError, BusyError, ...:
            every error derives from :class:`SparkMvError`.
        """
        result = self.execute(statement, raise_on_failure=raise_on_failure)
        if result.rows is not None:
            return self.spark.createDataFrame(result.rows.rows, result.rows.schema or result.rows.columns)
        return result.dataframe

    def execute(
        self,
        statement: str,
        progress: ProgressCallback | None = None,
        raise_on_failure: bool = False,
        prefer_rows: bool = False,
    ) -> StatementResult:
        """Run one statement and return its result (DataFrame, message, refresh run).

        Returns:
            The result; for a synchronous refresh (``REFRESH MATERIALIZED VIEW``,
            ``REFRESH TABLE``, the first build of ``CREATE MATERIALIZED VIEW``) ``run`` is
            the finished run, whatever its state.

        Raises:
            RefreshFailedError: with ``raise_on_failure=True``, when that run ended FAILED or
                CANCELLED (SKIPPED and MERGED are successes).
            SparkMvError: every other error (see :meth:`sql`).

        With ``prefer_rows`` (for callers that only print), a query that reads system tables
        only is answered as ``rows`` from the catalog without Spark when it can be.
        """
        result = self._execute(statement, progress, prefer_rows)
        if raise_on_failure and result.run is not None:
            check_run(result.run)
        return result

    def _execute(self, statement: str, progress: ProgressCallback | None, prefer_rows: bool) -> StatementResult:
        from sparkmv.refresh.planner import RefreshRequest
        from sparkmv.sql import statements as st
        from sparkmv.sql.parser import parse_statement

        stmt = parse_statement(statement)
        rt = self.runtime
        match stmt:
            case st.Query(sql=sql):
                if prefer_rows:
                    from sparkmv.client.catalog_query import system_table_rows

                    answer = system_table_rows(rt, sql)
                    if answer is not None:
                        return StatementResult(rows=Rows(*answer))
                from sparkmv.client.queries import run_query, run_rewritten

                if self.rewrite_enabled:
                    from sparkmv.services.rewrite_log import rewrite_logged

                    rewritten = rewrite_logged(rt, sql)  # also recorded in sparkmv.rewrite_log
                    if rewritten.rewritten:
                        return StatementResult(dataframe=run_rewritten(rt, rewritten.sql, rewritten.mvs))
                return StatementResult(dataframe=run_query(rt, sql))
            case st.ExplainQuery(sql=sql):
                from sparkmv.client.explain import explain_query
                from sparkmv.services.rewrite import rewrite

                return StatementResult(message=explain_query(rewrite(rt, sql, count=False), self.rewrite_enabled))
            case st.SetVariable(name=name, value=value):
                self.rewrite_enabled = value
                return StatementResult(message=f"{name} = {str(value).lower()}")
            case st.CreateExternalTable():
                return StatementResult(message=_ddl().create_external_table(rt, stmt))
            case st.CreateExternalCatalog():
                from sparkmv.services.catalogs import create_external_catalog

                return StatementResult(message=create_external_catalog(rt, stmt))
            case st.DropCatalog():
                from sparkmv.services.catalogs import drop_catalog

                return StatementResult(message=drop_catalog(rt, stmt))
            case st.CreateMaterializedView():
                message = _ddl().create_materialized_view(rt, stmt)
                if not stmt.deferred and "already exists" not in message:
                    run = self.refresh(stmt.name, progress=progress)
                    return StatementResult(message=f"{message}; {_run_text(run)}", run=run)
                return StatementResult(message=message)
            case st.CreateRefreshableTable():
                return StatementResult(message=_ddl().create_table(rt, stmt))
            case st.RefreshMaterializedView():
                from sparkmv.refresh.context import check_request

                check_request(rt.catalog, rt.iceberg, stmt.name, stmt.start, stmt.end)
                if stmt.asynchronous:
                    request = RefreshRequest(stmt.force, stmt.start, stmt.end)
                    return _queued_result(stmt.name, self.request_refresh(stmt.name, request))
                run = self.refresh(stmt.name, stmt.force, stmt.start, stmt.end, progress)
                return StatementResult(message=_run_text(run), run=run)
            case st.RefreshTable():
                if stmt.asynchronous:
                    return _queued_result(stmt.name, self.request_table_refresh(stmt.name))
                run = self.refresh_table(stmt.name, progress=progress)
                return StatementResult(message=_run_text(run), run=run)
            case st.ExplainRefresh():
                from sparkmv.client.explain import explain_refresh

                return StatementResult(message=explain_refresh(rt, stmt.refresh))
            case st.CancelRefresh():
                return StatementResult(message=self.cancel(stmt.name))
            case st.DropObject():
                return StatementResult(message=_ddl().drop_object(rt, stmt))
            case st.AlterMaterializedView():
                return StatementResult(message=_ddl().alter_materialized_view(rt, stmt))
            case st.Show(what=what):
                return StatementResult(rows=self._show(what))
            case st.Describe(name=name, extended=extended):
                return StatementResult(dataframe=self._describe(name, extended))
        raise AssertionError(f"unhandled statement {stmt!r}")

    def rewrite(self, sql: str) -> RewriteResult:
        """Query rewrite of SELECT ``sql`` without running it: the SQL to run (over the MVs
        used, which must be read with their hidden state columns), the MVs used and why,
        and each rejected MV with its reason. Counts in ``sparkmv_mv_rewrite_total``; not
        recorded in ``sparkmv.rewrite_log`` (which records the queries :meth:`sql` runs).

        Raises:
            ParseError: when ``sql`` is not one SELECT.
        """
        from sparkmv.services.rewrite import rewrite

        return rewrite(self.runtime, sql)

    # -- refresh ------------------------------------------------------------------------------------
    def refresh(
        self,
        name: str | ObjectName,
        force: bool = False,
        start: str | None = None,
        end: str | None = None,
        progress: ProgressCallback | None = None,
        trigger: Trigger = Trigger.MANUAL,
        *,
        raise_on_failure: bool = False,
    ) -> RefreshRun:
        """Refresh materialized view ``name`` synchronously.

        Args:
            force: refresh every partition in range, changed or not.
            start / end: partition range (start inclusive, end exclusive).
            progress: called after each chunk with (chunks done, chunks planned, rows).
            raise_on_failure: raise instead of returning a FAILED or CANCELLED run.

        Returns:
            The finished run (state SUCCESS, SKIPPED, FAILED or CANCELLED): a failed
            refresh is returned, not raised, unless ``raise_on_failure``.

        Raises:
            ObjectNotFoundError: no such MV. InactiveError: the MV is inactive.
            BusyError: the MV is being refreshed (names state, run and owner).
            RefreshFailedError: with ``raise_on_failure=True``, when the run ends FAILED or
                CANCELLED (its ``run`` attribute is the run).
        """
        from sparkmv.refresh.context import check_request
        from sparkmv.refresh.planner import RefreshRequest
        from sparkmv.refresh.run_now import refresh_mv

        mv = _object_name(name)
        check_request(self.runtime.catalog, self.runtime.iceberg, mv, start, end)
        request = RefreshRequest(force, start, end, automatic=trigger != Trigger.MANUAL)
        run = refresh_mv(self.runtime, mv, trigger, request, progress)
        return check_run(run) if raise_on_failure else run

    def request_refresh(self, name: str | ObjectName, request: RefreshRequest | None = None) -> RefreshRun:
        """Queue a refresh (``WITH ASYNC MODE``) for the scheduler; merged into a pending one."""
        from sparkmv.refresh.planner import RefreshRequest
        from sparkmv.scheduler.requests import enqueue

        return enqueue(self.runtime, _object_name(name), request or RefreshRequest())

    def request_table_refresh(self, name: str | ObjectName) -> RefreshRun:
        """Queue a reload of a refreshable table (``REFRESH TABLE ... WITH ASYNC MODE``) for the
        scheduler; merged into a pending one.

        Returns:
            The PENDING run, or a MERGED run naming the pending run it was merged into.

        Raises:
            ObjectNotFoundError: no such table. RefreshError: the table is not refreshable.
        """
        from sparkmv.scheduler.requests import enqueue_table

        return enqueue_table(self.runtime, _object_name(name))

    def refresh_table(
        self, name: str | ObjectName, progress: ProgressCallback | None = None, *, raise_on_failure: bool = False
    ) -> RefreshRun:
        """``REFRESH TABLE``: reload a refreshable table from its associated source.

        Returns:
            The finished run; a FAILED or CANCELLED run is returned unless
            ``raise_on_failure``, which raises :class:`RefreshFailedError` instead.
        """
        from sparkmv.refresh.run_now import reload_table

        run = reload_table(self.runtime, _object_name(name), Trigger.MANUAL, progress)
        return check_run(run) if raise_on_failure else run

    def recover(self) -> list[RecoveryOutcome]:
        """Resume every run whose lease expired (see :mod:`sparkmv.refresh.recovery`)."""
        from sparkmv.refresh.recovery import recover

        return recover(self.runtime)

    # -- control ----------------------------------------------------------------------------------
    def _control(self, name: str | ObjectName, command: ControlCommand) -> int:
        obj = _object_name(name)
        with self.runtime.catalog.transaction() as s:
            row = self.runtime.catalog.objects.get(s, obj)
            if row.state == RefreshState.IDLE or row.current_run_id is None:
                raise RefreshError(f"'{obj}' is not being refreshed")
            self.runtime.catalog.control.send(s, row.id, row.current_run_id, command)
            return row.current_run_id

    def cancel(self, name: str | ObjectName) -> str:
        """Cancel the running refresh of ``name`` (it stops within seconds, MV unchanged).

        Raises:
            RefreshError: when nothing is running.
        """
        run_id = self._control(name, ControlCommand.CANCEL)
        return f"cancel requested for run {run_id} of '{_object_name(name)}'"

    def pause(self, name: str) -> str:
        """Hold the running refresh of ``name`` before its next chunk."""
        run_id = self._control(name, ControlCommand.PAUSE)
        return f"pause requested for run {run_id}"

    def resume(self, name: str) -> str:
        """Continue a paused refresh."""
        run_id = self._control(name, ControlCommand.RESUME)
        return f"resume requested for run {run_id}"

    # -- reading ------------------------------------------------------------------------------------
    def table(self, name: str) -> DataFrame:
        """The current contents of a table or MV (its current Iceberg snapshot).

        Raises:
            ObjectNotFoundError: when it does not exist.
        """
        from sparkmv.client.queries import table_dataframe

        return table_dataframe(self.runtime, ObjectName.parse(name, allow_reserved=True))

    def status(self, name: str | None = None) -> list[MvStatus]:
        """Status of every MV (or one): state, rows, partitions, last refresh, freshness."""
        from sparkmv.services.status import statuses

        return statuses(self.runtime, ObjectName.parse(name) if name else None)

    def runs(self, name: str, limit: int = 50) -> list[RefreshRun]:
        """Refresh runs of one object, newest first."""
        obj = ObjectName.parse(name)
        with self.runtime.catalog.read() as s:
            row = self.runtime.catalog.objects.get(s, obj)
            return [RefreshRun.from_row(r) for r in self.runtime.catalog.runs.list(s, row.id, limit)]

    def chunks(self, run_id: int) -> list[dict[str, Any]]:
        """Progress rows of one run: chunk id, partitions, completed, rows, files, attempts."""
        with self.runtime.catalog.read() as s:
            return [
                {
                    "chunk_id": c.chunk_id,
                    "partitions": c.partitions,
                    "is_completed": c.is_completed,
                    "processed_rows": c.processed_rows,
                    "bytes_written": c.bytes_written,
                    "files_written": c.files_written,
                    "attempts": c.attempts,
                    "duration_seconds": c.duration_seconds,
                    "last_checkpoint": c.last_checkpoint,
                }
                for c in self.runtime.catalog.runs.chunks(s, run_id)
            ]

    @property
    def spark(self) -> SparkSession:
        """The SparkSession this client uses."""
        return self.runtime.spark

    def close(self) -> None:
        """Release catalog connections."""
        self.runtime.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _show(self, what: str) -> Rows:
        if what == "CATALOGS":
            from sparkmv.services import catalogs

            return Rows(catalogs.SHOW_COLUMNS, catalogs.show_catalogs(self.runtime), catalogs.SHOW_SCHEMA)
        from sparkmv.client.system_tables import table_format

        with self.runtime.catalog.read() as s:
            rows = self.runtime.catalog.objects.list(s)
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

    def _describe(self, name: ObjectName, extended: bool = False) -> DataFrame:
        from sparkmv.client.queries import table_dataframe
        from sparkmv.client.system_tables import describe_extended

        with self.runtime.catalog.read() as s:
            row = self.runtime.catalog.objects.find(s, name)
        if row is None and not self.runtime.iceberg.exists(name) and name.namespace != "sparkmv":
            raise ObjectNotFoundError(f"table or view '{name}' does not exist")
        df = table_dataframe(self.runtime, name, empty=True)
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
        return self.spark.createDataFrame(data, "column string, type string, is_partition boolean")


def _queued_result(name: ObjectName, run: RefreshRun) -> StatementResult:
    text = f"refresh of '{name}' queued as run {run.run_id}"
    if run.state == RunState.MERGED:
        text = f"refresh of '{name}' recorded as run {run.run_id}: {run.reason}"
    return StatementResult(message=text, run=run)


def _object_name(name: str | ObjectName) -> ObjectName:
    """A statement's name is already parsed; a name given as text is parsed here, once."""
    return name if isinstance(name, ObjectName) else ObjectName.parse(name)


def _ddl() -> ModuleType:
    """The DDL module, imported on first use (it imports pyspark)."""
    from sparkmv.services import ddl

    return ddl


def check_run(run: RefreshRun) -> RefreshRun:
    """``run`` itself when it did not end FAILED or CANCELLED.

    Raises:
        RefreshFailedError: ``run <id> of '<name>' FAILED: <error>`` (or CANCELLED), with
            the run attached.
    """
    if run.state not in FAILED_STATES:
        return run
    reason = f": {run.error}" if run.error else ""
    raise RefreshFailedError(f"refresh run {run.run_id} of '{run.name}' {run.state}{reason}", run)


def _run_text(run: RefreshRun) -> str:
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
