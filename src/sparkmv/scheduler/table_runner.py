"""Executing a queued (PENDING) reload of a refreshable table in this process.

``REFRESH TABLE name WITH ASYNC MODE`` queues a PENDING run
(:func:`sparkmv.scheduler.requests.enqueue_table`); the scheduler executes that same run:
:func:`sparkmv.catalog.scheduling.start_pending` moves it to RUNNING and takes the table's
lease in one transaction, then the reload lifecycle runs it exactly as ``REFRESH TABLE`` would.
"""

from __future__ import annotations

from sparkmv.catalog import RunState
from sparkmv.catalog.scheduling import finish_pending, start_pending
from sparkmv.names import ObjectName
from sparkmv.refresh.reload.executor import _Run, not_refreshable_message, run_result
from sparkmv.refresh.reload.options import TableDef
from sparkmv.refresh.result import RefreshRun
from sparkmv.refresh.runtime import Runtime


def run_pending_table(rt: Runtime, run_id: int) -> RefreshRun | None:
    """Start and execute PENDING reload run ``run_id``; None when another scheduler took it.

    A table that is no longer refreshable ends the run SKIPPED with the reason.

    Raises:
        BusyError: the table is being reloaded; the run stays PENDING.
        LeaseLostError: the lease was taken over during the run.
    """
    owner = str(rt.owner)
    with rt.catalog.transaction() as s:
        run = rt.catalog.runs.get(s, run_id)
        row = rt.catalog.objects.by_id(s, run.object_id)
        tdef = TableDef.from_row(row)
        if not tdef.refreshable:
            finish_pending(s, run_id, RunState.SKIPPED, not_refreshable_message(ObjectName(row.namespace, row.name)))
            skipped = True
        else:
            skipped = False
            if not start_pending(s, row, run_id, owner, int(tdef.options["lease_timeout_seconds"])):
                return None
            rt.catalog.runs.update(s, run_id, mode="FULL_RELOAD")
    if skipped:
        return run_result(rt, run_id)
    return _Run(rt, tdef, run_id, None).execute(resume=False)
