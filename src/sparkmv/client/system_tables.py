"""System tables readable with SELECT: ``sparkmv.materialized_views``, ``sparkmv.task_runs``,
``sparkmv.refresh_progress``, ``sparkmv.refresh_table_state``, ``sparkmv.tasks``,
``sparkmv.rewrite_log``, ``sparkmv.tables``, ``sparkmv.pipeline_datasets``, ``sparkmv.cost_model``,
and those of :mod:`sparkmv.client.event_tables` (``sparkmv.expectations``,
``sparkmv.pipeline_events``).

Each is built from the catalog when a query names it: rows in plain Python (no Spark), made
a Spark DataFrame with a fixed schema when a query needs Spark (column names are a contract).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

from sparkmv.catalog import ObjectKind
from sparkmv.catalog.models import ObjectRow
from sparkmv.client import event_tables
from sparkmv.names import ObjectName
from sparkmv.refresh.runtime import Runtime
from sparkmv.services.status import statuses

if TYPE_CHECKING:  # rows are read from the catalog without Spark; a DataFrame is made on request
    from pyspark.sql import DataFrame

S, L, B, T, D = "string", "bigint", "boolean", "timestamp_ntz", "double"


@dataclass(frozen=True)
class SystemSchema:
    """Columns of a system table: names and Spark SQL types (``bigint``, ``timestamp_ntz``)."""

    columns: tuple[tuple[str, str], ...]

    @property
    def names(self) -> list[str]:
        """Column names, in order."""
        return [name for name, _ in self.columns]

    @property
    def ddl(self) -> str:
        """Spark DDL (``run_id bigint, mv_name string``) for ``createDataFrame``."""
        return ", ".join(f"{name} {kind}" for name, kind in self.columns)


def _schema(*cols: tuple[str, str]) -> SystemSchema:
    return SystemSchema(tuple(cols))


MATERIALIZED_VIEWS = _schema(
    ("name", S),
    ("definition", S),
    ("partition_by", S),
    ("refresh_scheme", S),
    ("state", S),
    ("is_active", B),
    ("inactive_reason", S),
    ("rows", L),
    ("partitions", L),
    ("last_refresh_start", T),
    ("last_refresh_end", T),
    ("last_refresh_state", S),
    ("last_refresh_error", S),
    ("last_refresh_duration", D),
    ("is_fresh", B),
    ("stale_partitions", L),
    ("staleness_seconds", D),
    ("last_refresh_base_partitions", L),
    ("last_refresh_mv_partitions", L),
    ("refresh_state_reason", S),
    ("current_run_id", L),
    ("freshness_alert", S),
)
TASK_RUNS = _schema(
    ("run_id", L),
    ("mv_name", S),
    ("trigger", S),
    ("mode", S),
    ("mode_reason", S),
    ("state", S),
    ("created", T),
    ("started", T),
    ("finished", T),
    ("error", S),
    ("partitions_planned", L),
    ("partitions_done", L),
    ("chunks_planned", L),
    ("chunks_done", L),
    ("rows_written", L),
    ("progress", S),
    ("attempts", L),
    ("priority", L),
    ("publish", S),
    ("rows_inserted", L),
    ("rows_updated", L),
    ("rows_deleted", L),
    ("candidates", S),
    ("estimate_bytes", L),
    ("bytes_read", L),
    ("files_written", L),
    ("files_replaced", L),
    ("seconds", D),
    ("timings", S),
)
REFRESH_PROGRESS = _schema(
    ("run_id", L),
    ("chunk_id", L),
    ("vnode", L),
    ("partitions", S),
    ("is_completed", B),
    ("processed_rows", L),
    ("bytes_written", L),
    ("files_written", L),
    ("attempts", L),
    ("duration_seconds", D),
    ("last_checkpoint", T),
)
REFRESH_TABLE_STATE = _schema(
    ("table_name", S),
    ("current_status", S),
    ("last_trigger_time", T),
    ("last_success_time", T),
    ("trigger_interval_secs", L),
    ("last_run_id", L),
    ("rows_inserted", L),
    ("rows_updated", L),
    ("rows_deleted", L),
)
TASKS = _schema(
    ("mv_name", S),
    ("schedule", S),
    ("next_fire_time", T),
    ("last_fire_time", T),
    ("suspended", B),
    ("consecutive_failures", L),
    ("pending_requests", L),
)
TABLES = _schema(
    ("name", S),
    ("kind", S),
    ("format", S),
    ("location", S),
    ("catalog", S),
    ("partition_columns", S),
    ("last_change_seen", T),
    ("last_version_seen", S),
)

PIPELINE_DATASETS = _schema(
    ("pipeline", S),
    ("name", S),
    ("kind", S),
    ("source", S),
    ("definition", S),
    ("is_sparkmv_object", B),
    ("last_state", S),
    ("last_technique", S),
    ("rows", L),
    ("last_run_start", T),
    ("last_run_end", T),
    ("last_reason", S),
)

COST_MODEL = _schema(
    ("technique", S),
    ("fixed_seconds", D),
    ("bytes_per_second", D),
    ("runs_fitted", L),
    ("fitted_at", T),
    ("runs_weighed", L),
    ("right_choices", L),
    ("right_share", D),
)

REWRITE_LOG = _schema(
    ("query_time", T),
    ("fingerprint", S),
    ("query", S),
    ("mv", S),
    ("rewrite_class", S),
    ("analysis_ms", D),
    ("rejected", S),
)


def _progress_text(run: Any) -> str:
    return f"{run.chunks_done}/{run.chunks_planned} chunks, {run.rows_written} rows"


def materialized_views_rows(rt: Runtime) -> list[tuple[Any, ...]]:
    """Rows of ``sparkmv.materialized_views``."""
    names = MATERIALIZED_VIEWS.names
    return [tuple(asdict(st)[n] for n in names) for st in statuses(rt)]


def task_runs_rows(rt: Runtime) -> list[tuple[Any, ...]]:
    """Rows of ``sparkmv.task_runs``, newest first."""
    with rt.catalog.read() as s:
        runs = rt.catalog.runs.list(s)
    return [
        (
            r.run_id,
            r.object_name,
            r.trigger,
            r.mode,
            r.mode_reason,
            r.state,
            r.created,
            r.started,
            r.finished,
            r.error,
            r.partitions_planned,
            r.partitions_done,
            r.chunks_planned,
            r.chunks_done,
            r.rows_written,
            _progress_text(r),
            r.attempts,
            r.priority,
            r.publish,
            r.rows_inserted,
            r.rows_updated,
            r.rows_deleted,
            json.dumps(r.candidates) if r.candidates else None,
            r.estimate_bytes,
            r.bytes_read,
            r.files_written,
            r.files_replaced,
            (r.finished - r.started).total_seconds() if r.finished and r.started else None,
            json.dumps(r.timings) if r.timings else None,
        )
        for r in runs
    ]


def refresh_progress_rows(rt: Runtime) -> list[tuple[Any, ...]]:
    """Rows of ``sparkmv.refresh_progress`` (one per chunk; ``vnode`` for refreshable tables)."""
    with rt.catalog.read() as s:
        runs = rt.catalog.runs.list(s, limit=200)
        out = []
        for r in runs:
            for c in rt.catalog.runs.chunks(s, r.run_id):
                parts = c.partitions or []
                vnode = int(parts[0]) if len(parts) == 1 and isinstance(parts[0], int) else None
                out.append(
                    (
                        c.run_id,
                        c.chunk_id,
                        vnode,
                        ",".join("NULL" if p is None else str(p) for p in parts),
                        c.is_completed,
                        c.processed_rows,
                        c.bytes_written,
                        c.files_written,
                        c.attempts,
                        c.duration_seconds,
                        c.last_checkpoint,
                    )
                )
    return out


def _refreshable_rows(rt: Runtime) -> list[tuple[Any, ...]]:
    with rt.catalog.read() as s:
        rows = rt.catalog.objects.list(s, ObjectKind.REFRESHABLE_TABLE)
        out = []
        for t in rows:
            last = rt.catalog.runs.get(s, t.last_success_run_id) if t.last_success_run_id else None
            interval = (t.options or {}).get("refresh_interval_sec")
            out.append(
                (
                    ObjectName(t.namespace, t.name).display,
                    t.state,
                    t.last_trigger_time,
                    t.last_success_time,
                    int(interval) if interval else None,
                    t.last_run_id,
                    last.rows_inserted if last else 0,
                    last.rows_updated if last else 0,
                    last.rows_deleted if last else 0,
                )
            )
    return out


def _tasks_rows(rt: Runtime) -> list[tuple[Any, ...]]:
    from sparkmv.catalog import RunState

    with rt.catalog.read() as s:
        rows: list[ObjectRow] = rt.catalog.objects.list(s, ObjectKind.MATERIALIZED_VIEW)
        out = []
        for r in rows:
            pending = sum(1 for run in rt.catalog.runs.list(s, r.id, limit=50) if run.state == RunState.PENDING)
            out.append(
                (
                    ObjectName(r.namespace, r.name).display,
                    r.refresh_scheme,
                    r.next_fire_time,
                    r.last_fire_time,
                    r.suspended,
                    r.consecutive_failures,
                    pending,
                )
            )
    return out


def rewrite_log_rows(rt: Runtime) -> list[tuple[Any, ...]]:
    """Rows of ``sparkmv.rewrite_log``, newest first: one per MV a query used through query
    rewrite (``mv`` NULL when the query had candidates but none was used)."""
    return [
        (e.query_time, e.fingerprint, e.query, e.mv, e.rewrite_class, e.analysis_ms, e.rejected)
        for e in rt.catalog.rewrite_log.list()
    ]


SPARKMV_CATALOG = "sparkmv"
"""The catalog of the Iceberg tables sparkmv keeps (MVs, refreshable tables)."""


def table_format(row: ObjectRow) -> str:
    """The storage format of a catalog object: an external table's ``USING`` format, else
    ``iceberg`` (MVs and refreshable tables are Iceberg tables of sparkmv's catalog)."""
    if row.kind == ObjectKind.EXTERNAL_TABLE:
        return row.format or "parquet"
    return "iceberg"


def _partitioning(row: ObjectRow) -> str | None:
    if row.kind == ObjectKind.MATERIALIZED_VIEW:
        return row.partition_by
    return ",".join(row.partition_columns or []) or None


def describe_extended(row: ObjectRow | None, name: ObjectName) -> list[tuple[str, str | None]]:
    """The rows ``DESCRIBE EXTENDED`` adds after the columns: ``(key, value)`` for kind,
    format, location, catalog and partition columns. A plain Iceberg table of the catalog
    (no sparkmv row) is ``TABLE`` / ``iceberg``; a system table ``SYSTEM_TABLE``."""
    if row is None:
        kind = "SYSTEM_TABLE" if name.namespace == "sparkmv" else "TABLE"
        return [("kind", kind), ("format", None if kind == "SYSTEM_TABLE" else "iceberg")]
    external = row.kind == ObjectKind.EXTERNAL_TABLE
    return [
        ("kind", str(row.kind)),
        ("format", table_format(row)),
        ("location", row.location if external else None),
        ("catalog", None if external else SPARKMV_CATALOG),
        ("partition columns", _partitioning(row)),
    ]


def _last_seen(rt: Runtime) -> dict[str, tuple[Any, str | None]]:
    """Qualified table -> (newest change time, version text) as pinned by the newest
    successful refresh run that read it (``version 3`` of a Delta table, ``snapshot 12`` of
    an Iceberg one; None for listed files, whose change is their newest modification time)."""
    from datetime import UTC, datetime

    from sparkmv.catalog import RunState

    with rt.catalog.read() as s:
        runs = [r for r in rt.catalog.runs.list(s, limit=500) if r.state == RunState.SUCCESS and r.plan]
    out: dict[str, tuple[Any, str | None]] = {}
    for run in sorted(runs, key=lambda r: r.run_id, reverse=True):
        for table, pinned in (run.plan or {}).get("pinned", {}).items():
            if table in out or not isinstance(pinned, dict):
                continue
            times = [p.get("changed_at") for p in pinned.get("partitions", {}).values() if p.get("changed_at")]
            when = datetime.fromtimestamp(max(times), UTC).replace(tzinfo=None) if times else None
            snap = pinned.get("snapshot_id")
            label = "version" if pinned.get("kind") == "delta" else "snapshot"
            out[table] = (when, f"{label} {snap}" if snap is not None else None)
    return out


def _tables_rows(rt: Runtime) -> list[tuple[Any, ...]]:
    """Rows of ``sparkmv.tables``: every table and MV of the catalog, by name."""
    with rt.catalog.read() as s:
        rows: list[ObjectRow] = rt.catalog.objects.list(s)
    seen = _last_seen(rt)
    out = []
    for r in sorted(rows, key=lambda r: (r.namespace, r.name)):
        name = ObjectName(r.namespace, r.name)
        external = r.kind == ObjectKind.EXTERNAL_TABLE
        when, version = seen.get(name.qualified, (None, None))
        out.append(
            (
                name.display,
                str(r.kind),
                table_format(r),
                r.location if external else None,
                None if external else SPARKMV_CATALOG,
                _partitioning(r),
                when,
                version,
            )
        )
    return out


def pipeline_datasets_rows(rt: Runtime) -> list[tuple[Any, ...]]:
    """Rows of ``sparkmv.pipeline_datasets``: every dataset of the pipelines run, SQL and
    Python (``is_sparkmv_object``: a SQL MV or streaming table sparkmv maintains as an MV)."""
    with rt.catalog.read() as s:
        objects = {(r.namespace, r.name) for r in rt.catalog.objects.list(s)}
    return [
        (
            d.pipeline,
            d.name.display,
            d.kind,
            d.source,
            f"{d.file}:{d.line}",
            (d.name.namespace, d.name.name) in objects,
            d.last_state,
            d.last_technique,
            d.rows,
            d.last_run_start,
            d.last_run_end,
            d.last_reason,
        )
        for d in rt.catalog.pipelines.list()
    ]


def cost_model_rows(rt: Runtime) -> list[tuple[Any, ...]]:
    """Rows of ``sparkmv.cost_model``: per technique (FULL, PCT, INCREMENTAL) AUTO's fitted
    constants (NULL until the catalog has enough runs of it: AUTO then compares bytes) and,
    on every row, how often AUTO picked the faster technique in the runs it weighed
    (:mod:`sparkmv.refresh.cost_model`)."""
    from sparkmv.refresh.cost_model import TECHNIQUES, learned

    model = learned(rt.catalog)
    out = []
    for technique in TECHNIQUES:
        fitted = model.techniques.get(technique)
        out.append(
            (
                technique,
                None if fitted is None else round(fitted.fixed_seconds, 4),
                None if fitted is None or fitted.bytes_per_second is None else float(fitted.bytes_per_second),
                0 if fitted is None else fitted.runs,
                model.fitted_at if fitted is not None else None,
                model.weighed,
                model.right,
                model.right_share,
            )
        )
    return out


SYSTEM_TABLES: dict[str, tuple[SystemSchema, Callable[[Runtime], list[tuple[Any, ...]]]]] = {
    "materialized_views": (MATERIALIZED_VIEWS, materialized_views_rows),
    "task_runs": (TASK_RUNS, task_runs_rows),
    "refresh_progress": (REFRESH_PROGRESS, refresh_progress_rows),
    "refresh_table_state": (REFRESH_TABLE_STATE, _refreshable_rows),
    "tasks": (TASKS, _tasks_rows),
    "rewrite_log": (REWRITE_LOG, rewrite_log_rows),
    "tables": (TABLES, _tables_rows),
    "pipeline_datasets": (PIPELINE_DATASETS, pipeline_datasets_rows),
    "cost_model": (COST_MODEL, cost_model_rows),
    "expectations": (_schema(*event_tables.EXPECTATIONS_COLUMNS), event_tables.expectations_rows),
    "pipeline_events": (_schema(*event_tables.PIPELINE_EVENTS_COLUMNS), event_tables.pipeline_events_rows),
}


def system_table(rt: Runtime, name: str) -> DataFrame:
    """The DataFrame of system table ``sparkmv.<name>``.

    Raises:
        KeyError: when there is no such system table.
    """
    schema, rows = SYSTEM_TABLES[name]
    return rt.spark.createDataFrame(rows(rt), schema.ddl)
