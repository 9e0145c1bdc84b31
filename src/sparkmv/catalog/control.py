"""ControlStore: control commands (CANCEL, PAUSE, RESUME) for running refreshes."""

from __future__ import annotations

from sqlalchemy import delete, select
from sqlalchemy.orm import Session

from sparkmv.catalog.clock import utcnow
from sparkmv.catalog.models import ControlRow
from sparkmv.catalog.states import ControlCommand


class ControlStore:
    """Commands are rows; the executor reads the newest between chunks."""

    @staticmethod
    def send(session: Session, object_id: int, run_id: int | None, command: ControlCommand) -> None:
        """Record a command for ``run_id`` of ``object_id``."""
        session.add(ControlRow(object_id=object_id, run_id=run_id, command=command, created_at=utcnow()))
        session.flush()

    @staticmethod
    def commands(session: Session, run_id: int) -> list[ControlCommand]:
        """Commands sent to ``run_id``, oldest first."""
        rows = session.scalars(select(ControlRow).where(ControlRow.run_id == run_id).order_by(ControlRow.id))
        return [ControlCommand(r.command) for r in rows]

    @staticmethod
    def paused_runs(session: Session, run_ids: list[int]) -> set[int]:
        """The runs among ``run_ids`` whose newest PAUSE/RESUME command is PAUSE (held
        before their next chunk, as the run's monitor reads it)."""
        if not run_ids:
            return set()
        stmt = (
            select(ControlRow)
            .where(
                ControlRow.run_id.in_(run_ids), ControlRow.command.in_([ControlCommand.PAUSE, ControlCommand.RESUME])
            )
            .order_by(ControlRow.id)
        )
        last: dict[int, str] = {}
        for row in session.scalars(stmt):
            if row.run_id is not None:
                last[row.run_id] = row.command
        return {run_id for run_id, command in last.items() if command == ControlCommand.PAUSE}

    @staticmethod
    def clear(session: Session, run_id: int) -> None:
        """Forget the commands of a finished run."""
        session.execute(delete(ControlRow).where(ControlRow.run_id == run_id))
