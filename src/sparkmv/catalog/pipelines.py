"""PipelineStore: ``smv_pipeline_datasets``, every dataset of the pipeline projects run.

Read as the system table ``sparkmv.pipeline_datasets`` and by ``sparkmv status``. A run of a
project first registers its datasets (:meth:`PipelineStore.register`: rows added or updated,
rows of that pipeline no longer defined removed), then records each dataset's outcome as it
finishes (:meth:`PipelineStore.record`, which logs the outcome's event in the same
transaction; the run's own start and end are logged by :meth:`PipelineStore.log`). A
dataset name belongs to one pipeline: registering a name another pipeline holds moves it
(the last project run defines it, as the tables themselves are shared).

Each method owns its transaction; typed records (:class:`PipelineDataset`) go in and come
out, never ORM rows.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import select

from sparkmv.catalog.database import Database
from sparkmv.catalog.events import Event, EventStore
from sparkmv.catalog.models import PipelineDatasetRow
from sparkmv.names import ObjectName

REASON_CHARS = 2000
"""Characters of a dataset's last reason kept."""


@dataclass(frozen=True)
class PipelineDataset:
    """One dataset of a pipeline.

    Attributes:
        pipeline: the spec's ``name``.
        name: the dataset.
        kind: ``materialized view``, ``streaming table``, ``view``, ``temporary view`` or ``sink``.
        source: ``sql`` or ``python``.
        file, line: where it is defined (line 1-based).
        last_state: SUCCESS, SKIPPED, FAILED, NOT RUN, EXCLUDED; None before its first run
            (and always for a temporary view, which is inlined where it is read).
        last_technique: FULL, PCT, INCREMENTAL, SKIP (or None).
        last_reason: why that technique, or the error (truncated to :data:`REASON_CHARS`).
        rows: rows of the dataset after its newest run (None when unknown).
        last_run_start, last_run_end: UTC, naive.
    """

    pipeline: str
    name: ObjectName
    kind: str
    source: str
    file: str
    line: int
    last_state: str | None = None
    last_technique: str | None = None
    last_reason: str | None = None
    rows: int | None = None
    last_run_start: datetime | None = None
    last_run_end: datetime | None = None


def _now() -> datetime:
    return datetime.now(UTC).replace(tzinfo=None)


def _record(row: PipelineDatasetRow) -> PipelineDataset:
    return PipelineDataset(
        row.pipeline,
        ObjectName(row.namespace, row.name),
        row.kind,
        row.source,
        row.definition_file,
        row.definition_line,
        row.last_state,
        row.last_technique,
        row.last_reason,
        row.rows,
        row.last_run_start,
        row.last_run_end,
    )


