"""Compare-and-set claims that let several schedulers share one catalog.

Every piece of due work becomes exactly one ``PENDING`` run, and every ``PENDING`` run is
executed by exactly one scheduler:

* a scheduled fire is claimed by ``UPDATE ... SET next_fire_time = :next WHERE
  next_fire_time = :seen`` (checked by row count) in the same transaction that inserts the
  ``SCHEDULED`` run, so one due time yields one run whoever sees it first;
* enqueuing (on-change, ``WITH ASYNC MODE``, retries) first takes the object's row lock
  (a no-op ``UPDATE``; on SQLite every write transaction is exclusive anyway), then looks
  for a pending run, so two concurrent enqueues cannot both insert one;
* a ``PENDING`` run is started by ``UPDATE smv_task_runs SET state = 'RUNNING' WHERE
  state = 'PENDING'`` together with the object's ``IDLE -> REFRESHING`` CAS that takes the
  lease, in one transaction: either both happen (the lease now protects the run and
  recovery takes it over if this process dies) or neither (the run stays pending).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import select, update
from sqlalchemy.orm import Session

from sparkmv.catalog import RunState, Trigger
from sparkmv.catalog.clock import utcnow
from sparkmv.catalog.models import ObjectRow, TaskRunRow
from sparkmv.catalog.objects import ObjectStore
from sparkmv.catalog.runs import RunStore
from sparkmv.names import ObjectName
from sparkmv.scheduler.due import Fire

NOT_BEFORE = "not_before"
"""Key of ``request_options``: ISO time before which a pending run (a retry) must not start."""


def _rowcount(result: Any) -> int:
    return int(result.rowcount)


def display_name(row: ObjectRow) -> str:
    """The name of an object as users write it."""
    return ObjectName(row.namespace, row.name).display


def init_fire_time(session: Session, object_id: int, value: datetime) -> bool:
    """Store the first fire time of a schedule if none is stored yet; True when stored."""
    result = session.execute(
        update(ObjectRow)
        .where(ObjectRow.id == object_id, ObjectRow.next_fire_time.is_(None))
        .values(next_fire_time=value)
        .execution_options(synchronize_session=False)
    )
    return _rowcount(result) == 1


def claim_fire(session: Session, object_id: int, seen_next: datetime, fire: Fire) -> bool:
    """CAS the stored next fire time from ``seen_next`` to ``fire.next_fire_time``.

    Returns False when another scheduler claimed this due time first (or the schedule was
    altered meanwhile); the caller then does nothing for it.
    """
    result = session.execute(
        update(ObjectRow)
        .where(ObjectRow.id == object_id, ObjectRow.next_fire_time == seen_next)
        .values(next_fire_time=fire.next_fire_time, last_fire_time=fire.due_time)
        .execution_options(synchronize_session=False)
    )
    return _rowcount(result) == 1


def lock_object(session: Session, object_id: int) -> ObjectRow | None:
    """Take the row lock of an object for the rest of the transaction; the row, or None
    when it was dropped."""
    result = session.execute(
        update(ObjectRow)
        .where(ObjectRow.id == object_id)
        .values(updated_at=ObjectRow.updated_at)
        .execution_options(synchronize_session=False)
    )
    if _rowcount(result) != 1:
        return None
    row = session.get(ObjectRow, object_id)
    if row is not None:
        session.refresh(row)
    return row


def pending_runs(session: Session, object_id: int) -> list[TaskRunRow]:
    """The PENDING runs of an object, oldest first."""
    return list(
        session.scalars(
            select(TaskRunRow)
            .where(TaskRunRow.object_id == object_id, TaskRunRow.state == RunState.PENDING)
            .order_by(TaskRunRow.run_id)
        )
    )


def enqueue_run(
    session: Session,
    row: ObjectRow,
    trigger: Trigger,
    options: dict[str, Any] | None = None,
    priority: int = 0,
    reason: str | None = None,
) -> tuple[TaskRunRow, bool]:
    """Queue a run of ``row`` unless one is pending; returns (run, merged).

    When a run is already pending, a ``MERGED`` run pointing at it is recorded only for
    explicit requests (``MANUAL``); automatic triggers simply coalesce into the pending
    run, which is returned with ``merged = True``. Call inside the transaction that should
    own the decision (the object's row lock is taken here).
    """
    lock_object(session, row.id)
    pending = pending_runs(session, row.id)
    opts = dict(options or {})
    if pending:
        target = pending[0]
        if trigger == Trigger.MANUAL:
            if NOT_BEFORE in (target.request_options or {}):
                # An explicit request does not wait for a retry's backoff.
                new_opts = {k: v for k, v in (target.request_options or {}).items() if k != NOT_BEFORE}
                RunStore.update(session, target.run_id, request_options=new_opts)
            merged = RunStore.create(
                session,
                row.id,
                display_name(row),
                trigger,
                RunState.MERGED,
                finished=utcnow(),
                mode_reason=f"merged into pending run {target.run_id}",
                request_options=opts,
                priority=priority,
            )
            return merged, True
        return target, True
    run = RunStore.create(
        session,
        row.id,
        display_name(row),
        trigger,
        RunState.PENDING,
        request_options=opts,
        priority=priority,
        mode_reason=reason,
    )
    return run, False


def not_before(run: TaskRunRow) -> datetime | None:
    """The earliest start time of a pending run (retries wait for their backoff)."""
    raw = (run.request_options or {}).get(NOT_BEFORE)
    return datetime.fromisoformat(raw) if raw else None


def with_not_before(options: dict[str, Any], when: datetime) -> dict[str, Any]:
    """``options`` plus a not-before time."""
    return {**options, NOT_BEFORE: when.isoformat()}


def start_pending(session: Session, row: ObjectRow, run_id: int, owner: str, lease_seconds: float) -> bool:
    """CAS run ``run_id`` PENDING -> RUNNING and the object IDLE -> REFRESHING with a lease.

    Returns False when another scheduler started the run first.

    Raises:
        BusyError: when the object is not IDLE; the caller's transaction must roll back so
            the run stays pending.
    """
    now = utcnow()
    result = session.execute(
        update(TaskRunRow)
        .where(TaskRunRow.run_id == run_id, TaskRunRow.state == RunState.PENDING)
        .values(state=RunState.RUNNING, started=now, owner=owner, attempts=1)
        .execution_options(synchronize_session=False)
    )
    if _rowcount(result) != 1:
        return False
    ObjectStore.begin_refresh(session, row, run_id, owner, lease_seconds)
    return True


def finish_pending(session: Session, run_id: int, state: RunState, error: str | None = None) -> bool:
    """CAS a PENDING run to a final ``state`` (UPSTREAM_FAILED, SKIPPED, ...)."""
    result = session.execute(
        update(TaskRunRow)
        .where(TaskRunRow.run_id == run_id, TaskRunRow.state == RunState.PENDING)
        .values(state=state, error=error, finished=utcnow())
        .execution_options(synchronize_session=False)
    )
    return _rowcount(result) == 1
