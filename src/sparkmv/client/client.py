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
from typing import TYPE_CHECKING, Any

from sparkmv.catalog import ControlCommand, ObjectKind, RefreshState, RunState, Trigger
from sparkmv.client.status import MvStatus, statuses
from sparkmv.config import Settings
from sparkmv.errors import ObjectNotFoundError, RefreshError
from sparkmv.names import ObjectName
from sparkmv.refresh.context import check_request
from sparkmv.refresh.executor import ProgressCallback, RefreshExecutor
from sparkmv.refresh.planner import RefreshRequest
from sparkmv.refresh.recovery import RecoveryOutcome, expired_runs, recover
from sparkmv.refresh.result import RefreshRun
from sparkmv.refresh.runtime import Runtime
from sparkmv.sql import statements as st
from sparkmv.sql.parser import parse_statement

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession


@dataclass(frozen=True)
class StatementResult:
    """What a statement produced: a DataFrame (queries) or a message (everything else)."""

    dataframe: DataFrame | None = None
    message: str | None = None
    run: RefreshRun | None = None


class Client:
    """sparkmv from Python.

    Args:
        home: state directory (default ``SPARKMV_HOME`` or ``./.sparkmv``).
        catalog_url: SQLAlchemy URL of the catalog (default SQLite in ``home``).
        spark: an existing SparkSession to use (default: one is created on first need).
        master, conf: Spark master and extra configuration for a new session.
        recover: resume runs whose lease expired when the client opens (cheap when none).

    Raises:
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
    ) -> None:
        self.settings = Settings.resolve(home, catalog_url, master, conf)
        self.runtime = Runtime(self.settings, spark=spark)
        if recover and expired_runs(self.runtime):
            self.recover()

    # -- statements -----------------------------------------------------------------------------
    def sql(self, statement: str) -> DataFrame | None:
        """Run one statement; a DataFrame for queries (SELECT, SHOW, DESCRIBE), else None.

        Raises:
            ParseError, AnalysisError, ObjectNotFoundError, ObjectExistsError, BusyError, ...:
            every error derives from :class:`SparkMvError`.
        """
        return self.execute(statement).dataframe

    def execute(self, statement: str, progress: ProgressCallback | None = None) -> StatementResult:
        """Run one statement and return its result (DataFrame, message, refresh run)."""
        from sparkmv.client import ddl
        from sparkmv.client.queries import run_query

        stmt = parse_statement(statement)
        rt = self.runtime
        match stmt:
            case st.Query(sql=sql):
                return StatementResult(dataframe=run_query(rt, sql))
            case st.CreateExternalTable():
                return StatementResult(message=ddl.create_external_table(rt, stmt))
            case st.CreateMaterializedView():
                message = ddl.create_materialized_view(rt, stmt)
                if not stmt.deferred and "already exists" not in message:
                    run = self.refresh(stmt.name.qualified, progress=progress)
                    return StatementResult(message=f"{message}; {_run_text(run)}", run=run)
                return StatementResult(message=message)
            case st.CreateRefreshableTable():
                from sparkmv.refresh.reload.ddl import create_refreshable_table

                return StatementResult(message=create_refreshable_table(rt, stmt))
            case st.RefreshMaterializedView():
                check_request(rt.catalog, rt.iceberg, stmt.name, stmt.start, stmt.end)
                if stmt.asynchronous:
                    run = self.request_refresh(stmt.name.qualified, RefreshRequest(stmt.force, stmt.start, stmt.end))
                    text = f"refresh of '{stmt.name}' queued as run {run.run_id}"
                    if run.state == RunState.MERGED:
                        text = f"refresh of '{stmt.name}' recorded as run {run.run_id}: {run.reason}"
                    return StatementResult(message=text, run=run)
                run = self.refresh(stmt.name.qualified, stmt.force, stmt.start, stmt.end, progress)
                return StatementResult(message=_run_text(run), run=run)
            case st.RefreshTable():
                run = self.refresh_table(stmt.name.qualified, progress=progress)
                return StatementResult(message=_run_text(run), run=run)
            case st.ExplainRefresh():
                from sparkmv.client.explain import explain_refresh

                return StatementResult(message=explain_refresh(rt, stmt.refresh))
            case st.CancelRefresh():
                return StatementResult(message=self.cancel(stmt.name.qualified))
            case st.DropObject():
                return StatementResult(message=ddl.drop_object(rt, stmt))
            case st.AlterMaterializedView():
                return StatementResult(message=ddl.alter_materialized_view(rt, stmt))
            case st.Show(what=what):
                return StatementResult(dataframe=self._show(what))
            case st.Describe(name=name):
                return StatementResult(dataframe=self._describe(name))
        raise AssertionError(f"unhandled statement {stmt!r}")

    # -- refresh ------------------------------------------------------------------------------------
    def refresh(
        self,
        name: str,
        force: bool = False,
        start: str | None = None,
        end: str | None = None,
        progress: ProgressCallback | None = None,
        trigger: Trigger = Trigger.MANUAL,
    ) -> RefreshRun:
        """Refresh materialized view ``name`` synchronously.

        Args:
            force: refresh every partition in range, changed or not.
            start / end: partition range (start inclusive, end exclusive).
            progress: called after each chunk with (chunks done, chunks planned, rows).

        Returns:
            The finished run (state SUCCESS, SKIPPED, FAILED or CANCELLED).

        Raises:
            ObjectNotFoundError: no such MV. InactiveError: the MV is inactive.
            BusyError: the MV is being refreshed (names state, run and owner).
        """
        mv = ObjectName.parse(name)
        check_request(self.runtime.catalog, self.runtime.iceberg, mv, start, end)
        request = RefreshRequest(force, start, end, automatic=trigger != Trigger.MANUAL)
        return RefreshExecutor(self.runtime, progress).refresh(mv, trigger, request)

    def request_refresh(self, name: str, request: RefreshRequest | None = None) -> RefreshRun:
        """Queue a refresh (``WITH ASYNC MODE``) for the scheduler; merged into a pending one."""
        from sparkmv.scheduler.requests import enqueue

        return enqueue(self.runtime, ObjectName.parse(name), request or RefreshRequest())

    def refresh_table(self, name: str, progress: ProgressCallback | None = None) -> RefreshRun:
        """``REFRESH TABLE``: reload a refreshable table from its associated source."""
        from sparkmv.refresh.reload.executor import reload_table

        return reload_table(self.runtime, ObjectName.parse(name), Trigger.MANUAL, progress)

    def recover(self) -> list[RecoveryOutcome]:
        """Resume every run whose lease expired (see :mod:`sparkmv.refresh.recovery`)."""
        return recover(self.runtime)

    # -- control ----------------------------------------------------------------------------------
    def _control(self, name: str, command: ControlCommand) -> int:
        obj = ObjectName.parse(name)
        with self.runtime.catalog.transaction() as s:
            row = self.runtime.catalog.objects.get(s, obj)
            if row.state == RefreshState.IDLE or row.current_run_id is None:
                raise RefreshError(f"'{obj}' is not being refreshed")
            self.runtime.catalog.control.send(s, row.id, row.current_run_id, command)
            return row.current_run_id

    def cancel(self, name: str) -> str:
        """Cancel the running refresh of ``name`` (it stops within seconds, MV unchanged).

        Raises:
            RefreshError: when nothing is running.
        """
        run_id = self._control(name, ControlCommand.CANCEL)
        return f"cancel requested for run {run_id} of '{ObjectName.parse(name)}'"

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
        return statuses(self.runtime, ObjectName.parse(name) if name else None)

    def runs(self, name: str, limit: int = 50) -> list[RefreshRun]:
        """Refresh runs of one object, newest first."""
        obj = ObjectName.parse(name)
        with self.runtime.catalog.transaction() as s:
            row = self.runtime.catalog.objects.get(s, obj)
            return [RefreshRun.from_row(r) for r in self.runtime.catalog.runs.list(s, row.id, limit)]

    def chunks(self, run_id: int) -> list[dict[str, Any]]:
        """Progress rows of one run: chunk id, partitions, completed, rows, files, attempts."""
        with self.runtime.catalog.transaction() as s:
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

    def _show(self, what: str) -> DataFrame:
        with self.runtime.catalog.transaction() as s:
            rows = self.runtime.catalog.objects.list(s)
        if what == "MATERIALIZED VIEWS":
            data = [
                (ObjectName(r.namespace, r.name).display, r.state, r.is_active, r.partition_by, r.refresh_scheme)
                for r in rows
                if r.kind == ObjectKind.MATERIALIZED_VIEW
            ]
            return self.spark.createDataFrame(
                data, "name string, state string, is_active boolean, partition_by string, refresh_scheme string"
            )
        data2 = [
            (ObjectName(r.namespace, r.name).display, r.kind, r.location, ",".join(r.partition_columns or []))
            for r in rows
        ]
        return self.spark.createDataFrame(data2, "name string, kind string, location string, partition_columns string")

    def _describe(self, name: ObjectName) -> DataFrame:
        from sparkmv.client.queries import table_dataframe

        with self.runtime.catalog.transaction() as s:
            row = self.runtime.catalog.objects.find(s, name)
        if row is None and not self.runtime.iceberg.exists(name) and name.namespace != "sparkmv":
            raise ObjectNotFoundError(f"table or view '{name}' does not exist")
        df = table_dataframe(self.runtime, name, empty=True)
        parts = set()
        if row is not None:
            parts = {c.lower() for c in (row.partition_columns or [])} | (
                {row.partition_by.lower()} if row.partition_by else set()
            )
        data = [(f.name, f.dataType.simpleString(), f.name.lower() in parts) for f in df.schema.fields]
        return self.spark.createDataFrame(data, "column string, type string, is_partition boolean")


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
