"""One object's page and ``/api/objects/{name}``: definition, properties, schedule, refresh
mode, partitions (refresh time, stale flag), base tables with their consumed versions, runs,
and the expectations' results of its newest runs."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from sparkmv.catalog import ObjectKind
from sparkmv.catalog.models import ObjectRow
from sparkmv.errors import SparkMvError
from sparkmv.names import ObjectName
from sparkmv.refresh.properties import MvProperties
from sparkmv.refresh.runtime import Runtime
from sparkmv.services.staleness import PartitionStaleness, partition_staleness
from sparkmv.storage.iceberg import IcebergStore
from sparkmv.storage.partition_values import sort_key
from sparkmv.ui.model import FreshnessCache, ObjectView, display, object_views, run_json
from sparkmv.ui.pages import answered, table_detail

RUNS_SHOWN = 50
EXPECTATION_RUNS = 30
"""Runs whose expectation results the page shows (the newest that recorded any)."""
STALE_OR_FRESH = ("stale", "fresh")
PLANNED = (*STALE_OR_FRESH, "failed")
"""Display states of an idle MV whose partitions' staleness the page shows (a running refresh
is computing them; an inactive MV is never refreshed)."""


def _schedule(row: ObjectRow) -> dict[str, Any]:
    return {
        "refresh_scheme": row.refresh_scheme,
        "every_seconds": row.schedule_every_seconds,
        "start": row.schedule_start.isoformat() if row.schedule_start else None,
        "next_fire_time": row.next_fire_time.isoformat() if row.next_fire_time else None,
        "suspended": row.suspended,
    }


def _partitions(rt: Runtime, row: ObjectRow, stale: PartitionStaleness | None) -> list[dict[str, Any]]:
    """The object's partitions with their last refresh time (UTC, ISO 8601), rows, and for an
    MV whether the next refresh would recompute it and why (``stale``, ``reason``: the
    planner's answer, :mod:`sparkmv.services.staleness`; None when it cannot be planned).
    Partitions the refresh would create come last, without a refresh time."""
    try:
        table = rt.iceberg.load(ObjectName(row.namespace, row.name))
        parts = IcebergStore.partitions(table)
    except SparkMvError:
        return []
    is_mv = row.kind == ObjectKind.MATERIALIZED_VIEW
    out = []
    for p in sorted(parts, key=lambda p: sort_key(p.value)):
        when = datetime.fromtimestamp(p.last_updated_at, UTC).isoformat() if p.last_updated_at else None
        why = stale.reason_for(p.value) if stale is not None else None
        out.append(
            {
                "value": p.value,
                "refreshed_at": when,
                "rows": p.record_count,
                "stale": (why is not None if stale is not None else None) if is_mv else None,
                "reason": why,
            }
        )
    if stale is not None:
        for value in stale.new_partitions:
            why = stale.reason_for(value)
            out.append({"value": value, "refreshed_at": None, "rows": 0, "stale": True, "reason": why})
    return out


def _staleness(rt: Runtime, row: ObjectRow, view: dict[str, Any]) -> PartitionStaleness | None:
    """The planner's partition staleness of an idle, refreshed MV, and the page's header
    (``view``'s state and detail, unless the last run failed) set from the same plan, so the
    two never disagree."""
    if row.kind != ObjectKind.MATERIALIZED_VIEW or row.last_success_run_id is None:
        return None
    if view["state"] not in PLANNED:
        return None
    try:
        stale = partition_staleness(rt, row)
    except SparkMvError:
        return None
    if view["state"] not in STALE_OR_FRESH:  # a failed MV's header keeps the error
        return stale
    if stale.is_fresh:
        view.update(state="fresh", detail="fresh: a refresh recomputes nothing", stale_partitions=0)
        return stale
    n = stale.changed_base_count
    view.update(
        state="stale",
        detail=f"stale: {n} changed base partition{'s' if n != 1 else ''}; a {stale.mode} refresh recomputes "
        f"{stale.scope()}",
        stale_partitions=n,
    )
    return stale


def _bases(rt: Runtime, row: ObjectRow, changed: dict[str, list[str]]) -> list[dict[str, Any]]:
    """Each base table: its consumed versions per base partition and consumed position."""
    with rt.catalog.read() as s:
        versions = rt.catalog.versions.load(s, row.id)
        positions = rt.catalog.positions.load(s, row.id)
    out = []
    for base in row.base_tables or []:
        parts = [
            {"partition": part, "version": v.version} for (table, part), v in sorted(versions.items()) if table == base
        ]
        out.append(
            {
                "name": display(base),
                "changed_partitions": sorted(changed.get(base, [])),
                "consumed_partitions": parts,
                "has_consumed_position": base in positions,
            }
        )
    return out


def _staleness_json(stale: PartitionStaleness | None) -> dict[str, Any] | None:
    if stale is None:
        return None
    return {
        "mode": stale.mode,
        "reason": stale.reason,
        "changed_base_partitions": stale.changed_base_partitions,
        "whole_mv": stale.whole_mv,
        "partitions_to_recompute": None if stale.whole_mv is not None else len(stale.reasons),
        "scope": stale.scope(),
    }


def expectation_history(rt: Runtime, dataset: str, limit: int = EXPECTATION_RUNS) -> list[dict[str, Any]]:
    """The expectation results of ``dataset`` (its display name) in the newest ``limit`` runs
    that recorded any, oldest first; empty when it has none.

    Each run: ``run_id`` (None: a pipeline's refresh outside the run lifecycle, told apart by
    when it was stored), ``recorded_at`` (UTC, ISO 8601) and ``results``, sorted by expectation:
    ``expectation``, ``action`` (``warn``, ``drop``, ``fail``), ``condition``, ``rows_passed``
    and ``rows_failed`` (rows whose condition was TRUE, and FALSE or NULL).
    """
    with rt.catalog.read() as s:
        stored = rt.catalog.expectations.list(s, dataset=dataset)  # newest first
    runs: dict[tuple[str, object], dict[str, Any]] = {}
    for r in stored:
        key: tuple[str, object] = ("run", r.run_id) if r.run_id is not None else ("at", r.recorded_at)
        if key not in runs:
            if len(runs) == limit:
                continue
            when = r.recorded_at.isoformat() if r.recorded_at else None
            runs[key] = {"run_id": r.run_id, "recorded_at": when, "results": []}
        runs[key]["results"].append(
            {
                "expectation": r.expectation,
                "action": r.action,
                "condition": r.condition,
                "rows_passed": r.rows_passed,
                "rows_failed": r.rows_failed,
            }
        )
    for run in runs.values():
        run["results"].sort(key=lambda e: e["expectation"])
    return list(reversed(runs.values()))


def object_detail(rt: Runtime, cache: FreshnessCache, name: str) -> dict[str, Any]:
    """Everything the object page shows, as JSON-ready values. A name that is no object but
    has expectation results (a table a pipeline keeps) shows as a base table with them.

    Raises:
        ObjectNotFoundError: when ``name`` names no object (and no base table an MV reads, nor
            a dataset with expectation results).
        ParseError: when ``name`` is not a valid name.
    """
    obj = ObjectName.parse(name, allow_reserved=True)
    with rt.catalog.read() as s:
        row = rt.catalog.objects.find(s, obj)
        runs = [run_json(r) for r in rt.catalog.runs.list(s, row.id, RUNS_SHOWN)] if row else []
    expectations = expectation_history(rt, obj.display)
    views = {v.name: v for v in object_views(rt, cache)}
    view: ObjectView | None = views.get(display(obj.qualified))
    if view is None and expectations:
        view = ObjectView(obj.display, "base table", "base table", "base table", in_catalog=False)
    if view is None:
        from sparkmv.errors import ObjectNotFoundError

        raise ObjectNotFoundError(f"table or view '{obj}' does not exist")
    readers = sorted(v.name for v in views.values() if view.name in v.base_tables)
    out: dict[str, Any] = {"object": view.to_json(), "readers": readers, "runs": runs, "expectations": expectations}
    if row is None or row.kind == ObjectKind.EXTERNAL_TABLE:
        out["table"] = table_detail(rt, obj, row)
    if row is None:
        return out
    if row.kind == ObjectKind.MATERIALIZED_VIEW:
        out["answered"] = answered(rt, obj)
    fresh = cache.get(rt, row) if row.kind == ObjectKind.MATERIALIZED_VIEW else None
    stale = _staleness(rt, row, out["object"])
    props = dict(row.properties or {})
    mode = MvProperties.parse(props).refresh_mode if row.kind == ObjectKind.MATERIALIZED_VIEW else None
    out.update(
        definition=row.definition,
        location=row.location,
        partition_by=row.partition_by or ",".join(row.partition_columns or []) or None,
        properties=props,
        refresh_mode=mode or (row.options or {}).get("refresh_mode"),
        schedule=_schedule(row),
        partitions=_partitions(rt, row, stale) if row.kind != ObjectKind.EXTERNAL_TABLE else [],
        staleness=_staleness_json(stale),
        base_tables=_bases(rt, row, stale.changed_base_partitions if stale else (fresh.changed if fresh else {})),
    )
    return out
