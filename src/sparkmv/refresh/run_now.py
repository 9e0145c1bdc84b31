"""Refresh now, in this process: the entry points of ``REFRESH MATERIALIZED VIEW`` and
``REFRESH TABLE`` (the client and the scheduler call them). They tie a job kind
(:mod:`sparkmv.refresh.jobs`) to the lifecycle (:mod:`sparkmv.refresh.lifecycle`), which
itself knows jobs only through :class:`~sparkmv.refresh.jobs.base.Job`. Each job kind is imported
where it runs (the table reload's imports pyspark; an MV refresh that ends SKIPPED needs none).
"""

from __future__ import annotations

from sparkmv.catalog import Trigger
from sparkmv.names import ObjectName
from sparkmv.refresh.lifecycle import ProgressCallback, RunLifecycle
from sparkmv.refresh.planner import RefreshRequest
from sparkmv.refresh.result import RefreshRun
from sparkmv.refresh.runtime import Runtime


def refresh_mv(
    rt: Runtime,
    name: ObjectName,
    trigger: Trigger = Trigger.MANUAL,
    request: RefreshRequest | None = None,
    progress: ProgressCallback | None = None,
) -> RefreshRun:
    """``REFRESH MATERIALIZED VIEW name``: refresh now, in this process (see
    :meth:`RunLifecycle.refresh` for what is raised); returns the finished run."""
    from sparkmv.refresh.jobs.mv import MvRefreshJob

    run = RunLifecycle(rt, progress).refresh(MvRefreshJob, name, trigger, request)
    assert run is not None  # a new run is never claimed by another process
    return run


def reload_table(
    rt: Runtime, name: ObjectName, trigger: Trigger = Trigger.MANUAL, progress: ProgressCallback | None = None
) -> RefreshRun:
    """``REFRESH TABLE name``: reload the source and apply the differences, in this process.

    Returns:
        The finished run: SUCCESS (``rows_inserted/updated/deleted`` recorded), FAILED
        (``error`` says why; the table is unchanged) or CANCELLED.

    Raises:
        ObjectNotFoundError: no such table.
        RefreshError: ``Table 'x' is not refreshable: it has no associated source with
            refresh_mode FULL_RELOAD``.
        BusyError: ``Table 'x' is not in idle state (current state REFRESHING, run N)``;
            raised before any Spark work.
        LeaseLostError: the lease was taken over while this process stalled.
    """
    from sparkmv.refresh.jobs.reload import TableReloadJob

    run = RunLifecycle(rt, progress).refresh(TableReloadJob, name, trigger)
    assert run is not None  # a new run is never claimed by another process
    return run
