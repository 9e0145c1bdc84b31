"""RunStore: ``smv_task_runs`` (refresh runs) and ``smv_refresh_progress`` (the progress table).

A chunk is recorded completed only after its files are written, and only while the
writer still holds the lease: :meth:`RunStore.complete_chunk` runs in the same transaction
as a lease check, so a stalled owner whose lease was taken over cannot record anything.
"""

from __future__ import annotations

import builtins
from collections.abc import Iterable
from typing import Any

from sqlalchemy import delete, func, select, update
from sqlalchemy.orm import Session

from sparkmv.catalog.clock import utcnow
from sparkmv.catalog.models import ProgressRow, TaskRunRow
from sparkmv.catalog.states import RunState, Trigger
from sparkmv.errors import ObjectNotFoundError


class RunStore:
    """Reads and writes refresh runs and their progress rows inside a caller's session."""

    @staticmethod
    def create(
        session: Session,
        object_id: int,
        object_name: str,
        trigger: Trigger,
        state: RunState = RunState.PENDING,
        **fields: Any,
    ) -> TaskRunRow:
        """Insert a run and return it with its ``run_id`` assigned.

        ``created`` is now, or ``started`` when the caller took that earlier (so that
        ``created <= started`` always holds).
        """
        now = utcnow()
        started = fields.get("started")
        run = TaskRunRow(
            object_id=object_id,
            object_name=object_name,
            trigger=trigger,
            state=state,
            created=min(now, started) if started is not None else now,
            **fields,
        )
        session.add(run)
        session.flush()
        return run

    @staticmethod
    def get(session: Session, run_id: int) -> TaskRunRow:
        """The run ``run_id``.

        Raises:
            ObjectNotFoundError: when there is no such run.
        """
        run = session.get(TaskRunRow, run_id)
        if run is None:
            raise ObjectNotFoundError(f"refresh run {run_id} does not exist")
        return run

    @staticmethod
    def list(session: Session, object_id: int | None = None, limit: int | None = None) -> list[TaskRunRow]:
        """Runs, newest first (of one object when ``object_id`` is given)."""
        stmt = select(TaskRunRow).order_by(TaskRunRow.run_id.desc())
        if object_id is not None:
            stmt = stmt.where(TaskRunRow.object_id == object_id)
        if limit is not None:
            stmt = stmt.limit(limit)
        return list(session.scalars(stmt))

    @staticmethod
    def newest_per_object(session: Session, states: Iterable[str] | None = None) -> dict[int, TaskRunRow]:
        """object id -> its newest run (among runs in ``states`` when given); one query."""
        newest = select(func.max(TaskRunRow.run_id)).group_by(TaskRunRow.object_id)
        if states is not None:
            newest = newest.where(TaskRunRow.state.in_(builtins.list(states)))
        rows = session.scalars(select(TaskRunRow).where(TaskRunRow.run_id.in_(newest.scalar_subquery())))
        return {r.object_id: r for r in rows}

    @staticmethod
    def by_ids(session: Session, run_ids: Iterable[int]) -> dict[int, TaskRunRow]:
        """run id -> run, for the runs of ``run_ids`` that exist."""
        ids = builtins.list(run_ids)
        if not ids:
            return {}
        return {r.run_id: r for r in session.scalars(select(TaskRunRow).where(TaskRunRow.run_id.in_(ids)))}

    @staticmethod
    def page(
        session: Session, object_id: int | None = None, state: str | None = None, offset: int = 0, limit: int = 50
    ) -> tuple[builtins.list[TaskRunRow], int]:
        """One page of runs, newest first, filtered by object and state; and the total count
        of runs matching the filter."""
        where = []
        if object_id is not None:
            where.append(TaskRunRow.object_id == object_id)
        if state is not None:
            where.append(TaskRunRow.state == state)
        total = int(session.scalar(select(func.count()).select_from(TaskRunRow).where(*where)) or 0)
        stmt = select(TaskRunRow).where(*where).order_by(TaskRunRow.run_id.desc()).offset(offset).limit(limit)
        return builtins.list(session.scalars(stmt)), total

    @staticmethod
    def newest_run_id(session: Session) -> int:
        """The id of the newest run (0: none)."""
        return int(session.scalar(select(func.max(TaskRunRow.run_id))) or 0)

    @staticmethod
    def weighed(session: Session, mode: str, limit: int) -> builtins.list[TaskRunRow]:
        """The newest ``limit`` successful runs of technique ``mode`` that stored an estimate
        (the cost model's samples), newest first."""
        stmt = (
            select(TaskRunRow)
            .where(
                TaskRunRow.state == RunState.SUCCESS, TaskRunRow.mode == mode, TaskRunRow.estimate_bytes.is_not(None)
            )
            .order_by(TaskRunRow.run_id.desc())
            .limit(limit)
        )
        return builtins.list(session.scalars(stmt))

    @staticmethod
    def update(session: Session, run_id: int, **fields: Any) -> None:
        """Set fields of one run."""
        session.execute(update(TaskRunRow).where(TaskRunRow.run_id == run_id).values(**fields))

    @staticmethod
    def reassign(session: Session, from_object: int, to_object: int, object_name: str, renamed: str = "") -> int:
        """Move every run of object ``from_object`` to ``to_object``, now named
        ``object_name`` (as runs name objects: ``ObjectName.display``); ``renamed``: the name
        those runs' errors used for the object (a replacement's hidden name), replaced there
        by ``object_name``. Returns how many runs moved."""
        runs = builtins.list(session.scalars(select(TaskRunRow).where(TaskRunRow.object_id == from_object)))
        for run in runs:
            run.object_id, run.object_name = to_object, object_name
            if renamed and run.error:
                run.error = run.error.replace(renamed, object_name)
        session.flush()
        return len(runs)

    # -- progress table ---------------------------------------------------------------------
    @staticmethod
    def add_chunks(session: Session, run_id: int, chunks: builtins.list[builtins.list[Any]]) -> None:
        """Insert one not-completed progress row per chunk (chunk ids 0..n-1)."""
        now = utcnow()
        for chunk_id, partitions in enumerate(chunks):
            session.add(ProgressRow(run_id=run_id, chunk_id=chunk_id, partitions=partitions, last_checkpoint=now))
        session.flush()

    @staticmethod
    def chunks(session: Session, run_id: int) -> builtins.list[ProgressRow]:
        """The progress rows of a run, by chunk id."""
        return list(
            session.scalars(select(ProgressRow).where(ProgressRow.run_id == run_id).order_by(ProgressRow.chunk_id))
        )

    @staticmethod
    def start_chunk_attempt(session: Session, run_id: int, chunk_id: int) -> int:
        """Count one more attempt at computing a chunk; returns the attempt number (1-based)."""
        session.execute(
            update(ProgressRow)
            .where(ProgressRow.run_id == run_id, ProgressRow.chunk_id == chunk_id)
            .values(attempts=ProgressRow.attempts + 1, last_checkpoint=utcnow())
        )
        return int(
            session.scalar(
                select(ProgressRow.attempts).where(ProgressRow.run_id == run_id, ProgressRow.chunk_id == chunk_id)
            )
            or 0
        )

    @staticmethod
    def complete_chunk(
        session: Session,
        run_id: int,
        chunk_id: int,
        *,
        files: builtins.list[str],
        processed_rows: int,
        bytes_written: int,
        duration_seconds: float,
        position: str | None = None,
        outcome: dict[str, Any] | None = None,
    ) -> None:
        """Mark a chunk completed with the files it wrote; also counts the run's progress.

        ``outcome``: the job kind's typed result of the chunk as JSON (e.g. merge counts).
        """
        session.execute(
            update(ProgressRow)
            .where(ProgressRow.run_id == run_id, ProgressRow.chunk_id == chunk_id)
            .values(
                is_completed=True,
                files=files,
                files_written=len(files),
                processed_rows=processed_rows,
                bytes_written=bytes_written,
                duration_seconds=duration_seconds,
                position=position,
                outcome=outcome,
                last_checkpoint=utcnow(),
            )
        )
        done = select(func.count()).where(ProgressRow.run_id == run_id, ProgressRow.is_completed.is_(True))
        rows = select(func.coalesce(func.sum(ProgressRow.processed_rows), 0)).where(
            ProgressRow.run_id == run_id, ProgressRow.is_completed.is_(True)
        )
        session.execute(
            update(TaskRunRow)
            .where(TaskRunRow.run_id == run_id)
            .values(chunks_done=done.scalar_subquery(), rows_written=rows.scalar_subquery())
        )

    @staticmethod
    def mark_published(session: Session, run_id: int, chunk_ids: builtins.list[int]) -> None:
        """Record that these chunks' files were committed (``publish = per_chunk``)."""
        session.execute(
            update(ProgressRow)
            .where(ProgressRow.run_id == run_id, ProgressRow.chunk_id.in_(chunk_ids))
            .values(published=True)
        )

    @staticmethod
    def clear_progress(session: Session, run_id: int) -> None:
        """Remove the progress rows of a run (used when a run is abandoned)."""
        session.execute(delete(ProgressRow).where(ProgressRow.run_id == run_id))