class PipelineStore:
    """Registers pipeline datasets and their outcomes (each method one transaction)."""

    def __init__(self, database: Database) -> None:
        self.db = database

    def register(self, pipeline: str, datasets: Sequence[PipelineDataset]) -> None:
        """Make ``datasets`` the datasets of ``pipeline``: add the new ones, update kind,
        source and definition place of the known ones (keeping their last outcome), and
        remove the rows of ``pipeline`` not among them.

        Raises:
            CatalogError: when the catalog database fails.
        """
        wanted = {(d.name.namespace, d.name.name): d for d in datasets}
        with self.db.transaction() as s:
            rows = s.scalars(
                select(PipelineDatasetRow).where(
                    (PipelineDatasetRow.pipeline == pipeline)
                    | PipelineDatasetRow.name.in_([d.name.name for d in datasets])
                )
            ).all()
            existing = {(r.namespace, r.name): r for r in rows}
            for key, row in existing.items():
                if key not in wanted and row.pipeline == pipeline:
                    s.delete(row)
            for key, d in wanted.items():
                row = existing.get(key) or PipelineDatasetRow(namespace=key[0], name=key[1])
                row.pipeline, row.kind, row.source = pipeline, d.kind, d.source
                row.definition_file, row.definition_line, row.updated_at = d.file, d.line, _now()
                if key not in existing:
                    s.add(row)

    def record(self, pipeline: str, outcome: PipelineDataset, run_id: int | None = None) -> None:
        """Store the outcome of one dataset's run (state, technique, reason, rows, times);
        a dataset not registered is registered with it. The outcome's event
        (:data:`DATASET_EVENTS`: ``dataset_refreshed``, ``dataset_failed``, ...) is logged in
        the same transaction; ``run_id``: the refresh run behind it (None for a Python
        dataset or one not run).

        Raises:
            CatalogError: when the catalog database fails.
        """
        name = outcome.name
        with self.db.transaction() as s:
            row = s.scalars(
                select(PipelineDatasetRow).where(
                    PipelineDatasetRow.namespace == name.namespace, PipelineDatasetRow.name == name.name
                )
            ).first()
            if row is None:
                row = PipelineDatasetRow(namespace=name.namespace, name=name.name)
                row.kind, row.source = outcome.kind, outcome.source
                row.definition_file, row.definition_line = outcome.file, outcome.line
                s.add(row)
            row.pipeline = pipeline
            row.last_state, row.last_technique = outcome.last_state, outcome.last_technique
            reason = outcome.last_reason
            row.last_reason = reason if reason is None or len(reason) <= REASON_CHARS else reason[:REASON_CHARS]
            row.rows, row.last_run_start, row.last_run_end = outcome.rows, outcome.last_run_start, outcome.last_run_end
            row.updated_at = _now()
            EventStore.add(s, _dataset_event(pipeline, outcome, run_id))

    def log(self, pipeline: str, event_type: str, level: str, message: str, **details: Any) -> None:
        """Log one event of the pipeline itself (``pipeline_started``, ``pipeline_ended``),
        in its own transaction.

        Raises:
            CatalogError: when the catalog database fails.
        """
        with self.db.transaction() as s:
            EventStore.add(s, Event(event_type, level, message, pipeline=pipeline, details=details))

    def list(self, pipeline: str | None = None) -> list[PipelineDataset]:
        """The datasets (of ``pipeline`` when given), by pipeline then name."""
        stmt = select(PipelineDatasetRow).order_by(
            PipelineDatasetRow.pipeline, PipelineDatasetRow.namespace, PipelineDatasetRow.name
        )
        if pipeline is not None:
            stmt = stmt.where(PipelineDatasetRow.pipeline == pipeline)
        with self.db.read() as s:
            return [_record(r) for r in s.scalars(stmt)]


DATASET_EVENTS = {
    "SUCCESS": ("dataset_refreshed", "INFO"),
    "SKIPPED": ("dataset_skipped", "INFO"),
    "FAILED": ("dataset_failed", "ERROR"),
    "NOT RUN": ("dataset_not_run", "WARN"),
    "EXCLUDED": ("dataset_excluded", "INFO"),
}
"""A dataset's outcome in a pipeline run -> its event type and level."""


def _dataset_event(pipeline: str, outcome: PipelineDataset, run_id: int | None) -> Event:
    event_type, level = DATASET_EVENTS.get(outcome.last_state or "", ("dataset_finished", "INFO"))
    seconds = None
    if outcome.last_run_start is not None and outcome.last_run_end is not None:
        seconds = round((outcome.last_run_end - outcome.last_run_start).total_seconds(), 3)
    words = " ".join(w for w in (outcome.last_state, outcome.last_technique) if w)
    message = f"{outcome.name.display} ({outcome.kind}, {outcome.source}) {words}"
    if outcome.last_reason:
        message += f": {outcome.last_reason}"
    details = {
        "state": outcome.last_state,
        "technique": outcome.last_technique,
        "reason": outcome.last_reason,
        "rows": outcome.rows,
        "seconds": seconds,
        "kind": outcome.kind,
        "source": outcome.source,
    }
    return Event(event_type, level, message, outcome.name.display, run_id, pipeline, details)
