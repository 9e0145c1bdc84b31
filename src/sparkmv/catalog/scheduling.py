"""SchedulingStore: the compare-and-set claims that let several schedulers share one catalog.

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

Each method of :class:`SchedulingStore` owns its transaction; reads use read-only sessions
(no write lock on SQLite). Typed records (:class:`QueuedRun`, :class:`Enqueued`) come out,
never ORM rows. The session-level functions :func:`start_pending` and :func:`finish_pending`
serve a caller that must start a run inside its own transaction.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from sqlalchemy import func, select, update
from sqlalchemy.orm import Session

from sparkmv.catalog.clock import utcnow
from sparkmv.catalog.database import Database
from sparkmv.catalog.models import ObjectRow, TaskRunRow
from sparkmv.catalog.objects import ObjectStore
from sparkmv.catalog.runs import RunStore
from sparkmv.catalog.states import RefreshState, RunState, Trigger
from sparkmv.errors import ObjectNotFoundError
from sparkmv.names import ObjectName

NOT_BEFORE = "not_before"
"""Key of ``request_options``: ISO time before which a pending run (a retry) must not start."""


@dataclass(frozen=True)
class QueuedRun:
    """A run as the scheduler sees it.

    Attributes:
        options: the run's request options (``force``, ``start``, ``end``, ``attempt``,
            ``not_before`` ...), JSON values.
    """

    run_id: int
    object_id: int
    state: RunState
    trigger: Trigger
    options: dict[str, Any] = field(default_factory=dict)
    priority: int = 0
    reason: str | None = None

    @classmethod
    def from_row(cls, row: TaskRunRow) -> QueuedRun:
        """The record of an ORM run row."""
        return cls(
            row.run_id,
            row.object_id,
            RunState(row.state),
            Trigger(row.trigger),
            dict(row.request_options or {}),
            row.priority or 0,
            row.mode_reason,
        )

    @property
    def not_before(self) -> datetime | None:
        """The earliest start time of a pending run (retries wait for their backoff)."""
        raw = self.options.get(NOT_BEFORE)
        return datetime.fromisoformat(raw) if raw else None


@dataclass(frozen=True)
class Enqueued:
    """The result of an enqueue: the pending run, or the MERGED record of an explicit request
    (``merged`` is True whenever a run was already pending)."""

    run: QueuedRun
    merged: bool


def _rowcount(result: Any) -> int:
    return int(result.rowcount)


def _display(row: ObjectRow) -> str:
    return ObjectName(row.namespace, row.name).display


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


def _pending(session: Session, object_id: int) -> list[TaskRunRow]:
    return list(
        session.scalars(
            select(TaskRunRow)
            .where(TaskRunRow.object_id == object_id, TaskRunRow.state == RunState.PENDING)
            .order_by(TaskRunRow.run_id)
        )
    )


def _enqueue(
    session: Session,
    row: ObjectRow,
    trigger: Trigger,
    options: dict[str, Any] | None,
    priority: int,
    reason: str | None,
) -> Enqueued:
    """Queue a run of ``row`` (already locked) unless one is pending."""
    pending = _pending(session, row.id)
    opts = dict(options or {})
    if not pending:
        run = RunStore.create(
            session,
            row.id,
            _display(row),
            trigger,
            RunState.PENDING,
            request_options=opts,
            priority=priority,
            mode_reason=reason,
        )
        return Enqueued(QueuedRun.from_row(run), False)
    target = pending[0]
    if trigger != Trigger.MANUAL:
        return Enqueued(QueuedRun.from_row(target), True)
    if NOT_BEFORE in (target.request_options or {}):
        # An explicit request does not wait for a retry's backoff.
        new_opts = {k: v for k, v in (target.request_options or {}).items() if k != NOT_BEFORE}
        RunStore.update(session, target.run_id, request_options=new_opts)
    merged = RunStore.create(
        session,
        row.id,
        _display(row),
        trigger,
        RunState.MERGED,
        finished=utcnow(),
        mode_reason=f"merged into pending run {target.run_id}",
        request_options=opts,
        priority=priority,
    )
    return Enqueued(QueuedRun.from_row(merged), True)


def start_pending(session: Session, row: ObjectRow, run_id: int, owner: str, lease_seconds: float) -> bool:
    """CAS run ``run_id`` PENDING -> RUNNING and the object IDLE -> REFRESHING with a lease,
    inside the caller's transaction.

    Returns False when another scheduler started the run first.

    Raises:
        BusyError: when the object is not IDLE; the caller's transaction must roll back so
            the run stays pending.
    """
    result = session.execute(
        update(TaskRunRow)
        .where(TaskRunRow.run_id == run_id, TaskRunRow.state == RunState.PENDING)
        .values(state=RunState.RUNNING, started=utcnow(), owner=owner, attempts=1)
        .execution_options(synchronize_session=False)
    )
    if _rowcount(result) != 1:
        return False
    ObjectStore.begin_refresh(session, row, run_id, owner, lease_seconds)
    return True


def finish_pending(session: Session, run_id: int, state: RunState, error: str | None = None) -> bool:
    """CAS a PENDING run to a final ``state`` (UPSTREAM_FAILED, SKIPPED, ...) inside the
    caller's transaction; False when it is no longer pending."""
    result = session.execute(
        update(TaskRunRow)
        .where(TaskRunRow.run_id == run_id, TaskRunRow.state == RunState.PENDING)
        .values(state=state, error=error, finished=utcnow())
        .execution_options(synchronize_session=False)
    )
    return _rowcount(result) == 1


