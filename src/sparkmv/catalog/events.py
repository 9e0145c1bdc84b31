"""EventStore: ``smv_pipeline_events``, the event log (the system table
``sparkmv.pipeline_events``).

One row per event: a refresh run started, planned, succeeded, failed, was cancelled,
skipped, recovered or abandoned; its expectations' results; a pipeline run started and
ended. An event is added inside the caller's transaction, the one that makes the state
change it reports, so the log never tells of a change that did not happen, and a change
that happened is told once. Typed records (:class:`Event`) go in and come out.
"""

from __future__ import annotations

import builtins
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from sparkmv.catalog.clock import utcnow
from sparkmv.catalog.models import EventRow, PipelineDatasetRow
from sparkmv.names import ObjectName

LEVELS = ("INFO", "WARN", "ERROR")
MESSAGE_CHARS = 4000
"""Characters of an event's message kept (an error's full text stays with its run)."""


@dataclass(frozen=True)
class Event:
    """One event.

    Attributes:
        event_type: ``run_started``, ``run_planned``, ``run_succeeded``, ``run_failed``,
            ``run_cancelled``, ``run_skipped``, ``run_recovered``, ``run_abandoned``,
            ``expectation``, ``pipeline_started``, ``pipeline_ended``.
        level: ``INFO``, ``WARN`` or ``ERROR``.
        message: one line for people.
        dataset: the dataset's display name (None for a pipeline's own events).
        run_id: the refresh run (None for a pipeline's own events).
        pipeline: the pipeline the dataset belongs to (None outside pipelines).
        details: JSON-able facts (technique, reason, rows, bytes, seconds, counts, error).
        id, timestamp: set when stored (UTC, naive).
    """

    event_type: str
    level: str
    message: str
    dataset: str | None = None
    run_id: int | None = None
    pipeline: str | None = None
    details: dict[str, Any] = field(default_factory=dict)
    id: int | None = None
    timestamp: datetime | None = None


class EventStore:
    """Adds and reads events inside a caller's session."""

    @staticmethod
    def add(session: Session, event: Event, name: ObjectName | None = None) -> None:
        """Add ``event``; with ``name`` (the dataset's object name) and no pipeline given, the
        pipeline the dataset belongs to is looked up (None when it belongs to none)."""
        pipeline = event.pipeline
        if pipeline is None and name is not None:
            pipeline = EventStore.pipeline_of(session, name)
        session.add(
            EventRow(
                timestamp=utcnow(),
                pipeline=pipeline,
                run_id=event.run_id,
                dataset=event.dataset,
                event_type=event.event_type,
                level=event.level,
                message=event.message[:MESSAGE_CHARS],
                details=event.details or None,
            )
        )
        session.flush()

    @staticmethod
    def pipeline_of(session: Session, name: ObjectName) -> str | None:
        """The pipeline dataset ``name`` belongs to (None: none)."""
        return session.scalar(
            select(PipelineDatasetRow.pipeline).where(
                PipelineDatasetRow.namespace == name.namespace, PipelineDatasetRow.name == name.name
            )
        )

    @staticmethod
    def list(
        session: Session,
        pipeline: str | None = None,
        since: datetime | None = None,
        after_id: int = 0,
        run_id: int | None = None,
        limit: int | None = None,
    ) -> builtins.list[Event]:
        """Events in the order they happened (by id), filtered by pipeline, time (UTC, naive,
        inclusive), id (exclusive) and run; ``limit``: the newest that many."""
        stmt = select(EventRow).where(EventRow.id > after_id)
        if pipeline is not None:
            stmt = stmt.where(EventRow.pipeline == pipeline)
        if since is not None:
            stmt = stmt.where(EventRow.timestamp >= since)
        if run_id is not None:
            stmt = stmt.where(EventRow.run_id == run_id)
        if limit is not None:
            stmt = stmt.order_by(EventRow.id.desc()).limit(limit)
            rows = builtins.list(reversed(session.scalars(stmt).all()))
        else:
            rows = builtins.list(session.scalars(stmt.order_by(EventRow.id)))
        return [_event(r) for r in rows]

    @staticmethod
    def newest_id(session: Session) -> int:
        """The id of the newest event (0: none)."""
        from sqlalchemy import func

        return int(session.scalar(select(func.max(EventRow.id))) or 0)


def _event(row: EventRow) -> Event:
    return Event(
        row.event_type,
        row.level,
        row.message,
        row.dataset,
        row.run_id,
        row.pipeline,
        dict(row.details or {}),
        row.id,
        row.timestamp,
    )
