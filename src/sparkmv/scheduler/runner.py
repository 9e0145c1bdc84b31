"""Executing a queued (PENDING) run of a materialized view in this process.

The run row that the request, the scheduled fire or the on-change trigger created is the
run that executes (no second row): :func:`sparkmv.scheduler.claims.start_pending` moves it
to RUNNING and takes the object's lease in one transaction, then the refresh executor's
lifecycle runs it exactly as ``REFRESH MATERIALIZED VIEW`` would.
"""

from __future__ import annotations

from sparkmv.catalog import RunState, Trigger
from sparkmv.refresh.context import MvDefinition
from sparkmv.refresh.executor import RefreshExecutor
from sparkmv.refresh.planner import RefreshRequest
from sparkmv.refresh.properties import MvProperties
from sparkmv.refresh.result import RefreshRun
from sparkmv.scheduler.claims import finish_pending, start_pending


class PendingRunExecutor(RefreshExecutor):
    """A :class:`RefreshExecutor` that executes an existing PENDING run."""

    def run_pending(self, run_id: int) -> RefreshRun | None:
        """Start and execute PENDING run ``run_id``; None when another scheduler took it.

        An inactive MV's pending run ends SKIPPED with the reason.

        Raises:
            BusyError: the MV is being refreshed; the run stays PENDING.
            LeaseLostError: the lease was taken over during the run.
        """
        owner = str(self.rt.owner)
        with self.catalog.transaction() as s:
            run = self.catalog.runs.get(s, run_id)
            row = self.catalog.objects.by_id(s, run.object_id)
            if not row.is_active:
                finish_pending(s, run_id, RunState.SKIPPED, f"MV is inactive: {row.inactive_reason}")
                return RefreshRun.from_row(self.catalog.runs.get(s, run_id))
            props = MvProperties.parse(row.properties or {})
            if not start_pending(s, row, run_id, owner, props.lease_timeout_seconds):
                return None
            self.catalog.runs.update(s, run_id, priority=props.task_priority, publish=props.publish.lower())
            opts = dict(run.request_options or {})
            trigger = run.trigger
            mv = MvDefinition.from_row(row)
        request = RefreshRequest(
            bool(opts.get("force")), opts.get("start"), opts.get("end"), automatic=trigger != Trigger.MANUAL
        )
        return self._execute(run_id, mv, request, resume=False)