class SchedulingStore:
    """Domain methods of the scheduler on one catalog database; each owns its transaction."""

    def __init__(self, database: Database) -> None:
        self.db = database

    # -- reads ------------------------------------------------------------------------------
    def pending_runs(self, object_id: int) -> list[QueuedRun]:
        """The PENDING runs of an object, oldest first (read-only session)."""
        with self.db.read() as s:
            return [QueuedRun.from_row(r) for r in _pending(s, object_id)]

    def run_counts(self) -> dict[RunState, int]:
        """Number of runs in the catalog by state (read-only session)."""
        with self.db.read() as s:
            counts = s.execute(select(TaskRunRow.state, func.count()).group_by(TaskRunRow.state)).all()
        return {RunState(state): int(n) for state, n in counts}

    # -- schedules ----------------------------------------------------------------------------
    def init_fire_time(self, object_id: int, value: datetime) -> bool:
        """Store the first fire time of a schedule if none is stored yet; True when stored."""
        with self.db.transaction() as s:
            result = s.execute(
                update(ObjectRow)
                .where(ObjectRow.id == object_id, ObjectRow.next_fire_time.is_(None))
                .values(next_fire_time=value)
                .execution_options(synchronize_session=False)
            )
            return _rowcount(result) == 1

    def claim_fire(
        self,
        object_id: int,
        seen_next: datetime,
        next_fire_time: datetime,
        due_time: datetime,
        options: dict[str, Any] | None = None,
        priority: int = 0,
    ) -> Enqueued | None:
        """CAS the stored next fire time from ``seen_next`` to ``next_fire_time`` and queue a
        SCHEDULED run (coalesced into a pending one), in one transaction.

        Returns None when another scheduler claimed this due time first, the schedule was
        altered meanwhile, or the object was dropped; nothing is queued then.
        """
        with self.db.transaction() as s:
            result = s.execute(
                update(ObjectRow)
                .where(ObjectRow.id == object_id, ObjectRow.next_fire_time == seen_next)
                .values(next_fire_time=next_fire_time, last_fire_time=due_time)
                .execution_options(synchronize_session=False)
            )
            if _rowcount(result) != 1:
                return None
            row = lock_object(s, object_id)
            assert row is not None  # the claim above matched it in this transaction
            return _enqueue(s, row, Trigger.SCHEDULED, options, priority, None)

    def suspend_schedule(self, object_id: int, reason: str) -> None:
        """Suspend the schedule of an object with ``reason`` (RESUME SCHEDULE lifts it)."""
        with self.db.transaction() as s:
            ObjectStore.set_fields(s, object_id, suspended=True, refresh_state_reason=reason)

    # -- queueing -----------------------------------------------------------------------------
    def enqueue_run(
        self,
        object_id: int,
        trigger: Trigger,
        options: dict[str, Any] | None = None,
        priority: int = 0,
        reason: str | None = None,
    ) -> Enqueued:
        """Queue a run of object ``object_id`` unless one is pending.

        When a run is already pending, a ``MERGED`` run pointing at it is recorded only for
        explicit requests (``MANUAL``, which also lifts a retry's ``not_before``); automatic
        triggers simply coalesce into the pending run, which is returned with ``merged``.

        Raises:
            ObjectNotFoundError: when the object was dropped.
        """
        with self.db.transaction() as s:
            row = lock_object(s, object_id)
            if row is None:
                raise ObjectNotFoundError(f"object {object_id} does not exist")
            return _enqueue(s, row, trigger, options, priority, reason)

    def enqueue_on_change(
        self, object_id: int, seen_last_run_id: int | None, priority: int, reason: str
    ) -> Enqueued | None:
        """Queue an ON_BASE_TABLE_CHANGE run, but only if the object is still IDLE and no run
        finished since the caller looked (``last_run_id`` unchanged): a run that finished
        meanwhile consumed the changes. None when that check failed or it was dropped."""
        with self.db.transaction() as s:
            row = lock_object(s, object_id)
            if row is None or row.state != RefreshState.IDLE or row.last_run_id != seen_last_run_id:
                return None
            return _enqueue(s, row, Trigger.ON_BASE_TABLE_CHANGE, {}, priority, reason)

    def finish_pending(self, run_id: int, state: RunState, error: str | None = None) -> bool:
        """CAS a PENDING run to a final ``state``; False when it is no longer pending."""
        with self.db.transaction() as s:
            return finish_pending(s, run_id, state, error)

    def mark_upstream_failed(self, object_id: int, error: str, record_on_change: bool) -> list[int]:
        """End every PENDING run of the object UPSTREAM_FAILED with ``error``; when none was
        pending and ``record_on_change``, record one ON_BASE_TABLE_CHANGE run UPSTREAM_FAILED
        (an on-change MV whose upstream refresh did not happen). Returns the run ids marked."""
        with self.db.transaction() as s:
            row = lock_object(s, object_id)
            if row is None:
                return []
            marked = [
                r.run_id for r in _pending(s, object_id) if finish_pending(s, r.run_id, RunState.UPSTREAM_FAILED, error)
            ]
            if not marked and record_on_change:
                run = RunStore.create(
                    s,
                    object_id,
                    _display(row),
                    Trigger.ON_BASE_TABLE_CHANGE,
                    RunState.UPSTREAM_FAILED,
                    finished=utcnow(),
                    error=error,
                )
                marked.append(run.run_id)
            return marked

    def claim_reload(self, object_id: int, seen_last_trigger_time: datetime | None) -> bool:
        """CAS a refreshable table's ``last_trigger_time`` from the value the caller saw to
        now, only while the table is IDLE: one scheduler claims one interval reload."""
        seen = (
            ObjectRow.last_trigger_time.is_(None)
            if seen_last_trigger_time is None
            else ObjectRow.last_trigger_time == seen_last_trigger_time
        )
        with self.db.transaction() as s:
            result = s.execute(
                update(ObjectRow)
                .where(ObjectRow.id == object_id, ObjectRow.state == RefreshState.IDLE, seen)
                .values(last_trigger_time=utcnow())
                .execution_options(synchronize_session=False)
            )
            return _rowcount(result) == 1
