"""What the run page, the query rewrite page, the graph's summary chart and a base table's
page show, read from the catalog (and, for a base table, its pinned listing or snapshot).
Plain Python, no Spark."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from sparkmv.catalog import ObjectKind
from sparkmv.catalog.models import ObjectRow
from sparkmv.errors import SparkMvError
from sparkmv.names import ObjectName
from sparkmv.refresh.context import pin_all
from sparkmv.refresh.runtime import Runtime
from sparkmv.ui.charts import ChartRun, chart_runs
from sparkmv.ui.model import display, run_json

SUMMARY_RUNS = 300
"""Runs the graph page's summary chart shows (the newest across the catalog)."""
REWRITE_ROWS = 500
"""Rows of the rewrite log the query rewrite page shows (the newest)."""


def recent_runs(rt: Runtime, limit: int = SUMMARY_RUNS) -> list[ChartRun]:
    """The newest ``limit`` runs of the catalog that finished, oldest first (one query)."""
    with rt.catalog.read() as s:
        rows, _total = rt.catalog.runs.page(s, None, None, 0, limit)
        return chart_runs([run_json(r) for r in rows])


def run_detail(rt: Runtime, run_id: int) -> dict[str, Any]:
    """One run as JSON (:func:`run_json`) with its plan's partition reasons and changed base
    partitions.

    Raises:
        ObjectNotFoundError: ``refresh run N does not exist``.
    """
    with rt.catalog.read() as s:
        run = rt.catalog.runs.get(s, run_id)
        out = run_json(run)
        plan = (run.plan or {}).get("plan") or {}
    out["partition_reasons"] = plan.get("partition_reasons") or {}
    out["changed_base_partitions"] = plan.get("changed_base_partitions") or {}
    return out


@dataclass(frozen=True)
class RewriteRow:
    """One row of the rewrite log as the page shows it (``mv`` None: no MV was used)."""

    query_time: str
    query: str
    mv: str | None
    rewrite_class: str | None
    analysis_ms: float
    rejected: list[str]


def rewrite_rows(rt: Runtime, mv: str | None = None, limit: int = REWRITE_ROWS) -> list[RewriteRow]:
    """The newest rows of ``sparkmv.rewrite_log`` (of the queries MV ``mv`` answered, when
    given: its display name), rejection reasons split into one item each."""
    entries = rt.catalog.rewrite_log.list(limit, mv=mv)
    return [
        RewriteRow(
            e.query_time.replace(microsecond=0).isoformat(),
            e.query,
            e.mv,
            e.rewrite_class,
            round(e.analysis_ms, 1),
            [r for r in (e.rejected or "").split("; ") if r],
        )
        for e in entries
    ]


def _kind(name: ObjectName, row: ObjectRow | None) -> tuple[str, str]:
    """(kind in words, format) of a base table."""
    if name.catalog:
        return f"table of external catalog '{name.catalog}'", "iceberg"
    if row is None:
        return "Iceberg table of sparkmv's catalog", "iceberg"
    fmt = row.format or "parquet"
    return ("Delta table" if fmt == "delta" else f"external {fmt} files"), fmt


def table_detail(rt: Runtime, name: ObjectName, row: ObjectRow | None) -> dict[str, Any]:
    """A base table's page: kind, format, location, partition columns, partitions, the last
    change seen (UTC, ISO 8601: the newest change time of its pinned partitions) and the
    snapshot or version pinned now; ``error`` when it cannot be read."""
    kind, fmt = _kind(name, row)
    out: dict[str, Any] = {
        "kind": kind,
        "format": fmt,
        "location": row.location if row is not None else None,
        "partition_columns": list(row.partition_columns or []) if row is not None else [],
        "partitions": None,
        "last_change": None,
        "snapshot": None,
        "error": None,
    }
    if row is not None and row.kind != ObjectKind.EXTERNAL_TABLE:
        return out
    try:
        pinned = pin_all(rt.catalog, rt.iceberg, [name])[name.qualified]
    except SparkMvError as exc:
        out["error"] = str(exc)
        return out
    changes = [p.changed_at for p in pinned.partitions.values() if p.changed_at]
    out.update(
        location=out["location"] or pinned.location,
        partition_columns=out["partition_columns"] or list(pinned.partition_columns),
        partitions=len(pinned.partitions),
        last_change=datetime.fromtimestamp(max(changes), UTC).isoformat() if changes else None,
        snapshot=pinned.snapshot_id,
        transforms=dict(zip(pinned.partition_columns, pinned.partition_transforms, strict=False)),
    )
    return out


def answered(rt: Runtime, mv: ObjectName) -> int:
    """Queries MV ``mv`` answered through query rewrite (rows of the rewrite log naming it)."""
    return rt.catalog.rewrite_log.count(display(mv.qualified))
