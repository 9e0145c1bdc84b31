"""ASYNC refresh requests: ``REFRESH MATERIALIZED VIEW name WITH ASYNC MODE``.

A request is a PENDING run executed by the scheduler; a request for an object that
already has a pending one is recorded as MERGED into it (not queued twice). The check and
the insert happen under the object's row lock (:func:`sparkmv.scheduler.claims.enqueue_run`),
so two concurrent requests cannot both queue a run.
"""

from __future__ import annotations

from sparkmv.catalog import Trigger
from sparkmv.names import ObjectName
from sparkmv.refresh.planner import RefreshRequest
from sparkmv.refresh.properties import MvProperties
from sparkmv.refresh.result import RefreshRun
from sparkmv.refresh.runtime import Runtime
from sparkmv.scheduler.claims import enqueue_run


def enqueue(rt: Runtime, name: ObjectName, request: RefreshRequest) -> RefreshRun:
    """Queue a refresh of ``name``; returns the pending run, or the MERGED one.

    Raises:
        ObjectNotFoundError: when there is no such object.
    """
    with rt.catalog.transaction() as s:
        row = rt.catalog.objects.get(s, name)
        priority = MvProperties.parse(row.properties or {}).task_priority if row.kind == "MATERIALIZED_VIEW" else 0
        opts = {"force": request.force, "start": request.start, "end": request.end}
        run, _merged = enqueue_run(s, row, Trigger.MANUAL, opts, priority)
        return RefreshRun.from_row(run)
