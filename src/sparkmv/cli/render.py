"""Printing for the CLI: tables (rich), CSV, JSON, and the live refresh progress bar."""

from __future__ import annotations

import csv
import io
import json
import sys
from datetime import datetime
from typing import TYPE_CHECKING, Any

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

if TYPE_CHECKING:
    from sparkmv.catalog.expectations import ExpectationResult
    from sparkmv.catalog.pipelines import PipelineDataset
    from sparkmv.client.client import Client, StatementResult
    from sparkmv.refresh.result import RefreshRun
    from sparkmv.services.status import MvStatus


def _text(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, datetime):
        return value.isoformat(sep=" ", timespec="seconds")
    if isinstance(value, float):
        return f"{value:.3f}".rstrip("0").rstrip(".") if value != int(value) else str(int(value))
    return str(value)


def print_rows(console: Console, columns: list[str], rows: list[list[Any]], fmt: str, title: str | None = None) -> None:
    """Print rows as a rich table, CSV or JSON lines-free array."""
    if fmt == "csv":
        buf = io.StringIO()
        writer = csv.writer(buf, lineterminator="\n")
        writer.writerow(columns)
        writer.writerows([[_text(v) for v in r] for r in rows])
        sys.stdout.write(buf.getvalue())
        return
    if fmt == "json":
        sys.stdout.write(json.dumps([dict(zip(columns, r, strict=True)) for r in rows], default=str, indent=1) + "\n")
        return
    table = Table(title=title, show_lines=False)
    for c in columns:
        table.add_column(c, overflow="fold")
    for r in rows:
        table.add_row(*[_text(v) for v in r])
    console.print(table)


def _freshness(st: MvStatus) -> str:
    text = _fresh_text(st)
    if st.freshness_alert is not None:
        text += f"; {st.freshness_alert}: past freshness_{st.freshness_alert.lower()}_after"
    return text


def _fresh_text(st: MvStatus) -> str:
    if not st.is_active:
        return f"inactive: {st.inactive_reason}"
    if st.last_refresh_end is None:
        return "never refreshed"
    if st.is_fresh:
        return "fresh"
    return f"stale ({st.stale_partitions} base partitions, {st.staleness_seconds:.0f} s)"


def status_rows(statuses: list[MvStatus]) -> tuple[list[str], list[list[Any]]]:
    """Columns and rows of ``sparkmv status``."""
    cols = ["name", "state", "rows", "partitions", "last refresh", "duration s", "freshness"]
    rows = [
        [
            s.name,
            s.state if s.current_run_id is None else f"{s.state} (run {s.current_run_id})",
            s.rows,
            s.partitions,
            s.last_refresh_state or "",
            round(s.last_refresh_duration, 2) if s.last_refresh_duration is not None else None,
            _freshness(s),
        ]
        for s in statuses
    ]
    return cols, rows


def pipeline_dataset_rows(datasets: list[PipelineDataset], objects: set[str]) -> tuple[list[str], list[list[Any]]]:
    """Columns and rows of ``sparkmv status``'s pipeline datasets: those that are not
    sparkmv MVs (``objects``: display names of the MVs listed above them), since each MV
    already has its line."""
    cols = ["name", "pipeline", "kind", "last run", "technique", "rows", "finished"]
    rows = [
        [
            d.name.display,
            d.pipeline,
            f"{d.source} {d.kind}",
            d.last_state or "",
            d.last_technique or "",
            d.rows,
            d.last_run_end.strftime("%Y-%m-%d %H:%M:%S") if d.last_run_end else "",
        ]
        for d in datasets
        if d.name.display not in objects
    ]
    return cols, rows


def run_rows(runs: list[RefreshRun]) -> tuple[list[str], list[list[Any]]]:
    """Columns and rows of ``sparkmv runs``."""
    from sparkmv.refresh.timing import breakdown_text

    cols = ["run", "trigger", "mode", "state", "chunks", "partitions", "rows", "files +/-", "started", "duration s"]
    cols += ["where the time went", "reason / error"]
    rows = [
        [
            r.run_id,
            r.trigger,
            r.mode,
            r.state,
            f"{r.chunks_done}/{r.chunks_planned}",
            f"{r.partitions_done}/{r.partitions_planned}",
            r.rows_written,
            None if r.files_written is None else f"{r.files_written}/{r.files_replaced or 0}",
            r.started,
            round(r.duration_seconds, 2) if r.duration_seconds is not None else None,
            breakdown_text(r.timings) or None,
            r.error or r.reason,
        ]
        for r in runs
    ]
    return cols, rows


def expectation_rows(results: list[ExpectationResult]) -> tuple[list[str], list[list[Any]]]:
    """Columns and rows of the expectations' results in ``sparkmv runs``, newest run first."""
    cols = ["run", "expectation", "action", "rows passed", "rows failed", "condition"]
    rows = [[r.run_id, r.expectation, r.action, r.rows_passed, r.rows_failed, r.condition] for r in results]
    return cols, rows


def chunk_rows(chunks: list[dict[str, Any]]) -> tuple[list[str], list[list[Any]]]:
    """Columns and rows of the chunks of one run."""
    cols = ["chunk", "partitions", "completed", "rows", "files", "bytes", "attempts", "seconds", "checkpoint"]
    rows = []
    for c in chunks:
        parts = c["partitions"]
        text = "<all>" if not parts else ", ".join("NULL" if p is None else str(p) for p in parts[:6])
        if parts and len(parts) > 6:
            text += f", ... ({len(parts)})"
        row = [c["chunk_id"], text, c["is_completed"], c["processed_rows"], c["files_written"]]
        row += [c["bytes_written"], c["attempts"], round(c["duration_seconds"], 2), c["last_checkpoint"]]
        rows.append(row)
    return cols, rows


def run_with_progress(console: Console, client: Client, statement: str) -> StatementResult:
    """Execute a statement; a synchronous refresh in a terminal shows a live progress bar.

    Raises:
        RefreshFailedError: when a synchronous refresh ends FAILED or CANCELLED.
    """
    if not console.is_terminal:
        return client.execute(statement, raise_on_failure=True, prefer_rows=True)
    with Progress(
        TextColumn("[bold]refresh"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("chunks  {task.fields[rows]} rows"),
        TimeElapsedColumn(),
        console=console,
        transient=True,
    ) as progress:
        task = progress.add_task("refresh", total=None, rows=0)

        def on_chunk(done: int, total: int, rows: int) -> None:
            progress.update(task, completed=done, total=total, rows=rows)

        return client.execute(statement, progress=on_chunk, raise_on_failure=True, prefer_rows=True)
