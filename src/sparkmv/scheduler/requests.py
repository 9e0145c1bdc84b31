"""ASYNC refresh requests: ``REFRESH MATERIALIZED VIEW name WITH ASYNC MODE``.

A request is a PENDING run; a request for an object that already has a pending one is
recorded as MERGED into it (not queued twice).
"""

from __future__ import annotations

from sparkmv.catalog import RunState, Trigger
from sparkmv.catalog.clock import utcnow
from sparkmv.names import ObjectName
from sparkmv.refresh.planner import RefreshRequest
from sparkmv.refresh.result import RefreshRun
from sparkmv.refresh.runtime import Runtime


def enqueue(rt: Runtime, name: ObjectName, request: RefreshRequest) -> RefreshRun:
    """Queue a refresh of ``name``; returns the pending run, or the MERGED one.

    Raises:
        ObjectNotFoundError: when there is no such object.
    """
    with rt.catalog.transaction() as s:
        row = rt.catalog.objects.get(s, name)
        pending = rt.catalog.runs.pending(s, row.id)
        opts = {"force": request.force, "start": request.start, "end": request.end}
        if pending is not None:
            merged = rt.catalog.runs.create(
                s, row.id, str(name), Trigger.MANUAL, RunState.MERGED, finished=utcnow(),
                mode_reason=f"merged into pending run {pending.run_id}", request_options=opts,
            )  # fmt: skip
            return RefreshRun.from_row(merged)
        run = rt.catalog.runs.create(s, row.id, str(name), Trigger.MANUAL, RunState.PENDING, request_options=opts)
        return RefreshRun.from_row(run)
