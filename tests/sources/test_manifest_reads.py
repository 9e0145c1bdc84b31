"""Change detection on an Iceberg base reads only the new metadata: the
manifests the snapshots after the consumed one added, each manifest once per process; an
expired consumed snapshot still falls back with its reason. Real pyiceberg (SQL catalog on
SQLite); the table's FileIO is wrapped to record which files are opened."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from pyiceberg.catalog.sql import SqlCatalog
from pyiceberg.io import FileIO, InputFile, OutputFile
from pyiceberg.manifest import ManifestContent
from pyiceberg.table import Table

from sparkmv.errors import RefreshError
from sparkmv.names import ObjectName
from sparkmv.sources import external_tables
from sparkmv.sources.changes import APPEND, NOT_APPEND_ONLY, base_change
from sparkmv.sources.pinned import PinnedTable
from sparkmv.storage import iceberg_manifests
from tests.sources.test_external_catalogs import batch, make_events

NAME = ObjectName.parse("lake.db.events")


class RecordingIO(FileIO):
    """A FileIO that opens files through ``inner`` and records every path it opens."""

    def __init__(self, inner: FileIO) -> None:
        super().__init__(inner.properties)
        self.inner = inner
        self.opened: list[str] = []

    def new_input(self, location: str) -> InputFile:
        self.opened.append(location)
        return self.inner.new_input(location)

    def new_output(self, location: str) -> OutputFile:
        return self.inner.new_output(location)

    def delete(self, location: str | InputFile | OutputFile) -> None:
        self.inner.delete(location)


@pytest.fixture
def events(tmp_path: Path) -> Iterator[Any]:
    iceberg_manifests.clear_cache()
    (tmp_path / "wh").mkdir()
    cat = SqlCatalog("lake", uri=f"sqlite:///{tmp_path}/lake.db", warehouse=(tmp_path / "wh").as_uri())
    yield make_events(cat)
    iceberg_manifests.clear_cache()


def _recording(table: Any) -> tuple[Table, RecordingIO]:
    """``table`` as loaded now, its files opened through a :class:`RecordingIO`."""
    table.refresh()
    io = RecordingIO(table.io)
    return Table(table.name(), table.metadata, table.metadata_location, io, table.catalog), io


def _manifests_added_after(table: Table, snapshot_id: int | None) -> set[str]:
    """The manifest paths of the current snapshot that snapshots after ``snapshot_id`` added."""
    current = table.current_snapshot()
    assert current is not None
    after: set[int] = set()
    snap = current
    while snap is not None and snap.snapshot_id != snapshot_id:
        after.add(snap.snapshot_id)
        snap = table.snapshot_by_id(snap.parent_snapshot_id) if snap.parent_snapshot_id is not None else None
    return {
        m.manifest_path
        for m in current.manifests(table.io)
        if m.content == ManifestContent.DATA and m.added_snapshot_id in after
    }


def _manifests_opened(io: RecordingIO, table: Table) -> set[str]:
    """The manifests (not manifest lists) ``io`` opened."""
    lists = {s.manifest_list for s in table.snapshots()}
    return {p for p in io.opened if p.endswith(".avro") and p not in lists}


def test_change_detection_reads_only_the_manifests_added_since_the_consumed_snapshot(events: Any) -> None:
    consumed = external_tables.pin(NAME, events, {})  # reads the manifests of the consumed snapshot
    events.append(batch([("2024-02-03 18:00:00", "z", 100)]))
    events.append(batch([("2024-03-01 09:00:00", "y", 7), ("2024-01-05 01:00:00", "x", 8)]))
    table, io = _recording(events)
    current = external_tables.pin(NAME, table, {})
    change = base_change(consumed, current, table)
    assert change.kind == APPEND, change.reason
    assert change.delta is not None
    added = _manifests_added_after(table, consumed.snapshot_id)
    assert len(added) == 2
    assert _manifests_opened(io, table) == added
    # each new manifest opened once, though both pinning and change detection read it
    assert sorted(p for p in io.opened if p in added) == sorted(added)
    assert {k: p.rows for k, p in change.delta.partitions.items()} == {
        "ts=2024-01-05 00:00:00": 1,
        "ts=2024-02-03 00:00:00": 1,
        "ts=2024-03-01 00:00:00": 1,
    }
    # the pinned input equals what pyiceberg plans for the snapshot
    planned = {t.file.file_path for t in table.scan().plan_files()}
    assert {f for p in current.partitions.values() for f in p.files} == planned
    assert sum(p.rows or 0 for p in current.partitions.values()) == 8


def test_an_unchanged_table_opens_no_manifest(events: Any) -> None:
    consumed = external_tables.pin(NAME, events, {})
    table, io = _recording(events)
    current = external_tables.pin(NAME, table, {})
    assert current == consumed
    assert base_change(consumed, current, table).kind == "unchanged"
    assert _manifests_opened(io, table) == set()


def test_pinned_versions_from_manifests_equal_iceberg_partition_metadata(events: Any) -> None:
    events.append(batch([("2024-02-03 18:00:00", "z", 100)]))
    pinned = external_tables.pin(NAME, events, {})
    newest = {
        external_tables.partition_path("ts", r["partition"]["ts_part"].isoformat() + " 00:00:00"): str(
            r["last_updated_snapshot_id"]
        )
        for r in events.inspect.partitions().to_pylist()
    }
    assert {k: p.version.split("/")[0] for k, p in pinned.partitions.items()} == newest
    assert (
        pinned.partitions["ts=2024-02-03 00:00:00"].version
        == f"{events.current_snapshot().snapshot_id}/" + str(pinned.partitions["ts=2024-02-03 00:00:00"].bytes) + "/0"
    )


def test_an_expired_consumed_snapshot_still_falls_back_with_its_reason(events: Any) -> None:
    consumed = external_tables.pin(NAME, events, {})
    events.append(batch([("2024-02-03 18:00:00", "z", 100)]))
    assert consumed.snapshot_id is not None
    events.maintenance.expire_snapshots().by_id(consumed.snapshot_id).commit()
    table, _ = _recording(events)
    change = base_change(consumed, external_tables.pin(NAME, table, {}), table)
    assert change.kind == NOT_APPEND_ONLY
    assert change.reason == f"snapshot {consumed.snapshot_id} of base table 'lake.db.events' was expired"
    assert isinstance(change.old, PinnedTable)


def _props(events: Any) -> dict[str, str]:
    """The external catalog's properties as sparkmv registers them."""
    return {"type": "iceberg", "iceberg.catalog.type": "sql", **events.catalog.properties}


