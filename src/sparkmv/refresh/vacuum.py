"""Vacuum: expire old snapshots and delete data files nothing references.

Snapshots older than ``snapshot_retention_hours`` (default 24) are expired (the current
one is always kept); then files under a table's ``data/`` directory that no remaining
snapshot references are deleted, except the staging of runs that are still live: a
``run-<id>`` directory is touched only when run ``<id>`` is in a final state (read after the
directories were listed, so a run starting meanwhile is never touched). Tables replaced by a
swap (``CREATE OR REPLACE``, a Python MV whose columns changed), kept under a retired name so
that readers of the old table finish, are dropped once retired longer than the retention of
the object now of that name (24 hours when it is not a sparkmv MV).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import timedelta

from sparkmv.catalog import ObjectKind, RefreshState, RunState
from sparkmv.catalog.clock import utcnow
from sparkmv.names import ObjectName, retired_at, retired_of
from sparkmv.refresh.properties import MvProperties
from sparkmv.refresh.runtime import Runtime
from sparkmv.storage import warehouse

log = logging.getLogger("sparkmv.vacuum")


def vacuum(rt: Runtime) -> list[str]:
    """Vacuum every MV and refreshable table; returns one line of report per table."""
    with rt.catalog.transaction() as s:
        rows = [r for r in rt.catalog.objects.list(s) if r.kind != ObjectKind.EXTERNAL_TABLE]
    report = []
    for row in rows:
        name = ObjectName(row.namespace, row.name)
        if not rt.iceberg.exists(name):
            continue
        props = MvProperties.parse(row.properties or {}) if row.kind == ObjectKind.MATERIALIZED_VIEW else MvProperties()
        cutoff = utcnow() - timedelta(hours=props.snapshot_retention_hours)
        expired = rt.iceberg.expire_snapshots(name, cutoff)
        live_run = row.current_run_id if row.state != RefreshState.IDLE else None
        deleted = _delete_unreferenced(rt, name, live_run, row.id)
        report.append(f"{name}: expired {expired} snapshots, deleted {deleted} unreferenced files")
    retention = {
        ObjectName(r.namespace, r.name): MvProperties.parse(r.properties or {}).snapshot_retention_hours
        for r in rows
        if r.kind == ObjectKind.MATERIALIZED_VIEW
    }
    for table in drop_retired(rt, lambda owner: retention.get(owner, MvProperties().snapshot_retention_hours)):
        report.append(f"{table}: dropped (replaced, retired longer than the snapshot retention)")
    return report


def drop_retired(
    rt: Runtime, hours: Callable[[ObjectName], int | None], name: ObjectName | None = None
) -> list[ObjectName]:
    """Drop the retired tables (of ``name`` only, when given) retired more than
    ``hours(owner)`` hours ago (every one when it gives None), with their files; the names
    dropped. A table that cannot be dropped now is left for the next vacuum."""
    now = utcnow()
    dropped = []
    for table in rt.iceberg.list_tables():
        found = retired_of(table)
        if found is None or (name is not None and retired_at(table, name) is None):
            continue
        owner, at = found
        keep = hours(owner)
        if keep is not None and now - at < timedelta(hours=keep):
            continue
        try:
            rt.iceberg.drop_table(table)
        except Exception as exc:
            log.warning("could not drop the retired table %s: %s", table, exc)
            continue
        dropped.append(table)
    return dropped


def _delete_unreferenced(rt: Runtime, name: ObjectName, live_run: int | None, object_id: int) -> int:
    referenced = rt.iceberg.referenced_files(name)
    data = warehouse.join(rt.iceberg.load(name).location(), "data")
    run_dirs = warehouse.list_dir(data)
    if not run_dirs:
        return 0
    with rt.catalog.transaction() as s:
        final = {r.run_id for r in rt.catalog.runs.list(s, object_id) if RunState(r.state).is_final}
    deleted = 0
    for run_dir in run_dirs:
        if live_run is not None and run_dir.name == f"run-{live_run}":
            continue  # staging of the running refresh
        head, _, tail = run_dir.name.partition("-")
        if head == "run" and tail.isdigit() and int(tail) not in final:
            continue  # a run that is not finished (it may have started after the state was read)
        for f in warehouse.list_files(run_dir.path):
            if f.name.endswith(".parquet") and f.path not in referenced:
                warehouse.remove_file(f.path)
                deleted += 1
            elif not f.name.endswith(".parquet"):
                warehouse.remove_file(f.path)  # Spark's _SUCCESS and .crc files
    return deleted
