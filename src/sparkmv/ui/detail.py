"""One object's page and ``/api/objects/{name}``: definition, properties, schedule, refresh
mode, partitions (refresh time, stale flag), base tables with their consumed versions, runs."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from sparkmv.catalog import ObjectKind
from sparkmv.catalog.models import ObjectRow
from sparkmv.errors import SparkMvError
from sparkmv.names import ObjectName
from sparkmv.refresh.freshness import Freshness
from sparkmv.refresh.properties import MvProperties
from sparkmv.refresh.runtime import Runtime
from sparkmv.storage.iceberg import IcebergStore
from sparkmv.ui.model import FreshnessCache, ObjectView, display, object_views, run_json

RUNS_SHOWN = 50


def _schedule(row: ObjectRow) -> dict[str, Any]:
    return {
        "refresh_scheme": row.refresh_scheme,
        "every_seconds": row.schedule_every_seconds,
        "start": row.schedule_start.isoformat() if row.schedule_start else None,
        "next_fire_time": row.next_fire_time.isoformat() if row.next_fire_time else None,
        "suspended": row.suspended,
    }


def _partitions(rt: Runtime, row: ObjectRow, fresh: Freshness | None) -> list[dict[str, Any]]:
    """The object's partitions with their last refresh time (UTC, ISO 8601) and stale flag.

    A partition is stale when a changed base partition carries its value (``col=value``):
    the identity lineage of partition change tracking; other lineages show no flag.
    """
    try:
        table = rt.iceberg.load(ObjectName(row.namespace, row.name))
        parts = IcebergStore.partitions(table)
    except SparkMvError:
        return []
    changed_values: set[str] = set()
    for paths in (fresh.changed if fresh else {}).values():
        for path in paths:
            changed_values.update(seg.partition("=")[2] for seg in path.split("/") if "=" in seg)
    out = []
    for p in sorted(parts, key=lambda p: (p.value is None, p.value or "")):
        when = datetime.fromtimestamp(p.last_updated_at, UTC).isoformat() if p.last_updated_at else None
        out.append(
            {
                "value": p.value,
                "refreshed_at": when,
                "rows": p.record_count,
                "stale": p.value in changed_values if row.kind == ObjectKind.MATERIALIZED_VIEW else None,
            }
        )
    return out


def _bases(rt: Runtime, row: ObjectRow, fresh: Freshness | None) -> list[dict[str, Any]]:
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
                "changed_partitions": sorted((fresh.changed if fresh else {}).get(base, [])),
                "consumed_partitions": parts,
                "has_consumed_position": base in positions,
            }
        )
    return out


def object_detail(rt: Runtime, cache: FreshnessCache, name: str) -> dict[str, Any]:
    """Everything the object page shows, as JSON-ready values.

    Raises:
        ObjectNotFoundError: when ``name`` names no object (and no base table an MV reads).
        ParseError: when ``name`` is not a valid name.
    """
    obj = ObjectName.parse(name, allow_reserved=True)
    with rt.catalog.read() as s:
        row = rt.catalog.objects.find(s, obj)
        runs = [run_json(r) for r in rt.catalog.runs.list(s, row.id, RUNS_SHOWN)] if row else []
    views = {v.name: v for v in object_views(rt, cache)}
    view: ObjectView | None = views.get(display(obj.qualified))
    if view is None:
        from sparkmv.errors import ObjectNotFoundError

        raise ObjectNotFoundError(f"table or view '{obj}' does not exist")
    readers = sorted(v.name for v in views.values() if view.name in v.base_tables)
    out: dict[str, Any] = {"object": view.to_json(), "readers": readers, "runs": runs}
    if row is None:
        return out
    fresh = cache.get(rt, row) if row.kind == ObjectKind.MATERIALIZED_VIEW else None
    props = dict(row.properties or {})
    mode = MvProperties.parse(props).refresh_mode if row.kind == ObjectKind.MATERIALIZED_VIEW else None
    out.update(
        definition=row.definition,
        location=row.location,
        partition_by=row.partition_by or ",".join(row.partition_columns or []) or None,
        properties=props,
        refresh_mode=mode or (row.options or {}).get("refresh_mode"),
        schedule=_schedule(row),
        partitions=_partitions(rt, row, fresh) if row.kind != ObjectKind.EXTERNAL_TABLE else [],
        base_tables=_bases(rt, row, fresh),
    )
    return out
