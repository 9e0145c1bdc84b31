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
from collections.abc import Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any

from sparkmv.catalog import ControlCommand, ObjectKind, RefreshState, RunState, Trigger
from sparkmv.client.results import Rows, StatementResult
from sparkmv.config import Settings
from sparkmv.errors import RefreshError, RefreshFailedError, SparkMvError
from sparkmv.names import ObjectName
from sparkmv.refresh.result import RefreshRun
from sparkmv.refresh.runtime import Runtime

# Everything that pulls in pyspark, pyiceberg or sqlglot is imported where it is used, so
# that catalog-only commands (status of runs, cancel, pause, resume) start fast.
if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from sparkmv.analysis.rewrite import RewriteResult
    from sparkmv.catalog.events import Event
    from sparkmv.catalog.expectations import ExpectationResult
    from sparkmv.catalog.pipelines import PipelineDataset
    from sparkmv.refresh.lifecycle import ProgressCallback
    from sparkmv.refresh.passes import PassResult
    from sparkmv.refresh.planner import RefreshRequest
    from sparkmv.refresh.recovery import RecoveryOutcome
    from sparkmv.services.status import MvStatus

__all__ = ["FAILED_STATES", "Client", "Rows", "StatementResult", "check_run"]

FAILED_STATES = (RunState.FAILED, RunState.CANCELLED)
"""Final states of a synchronous refresh that ``raise_on_failure`` turns into an error."""


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
        from sparkmv.client.statements import execute_statement

        result = execute_statement(self, statement, progress, prefer_rows)
        if raise_on_failure and result.run is not None:
            check_run(result.run)
        if raise_on_failure and result.failure is not None:
            raise RefreshFailedError(result.failure, result)
        return result

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

    def refresh_many(
        self,
        names: Sequence[str | ObjectName] | None = None,
        force: bool = False,
        *,
        max_concurrent: int | None = None,
        raise_on_failure: bool = False,
    ) -> PassResult:
        """Refresh several materialized views as one pass (``REFRESH MATERIALIZED VIEW a, b``;
        ``names`` None: every active MV, ``REFRESH ALL MATERIALIZED VIEWS``), in dependency
        order, independent ones concurrently, each change read once for all
        (:mod:`sparkmv.refresh.passes`); each MV is its own run and its own atomic publish.

        Returns:
            Each MV's finished run, and the MVs not run with why.

        Raises:
            ObjectNotFoundError / InactiveError: a name is no active MV (nothing refreshed).
            RefreshFailedError: with ``raise_on_failure=True``, when a run did not succeed
                or an MV was not run (``refresh pass: <n> of <m> materialized views did
                not refresh: ...``); its ``run`` is the :class:`PassResult`.
        """
        from sparkmv.refresh.passes import DEFAULT_CONCURRENCY, refresh_pass
        from sparkmv.refresh.planner import RefreshRequest

        if names is None:
            with self.runtime.catalog.read() as s:
                rows = self.runtime.catalog.objects.list(s, ObjectKind.MATERIALIZED_VIEW)
                chosen = [ObjectName(r.namespace, r.name) for r in rows if not r.inactive_reason]
        else:
            chosen = [_object_name(n) for n in names]
        result = refresh_pass(
            self.runtime, chosen, RefreshRequest(force), max_concurrent=max_concurrent or DEFAULT_CONCURRENCY
        )
        if raise_on_failure and result.failed:
            raise RefreshFailedError(result.failure_text(len(chosen)), result)
        return result

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

    def status_has(self, name: ObjectName) -> bool:
        """True when ``name`` is a materialized view of the catalog (``sparkmv status`` lists it)."""
        with self.runtime.catalog.read() as s:
            row = self.runtime.catalog.objects.find(s, name)
            return row is not None and row.kind == ObjectKind.MATERIALIZED_VIEW

    def pipeline_datasets(self, pipeline: str | None = None) -> list[PipelineDataset]:
        """The datasets of the pipeline projects run (of ``pipeline`` when given), SQL and
        Python, with their newest outcome (``sparkmv.pipeline_datasets``)."""
        return self.runtime.catalog.pipelines.list(pipeline)

    def runs(self, name: str, limit: int = 50) -> list[RefreshRun]:
        """Refresh runs of one object, newest first."""
        obj = ObjectName.parse(name)
        with self.runtime.catalog.read() as s:
            row = self.runtime.catalog.objects.get(s, obj)
            return [RefreshRun.from_row(r) for r in self.runtime.catalog.runs.list(s, row.id, limit)]

    def events(
        self,
        pipeline: str | None = None,
        since: datetime | None = None,
        after_id: int = 0,
        limit: int | None = None,
    ) -> list[Event]:
        """Events of the event log (``sparkmv.pipeline_events``) in the order they happened:
        of ``pipeline`` when given, at or after ``since`` (UTC, naive), with an id above
        ``after_id`` (to follow the log); ``limit``: the newest that many."""
        with self.runtime.catalog.read() as s:
            return self.runtime.catalog.events.list(s, pipeline, since, after_id, limit=limit)

    def expectation_results(self, name: str, run_ids: Sequence[int] | None = None) -> list[ExpectationResult]:
        """The expectation results of dataset ``name`` (of the runs ``run_ids`` when given),
        newest first: expectation, action, condition, rows passed and failed, run id."""
        display = ObjectName.parse(name).display
        with self.runtime.catalog.read() as s:
            return self.runtime.catalog.expectations.list(s, display, run_ids)

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


def _object_name(name: str | ObjectName) -> ObjectName:
    """A statement's name is already parsed; a name given as text is parsed here, once."""
    return name if isinstance(name, ObjectName) else ObjectName.parse(name)


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
