"""Executing a queued (PENDING) run in this process.

The run row that the request, the scheduled fire or the on-change trigger created is the
run that executes (no second row): :class:`QueuedRun` is the lifecycle's claim that moves
it to RUNNING and takes the object's lease in one transaction
(:func:`sparkmv.catalog.scheduling.start_pending`); the run then goes through
:meth:`sparkmv.refresh.lifecycle.RunLifecycle.refresh`, the entry point of ``REFRESH``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sqlalchemy.orm import Session

from sparkmv.catalog import ObjectKind, RunState, Trigger
from sparkmv.catalog.models import ObjectRow
from sparkmv.catalog.scheduling import finish_pending, start_pending
from sparkmv.names import ObjectName
from sparkmv.refresh import run_events
from sparkmv.refresh.jobs import job_type_for
from sparkmv.refresh.jobs.base import Job
from sparkmv.refresh.lifecycle import RunLifecycle
from sparkmv.refresh.planner import RefreshRequest
from sparkmv.refresh.result import RefreshRun
from sparkmv.refresh.runtime import Runtime


@dataclass(frozen=True)
class QueuedRun:
    """The claim of a PENDING run ``run_id`` (see :class:`sparkmv.refresh.lifecycle.RunClaim`)."""

    run_id: int

    def __call__(self, s: Session, job: Job[Any], request: RefreshRequest, owner: str) -> int | None:
        """CAS the run PENDING -> RUNNING and the object IDLE -> REFRESHING; None when
        another scheduler started it first. Raises BusyError (the run stays PENDING)."""
        if not start_pending(s, job.row, self.run_id, owner, job.settings.lease_timeout_seconds):
            return None
        fields = {k: v for k, v in job.run_fields(request).items() if k in ("priority", "publish")}
        if fields:
            job.rt.catalog.runs.update(s, self.run_id, **fields)
        run_events.started(s, job.rt.catalog, job.name, self.run_id, job.rt.catalog.runs.get(s, self.run_id).trigger)
        return self.run_id


def run_pending(rt: Runtime, run_id: int) -> RefreshRun | None:
    """Start and execute PENDING run ``run_id``; None when another scheduler took it.

    The pending run of an inactive MV, or of a table that is no longer refreshable, ends
    SKIPPED with the reason.

    Raises:
        BusyError: the object is being refreshed; the run stays PENDING.
        LeaseLostError: the lease was taken over during the run.
    """
    with rt.catalog.transaction() as s:
        run = rt.catalog.runs.get(s, run_id)
        row = rt.catalog.objects.by_id(s, run.object_id)
        skipped = _skip_reason(row)
        if skipped is not None:
            finish_pending(s, run_id, RunState.SKIPPED, skipped)
            return RefreshRun.from_row(rt.catalog.runs.get(s, run_id))
        trigger = Trigger(run.trigger)
        request = RefreshRequest.from_json(run.request_options, automatic=trigger != Trigger.MANUAL)
        name, kind = ObjectName(row.namespace, row.name), row.kind
    return RunLifecycle(rt).refresh(job_type_for(kind), name, trigger, request, claim=QueuedRun(run_id))


def _skip_reason(row: ObjectRow) -> str | None:
    """Why a pending run of ``row`` cannot run (None when it can)."""
    if row.kind == ObjectKind.REFRESHABLE_TABLE:
        from sparkmv.refresh.jobs.reload import not_refreshable_message
        from sparkmv.refresh.reload.options import TableDef

        if not TableDef.from_row(row).refreshable:
            return not_refreshable_message(ObjectName(row.namespace, row.name))
        return None
    if not row.is_active:
        return f"MV is inactive: {row.inactive_reason}"
    return None
