"""Status of materialized views: state, size, last refresh, freshness and staleness.

The one status service, used by the client (``sparkmv status``, ``sparkmv.materialized_views``)
and by front ends; freshness itself is decided by :mod:`sparkmv.refresh.freshness`, which the
scheduler uses too.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from sparkmv.catalog import ObjectKind, RunState
from sparkmv.catalog.clock import utcnow
from sparkmv.catalog.models import ObjectRow, TaskRunRow
from sparkmv.errors import SparkMvError
from sparkmv.names import ObjectName
from sparkmv.refresh.freshness import Freshness, freshness
from sparkmv.refresh.properties import MvProperties
from sparkmv.refresh.runtime import Runtime
from sparkmv.storage.iceberg import IcebergStore


@dataclass(frozen=True)
class MvStatus:
    """One row of ``sparkmv status`` / ``sparkmv.materialized_views``.

    Attributes:
        rows: rows in the current snapshot; partitions: MV partitions.
        is_fresh: no base partition the MV depends on changed since its last refresh.
        stale_partitions: base partitions changed since then.
        staleness_seconds: now minus the oldest unconsumed base change (0 when fresh).
        last_refresh_duration: seconds of the last finished run.
        freshness_alert: ``"ERROR"`` / ``"WARN"`` when the staleness (for an MV never
            refreshed: the seconds since its creation) is past ``freshness_error_after`` /
            ``freshness_warn_after`` (:func:`freshness_alert`), else None.
    """

    name: str
    definition: str
    partition_by: str | None
    refresh_scheme: str
    state: str
    is_active: bool
    inactive_reason: str | None
    rows: int
    partitions: int
    last_refresh_start: datetime | None
    last_refresh_end: datetime | None
    last_refresh_state: str | None
    last_refresh_error: str | None
    last_refresh_duration: float | None
    is_fresh: bool
    stale_partitions: int
    staleness_seconds: float
    last_refresh_base_partitions: int
    last_refresh_mv_partitions: int
    refresh_state_reason: str | None
    current_run_id: int | None
    freshness_alert: str | None = None


def freshness_alert(props: MvProperties, staleness_seconds: float) -> str | None:
    """``"ERROR"`` when ``staleness_seconds`` is past the MV's ``freshness_error_after``,
    ``"WARN"`` when past its ``freshness_warn_after``, else None (as dbt's source freshness:
    past means strictly more; a fresh MV, staleness 0, is past neither).

    >>> p = MvProperties.parse({"freshness_warn_after": "1 minute", "freshness_error_after": "1 hour"})
    >>> freshness_alert(p, 0.0), freshness_alert(p, 61.0), freshness_alert(p, 3601.0)
    (None, 'WARN', 'ERROR')
    """
    if staleness_seconds <= 0:
        return None
    if props.freshness_error_after is not None and staleness_seconds > props.freshness_error_after:
        return "ERROR"
    if props.freshness_warn_after is not None and staleness_seconds > props.freshness_warn_after:
        return "WARN"
    return None


def _size(store: IcebergStore, name: ObjectName) -> tuple[int, int]:
    try:
        table = store.load(name)
    except SparkMvError:
        return 0, 0
    snap = table.current_snapshot()
    if snap is None or snap.summary is None:
        return 0, 0
    rows = int(snap.summary.get("total-records", "0") or 0)
    parts = len(store.partitions(table)) if IcebergStore.partition_column(table) else (1 if rows else 0)
    return rows, parts


def mv_freshness(rt: Runtime, row: ObjectRow, read_bound: bool = False) -> Freshness | None:
    """What changed under MV ``row`` since its last refresh (the changed base partitions and
    the oldest unconsumed change; with ``read_bound``, the bytes a refresh of them reads at
    most, :func:`sparkmv.refresh.freshness.read_bound`); None when it was never refreshed or
    a base table is gone."""
    if row.last_success_run_id is None:
        return None
    excluded = MvProperties.parse(row.properties or {}).excluded_refresh_tables
    from sparkmv.refresh.context import MvDefinition

    try:
        mv = MvDefinition.from_row(row) if read_bound else None
        return freshness(rt.catalog, rt.iceberg, row.id, row.base_tables or [], excluded, mv)
    except SparkMvError:
        return None


def _freshness(rt: Runtime, row: ObjectRow) -> tuple[bool, int, float]:
    fresh = mv_freshness(rt, row)
    if fresh is None:
        return False, 0, 0.0
    return fresh.is_fresh, fresh.stale_partitions, fresh.staleness_seconds()


def mv_status(rt: Runtime, row: ObjectRow, last: TaskRunRow | None, freshness: bool = True) -> MvStatus:
    """Status of one MV row (``last`` is its newest finished run)."""
    name = ObjectName(row.namespace, row.name)
    rows, parts = _size(rt.iceberg, name)
    fresh, stale, staleness = _freshness(rt, row) if freshness else (False, 0, 0.0)
    duration = (last.finished - last.started).total_seconds() if last and last.finished and last.started else None
    base_parts = 0
    if last and last.plan:
        changed = (last.plan.get("plan") or {}).get("changed_base_partitions") or {}
        base_parts = sum(len(v) for v in changed.values())
    return MvStatus(
        name=name.display,
        definition=row.definition or "",
        partition_by=row.partition_by,
        refresh_scheme=row.refresh_scheme,
        state=row.state,
        is_active=row.is_active,
        inactive_reason=row.inactive_reason,
        rows=rows,
        partitions=parts,
        last_refresh_start=last.started if last else None,
        last_refresh_end=last.finished if last else None,
        last_refresh_state=last.state if last else None,
        last_refresh_error=last.error if last else None,
        last_refresh_duration=duration,
        is_fresh=fresh,
        stale_partitions=stale,
        staleness_seconds=round(staleness, 3),
        last_refresh_base_partitions=base_parts,
        last_refresh_mv_partitions=last.partitions_done if last else 0,
        refresh_state_reason=row.refresh_state_reason,
        current_run_id=row.current_run_id,
        freshness_alert=_alert(row, fresh, staleness) if freshness else None,
    )


def _alert(row: ObjectRow, fresh: bool, staleness: float) -> str | None:
    """The freshness alert of MV ``row`` (its staleness; since creation when never refreshed)."""
    try:
        props = MvProperties.parse(row.properties or {})
    except SparkMvError:
        return None
    if props.freshness_warn_after is None and props.freshness_error_after is None:
        return None
    if row.last_success_run_id is None:
        staleness = max(0.0, (utcnow() - row.created_at).total_seconds())
    return freshness_alert(props, 0.0 if fresh else staleness)


def statuses(rt: Runtime, name: ObjectName | None = None) -> list[MvStatus]:
    """Status of every MV (or of ``name``).

    Raises:
        ObjectNotFoundError: when ``name`` is not an MV.
    """
    with rt.catalog.read() as s:
        if name is not None:
            rows = [rt.catalog.objects.get(s, name, ObjectKind.MATERIALIZED_VIEW)]
        else:
            rows = rt.catalog.objects.list(s, ObjectKind.MATERIALIZED_VIEW)
        lasts = {}
        for r in rows:
            finished = [
                run
                for run in rt.catalog.runs.list(s, r.id, limit=20)
                if RunState(run.state).is_final and run.state not in (RunState.MERGED,)
            ]
            lasts[r.id] = finished[0] if finished else None
    return [mv_status(rt, r, lasts[r.id]) for r in rows]
