"""ASYNC refresh requests: ``REFRESH MATERIALIZED VIEW name WITH ASYNC MODE`` and
``REFRESH TABLE name WITH ASYNC MODE``.

A request is a PENDING run executed by the scheduler; a request for an object that
already has a pending one is recorded as MERGED into it (not queued twice). The check and
the insert happen under the object's row lock
(:meth:`sparkmv.catalog.scheduling.SchedulingStore.enqueue_run`), so two concurrent
requests cannot both queue a run.
"""

from __future__ import annotations

from sparkmv.catalog import ObjectKind, Trigger
from sparkmv.errors import RefreshError
from sparkmv.names import ObjectName
from sparkmv.refresh.planner import RefreshRequest
from sparkmv.refresh.properties import MvProperties
from sparkmv.refresh.reload.options import TableDef
from sparkmv.refresh.result import RefreshRun
from sparkmv.refresh.runtime import Runtime


def _queued(rt: Runtime, object_id: int, options: dict[str, object], priority: int) -> RefreshRun:
    queued = rt.catalog.scheduling.enqueue_run(object_id, Trigger.MANUAL, dict(options), priority)
    with rt.catalog.read() as s:
        return RefreshRun.from_row(rt.catalog.runs.get(s, queued.run.run_id))


def enqueue(rt: Runtime, name: ObjectName, request: RefreshRequest) -> RefreshRun:
    """Queue a refresh of materialized view ``name``; returns the pending run, or the MERGED one.

    Raises:
        ObjectNotFoundError: when there is no such object.
    """
    with rt.catalog.read() as s:
        row = rt.catalog.objects.get(s, name)
        object_id, kind, properties = row.id, row.kind, dict(row.properties or {})
    priority = MvProperties.parse(properties).task_priority if kind == ObjectKind.MATERIALIZED_VIEW else 0
    return _queued(rt, object_id, request.to_json(), priority)


def enqueue_table(rt: Runtime, name: ObjectName) -> RefreshRun:
    """Queue a reload of refreshable table ``name`` (``REFRESH TABLE ... WITH ASYNC MODE``);
    returns the pending run, or the MERGED one when a reload is already pending.

    Raises:
        ObjectNotFoundError: when there is no such table.
        RefreshError: when it is not a refreshable table (no FULL_RELOAD source).
    """
    from sparkmv.refresh.jobs.reload import not_refreshable_message

    with rt.catalog.read() as s:
        row = rt.catalog.objects.find(s, name)
        if row is None:
            from sparkmv.errors import ObjectNotFoundError

            raise ObjectNotFoundError(f"table '{name}' does not exist")
        refreshable = row.kind == ObjectKind.REFRESHABLE_TABLE and TableDef.from_row(row).refreshable
        object_id = row.id
    if not refreshable:
        raise RefreshError(not_refreshable_message(name))
    return _queued(rt, object_id, {}, 0)
