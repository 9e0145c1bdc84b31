"""Job kinds of the run lifecycle: MV refresh (FULL / PCT) and table reload (FULL_RELOAD)."""

from __future__ import annotations

from typing import Any

from sparkmv.catalog import ObjectKind
from sparkmv.catalog.models import ObjectRow
from sparkmv.errors import RefreshError
from sparkmv.refresh.jobs.base import Job
from sparkmv.refresh.runtime import Runtime


def job_type_for(kind: ObjectKind | str) -> Any:
    """The job kind class refreshing objects of ``kind``.

    Raises:
        RefreshError: no job kind refreshes objects of ``kind``.
    """
    if kind == ObjectKind.MATERIALIZED_VIEW:
        from sparkmv.refresh.jobs.mv import MvRefreshJob

        return MvRefreshJob
    if kind == ObjectKind.REFRESHABLE_TABLE:
        from sparkmv.refresh.jobs.reload import TableReloadJob

        return TableReloadJob
    raise RefreshError(f"objects of kind {kind} are not refreshed")


def job_for(rt: Runtime, row: ObjectRow) -> Job[Any]:
    """The job of an existing run's object (recovery, queued runs)."""
    job: Job[Any] = job_type_for(row.kind)(rt, row)
    return job