def test_the_stored_pinned_input_is_a_snapshot_reference_and_its_files_are_recomputed_exactly(events: Any) -> None:
    events.append(batch([("2024-02-03 18:00:00", "z", 100)]))
    pinned = external_tables.pin(NAME, events, _props(events))
    stored = pinned.to_json()
    assert stored["files_from_snapshot"] is True
    assert all(p["files"] == [] for p in stored["partitions"].values())
    loaded = PinnedTable.from_json(stored)
    assert loaded.versions() == pinned.versions()
    events.append(batch([("2024-02-03 19:00:00", "w", 1)]))  # later commits do not change the pinned files
    keys = set(pinned.partitions)
    assert external_tables.snapshot_files(loaded, keys) == {k: p.files for k, p in pinned.partitions.items()}
    assert len(pinned.partitions["ts=2024-02-03 00:00:00"].files) == 2


def test_a_delta_of_an_iceberg_table_keeps_its_file_lists(events: Any) -> None:
    consumed = external_tables.pin(NAME, events, _props(events))
    events.append(batch([("2024-02-03 18:00:00", "z", 100)]))
    events.refresh()
    change = base_change(consumed, external_tables.pin(NAME, events, _props(events)), events)
    assert change.delta is not None and not change.delta.files_from_snapshot
    stored = PinnedTable.from_json(change.delta.to_json())
    assert [len(p.files) for p in stored.partitions.values()] == [1]


def test_pinned_files_of_an_expired_snapshot_fail_with_the_reason(events: Any) -> None:
    pinned = PinnedTable.from_json(external_tables.pin(NAME, events, _props(events)).to_json())
    events.append(batch([("2024-02-03 18:00:00", "z", 100)]))
    assert pinned.snapshot_id is not None
    events.maintenance.expire_snapshots().by_id(pinned.snapshot_id).commit()
    with pytest.raises(RefreshError) as err:
        external_tables.snapshot_files(pinned, set(pinned.partitions))
    assert str(err.value) == (
        f"snapshot {pinned.snapshot_id} of base table 'lake.db.events' was expired after this run pinned it; "
        "refresh again"
    )
