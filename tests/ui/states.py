"""A catalog holding objects in every display state, written through the catalog stores
(no Spark): a base table over Parquet-named files, MVs fresh, stale, never refreshed,
refreshing, paused, failed (its error holds ``<script>``), inactive, an MV over an MV, and a
refreshable table."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path
from typing import Any

from sparkmv.catalog import ControlCommand, ObjectKind, RunState, Trigger
from sparkmv.catalog.clock import utcnow
from sparkmv.catalog.versions import VersionEntry
from sparkmv.client.client import Client
from sparkmv.names import ObjectName
from sparkmv.sources import parquet

SCRIPT_ERROR = "boom <script>window.__pwned = 1</script> & more"
SCRIPT_PROPERTY = "d <> '<script>window.__pwned = 2</script>'"
DEFINITION = "SELECT d, count(*) AS n FROM events GROUP BY d"
DAYS = ("2024-01-01", "2024-01-02", "2024-01-03")


def _base_files(root: Path) -> Path:
    for day in DAYS:
        part = root / f"d={day}"
        part.mkdir(parents=True)
        (part / "part-0.parquet").write_bytes(b"x" * 10)
    return root


def _mv(client: Client, name: str, **fields: Any) -> int:
    rt = client.runtime
    values: dict[str, Any] = {
        "definition": DEFINITION,
        "partition_by": "d",
        "base_tables": ["default.events"],
        "properties": {"partition_refresh_number": "2"},
    }
    values.update(fields)
    with rt.catalog.transaction() as s:
        return rt.catalog.objects.insert(s, ObjectName.parse(name), ObjectKind.MATERIALIZED_VIEW, **values).id


def _run(client: Client, object_id: int, name: str, state: RunState, **fields: Any) -> int:
    rt = client.runtime
    now = utcnow()
    values: dict[str, Any] = {"started": now - timedelta(seconds=30), "mode": "PCT", "mode_reason": "2 changed"}
    if RunState(state).is_final:
        values["finished"] = now - timedelta(seconds=5)
    values.update(fields)
    with rt.catalog.transaction() as s:
        return rt.catalog.runs.create(s, object_id, f"default.{name}", Trigger.MANUAL, state, **values).run_id


def _consume(client: Client, object_id: int, run_id: int, location: Path, stale_day: str | None = None) -> None:
    """Record the current versions of ``events`` as consumed (one partition older when ``stale_day``)."""
    rt = client.runtime
    pinned = parquet.pin("default.events", str(location), "{}", ["d"])
    entries = [
        VersionEntry("default.events", path, "old" if path == f"d={stale_day}" else version)
        for path, version in pinned.versions().items()
    ]
    with rt.catalog.transaction() as s:
        rt.catalog.versions.apply(s, object_id, run_id, entries, [], replace_all=True)
        rt.catalog.objects.set_fields(s, object_id, last_success_run_id=run_id)


def _running(client: Client, object_id: int, name: str, paused: bool) -> int:
    rt = client.runtime
    run_id = _run(client, object_id, name, RunState.RUNNING, chunks_planned=5, chunks_done=2, rows_written=40)
    with rt.catalog.transaction() as s:
        row = rt.catalog.objects.by_id(s, object_id)
        rt.catalog.objects.begin_refresh(s, row, run_id, "host:1:0", 3600)
        if paused:
            rt.catalog.control.send(s, object_id, run_id, ControlCommand.PAUSE)
    return run_id


def build(home: Path, data: Path, catalog_url: str | None = None) -> Client:
    """The catalog under ``home`` (or at ``catalog_url``; base data under ``data``); returns a
    Client on it."""
    client = Client(home=home, catalog_url=catalog_url, recover=False)
    rt = client.runtime
    location = _base_files(data / "events")
    with rt.catalog.transaction() as s:
        rt.catalog.objects.insert(
            s,
            ObjectName.parse("events"),
            ObjectKind.EXTERNAL_TABLE,
            location=str(location),
            format="parquet",
            schema_json="{}",
            partition_columns=["d"],
        )
    fresh = _mv(client, "mv_fresh")
    _consume(client, fresh, _run(client, fresh, "mv_fresh", RunState.SUCCESS, rows_written=3), location)
    stale = _mv(client, "mv_stale")
    _consume(client, stale, _run(client, stale, "mv_stale", RunState.SUCCESS), location, stale_day=DAYS[1])
    _mv(client, "mv_never")
    _running(client, _mv(client, "mv_refreshing"), "mv_refreshing", paused=False)
    _running(client, _mv(client, "mv_paused"), "mv_paused", paused=True)
    failed = _mv(
        client,
        "mv_failed",
        properties={"partition_refresh_number": "2", "partition_retention_condition": SCRIPT_PROPERTY},
    )
    _consume(client, failed, _run(client, failed, "mv_failed", RunState.SUCCESS), location)
    _run(client, failed, "mv_failed", RunState.FAILED, error=SCRIPT_ERROR)
    _mv(client, "mv_inactive", is_active=False, inactive_reason="base table 'gone' was dropped")
    nested = _mv(client, "mv_nested", base_tables=["default.mv_fresh"], definition="SELECT * FROM mv_fresh")
    _run(client, nested, "mv_nested", RunState.SUCCESS)
    with rt.catalog.transaction() as s:
        table_id = rt.catalog.objects.insert(s, ObjectName.parse("dim"), ObjectKind.REFRESHABLE_TABLE).id
    loaded = _run(client, table_id, "dim", RunState.SUCCESS)
    with rt.catalog.transaction() as s:
        rt.catalog.objects.set_fields(s, table_id, last_success_run_id=loaded)
    return client
