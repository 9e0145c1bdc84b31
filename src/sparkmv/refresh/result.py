"""RefreshRun: what a refresh returns to the caller."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from sparkmv.catalog.models import TaskRunRow


@dataclass(frozen=True)
class RefreshRun:
    """The outcome (or current state) of one refresh run.

    Attributes:
        run_id: the run's id in ``sparkmv.task_runs``.
        name: the refreshed object.
        state: SUCCESS, SKIPPED, FAILED, CANCELLED, PENDING, MERGED, ...
        mode: FULL, PCT, INCREMENTAL or SKIP (None before planning); reason: why.
        partitions_planned / partitions_done: MV partitions.
        chunks_planned / chunks_done: chunks.
        rows_written: rows staged by completed chunks.
        duration_seconds: wall time from start to finish (seconds), when finished.
        error: the error text of a failed run.
        candidates: the techniques AUTO weighed, each ``{"mode", "eligible",
            "estimate_bytes", "chosen", "reason"}`` (empty when none were).
        estimate_bytes: the chosen technique's estimate of the bytes it reads (None when
            none was weighed); bytes_read: what the run's Spark jobs read (bytes, Spark's
            input metrics; None on Spark Connect or when nothing ran).
        files_written / files_replaced: data files the run wrote, and the data files of the
            table its commits removed (None when it committed nothing).
        timings: where the run's time went (:meth:`sparkmv.refresh.timing.Timings.to_json`:
            ``total``, ``phases``, ``spark_jobs``; None for runs stored before).
    """

    run_id: int
    name: str
    state: str
    trigger: str
    mode: str | None
    reason: str | None
    partitions_planned: int
    partitions_done: int
    chunks_planned: int
    chunks_done: int
    rows_written: int
    duration_seconds: float | None
    error: str | None
    started: datetime | None
    finished: datetime | None
    candidates: list[dict[str, Any]] = field(default_factory=list)
    estimate_bytes: int | None = None
    bytes_read: int | None = None
    files_written: int | None = None
    files_replaced: int | None = None
    timings: dict[str, Any] | None = None

    @classmethod
    def from_row(cls, row: TaskRunRow) -> RefreshRun:
        """Build from a ``smv_task_runs`` row."""
        duration = (row.finished - row.started).total_seconds() if row.finished and row.started else None
        return cls(
            run_id=row.run_id,
            name=row.object_name,
            state=row.state,
            trigger=row.trigger,
            mode=row.mode,
            reason=row.mode_reason,
            partitions_planned=row.partitions_planned,
            partitions_done=row.partitions_done,
            chunks_planned=row.chunks_planned,
            chunks_done=row.chunks_done,
            rows_written=row.rows_written,
            duration_seconds=duration,
            error=row.error,
            started=row.started,
            finished=row.finished,
            candidates=list(row.candidates or []),
            estimate_bytes=row.estimate_bytes,
            bytes_read=row.bytes_read,
            files_written=row.files_written,
            files_replaced=row.files_replaced,
            timings=row.timings,
        )
