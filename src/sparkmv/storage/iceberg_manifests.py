"""The live files of an Iceberg snapshot read from its manifests, each manifest read once
per process.

Manifest files are immutable: a manifest path names the same entries forever (Iceberg
writes every manifest under a new name; sparkmv keys the cache by path and length, so a
file rewritten in place under an old name is read again). Pinning the next snapshot of a
table therefore reads its manifest list and only the manifests added since a snapshot this
process already read; change detection over a range of ``append`` snapshots reads only the
manifests those snapshots added (:func:`appended_files`). Plain Python over pyiceberg's
Avro readers (no pyarrow, no Spark).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from pyiceberg.io import FileIO
from pyiceberg.manifest import DataFile, DataFileContent, ManifestContent, ManifestEntryStatus, ManifestFile
from pyiceberg.table import Table
from pyiceberg.table.snapshots import Snapshot

MAX_CACHED_ENTRIES = 100_000
"""Entries kept over all cached manifests (each with pyiceberg's data file and its column
statistics, about 1-2 KiB); the least recently used manifests are dropped beyond it (a
snapshot of more files is still read exactly, from its manifests, each time)."""


@dataclass(frozen=True)
class FileEntry:
    """One live file (data or delete file) of a manifest.

    Attributes:
        path: the file's location as the manifest names it.
        content: 0 data, 1 position deletes, 2 equality deletes (Iceberg ``content``).
        partition: the raw partition values (Iceberg's physical forms: days since epoch for
            ``days``, ...), in the order of the fields of spec ``spec_id``.
        spec_id: the partition spec the file was written under.
        record_count: rows; size_bytes: bytes of the file.
        snapshot_id: the snapshot that added the file (None when the manifest omits it).
        added: True when the entry's status is ADDED (False: EXISTING).
        file: pyiceberg's data file of the entry (to build scan tasks from).
    """

    path: str
    content: int
    partition: tuple[Any, ...]
    spec_id: int
    record_count: int
    size_bytes: int
    snapshot_id: int | None
    added: bool
    file: DataFile = field(repr=False, compare=False)


_lock = threading.Lock()
_cache: OrderedDict[tuple[str, int], tuple[FileEntry, ...]] = OrderedDict()
_cached_entries = 0


def clear_cache() -> None:
    """Forget every cached manifest (tests; a long-running process never needs it)."""
    global _cached_entries
    with _lock:
        _cache.clear()
        _cached_entries = 0


def manifest_entries(io: FileIO, manifest: ManifestFile) -> tuple[FileEntry, ...]:
    """The live entries (ADDED and EXISTING) of ``manifest``, read through ``io`` the first
    time this process asks for this manifest path and length, from the cache afterwards."""
    global _cached_entries
    key = (manifest.manifest_path, manifest.manifest_length)
    with _lock:
        found = _cache.get(key)
        if found is not None:
            _cache.move_to_end(key)
            return found
    entries = tuple(
        FileEntry(
            path=e.data_file.file_path,
            content=int(e.data_file.content.value if e.data_file.content is not None else 0),
            partition=tuple(e.data_file.partition[i] for i in range(len(e.data_file.partition))),
            spec_id=int(e.data_file.spec_id if e.data_file.spec_id is not None else manifest.partition_spec_id),
            record_count=int(e.data_file.record_count),
            size_bytes=int(e.data_file.file_size_in_bytes),
            snapshot_id=e.snapshot_id,
            added=e.status == ManifestEntryStatus.ADDED,
            file=e.data_file,
        )
        for e in manifest.fetch_manifest_entry(io, discard_deleted=True)
    )
    with _lock:
        if key not in _cache:
            _cache[key] = entries
            _cached_entries += len(entries)
        while _cached_entries > MAX_CACHED_ENTRIES and len(_cache) > 1:
            _, dropped = _cache.popitem(last=False)
            _cached_entries -= len(dropped)
    return entries


def has_delete_files(table: Table, snapshot: Snapshot) -> bool:
    """True when ``snapshot`` lists any delete manifest (position or equality deletes);
    reads only its manifest list."""
    return any(m.content == ManifestContent.DELETES for m in snapshot.manifests(table.io))


def live_files(table: Table, snapshot: Snapshot) -> list[FileEntry]:
    """Every live data and delete file of ``snapshot`` (what a full scan plans, before
    delete files are matched to data files), reading only manifests not yet cached."""
    return [e for m in snapshot.manifests(table.io) for e in manifest_entries(table.io, m)]


def appended_files(table: Table, appends: Iterable[Snapshot]) -> list[FileEntry]:
    """The data files added by the ``append`` snapshots ``appends`` (pyiceberg's incremental
    append scan without a filter): the entries of status ADDED made by one of them, read
    from the data manifests one of them added, so only manifests added in the range are
    opened."""
    ids = {s.snapshot_id for s in appends}
    manifests = {
        m.manifest_path: m
        for s in appends
        for m in s.manifests(table.io)
        if m.content == ManifestContent.DATA and m.added_snapshot_id in ids
    }
    return [
        e
        for m in manifests.values()
        for e in manifest_entries(table.io, m)
        if e.added and e.snapshot_id in ids and e.content == DataFileContent.DATA.value
    ]


def data_entries(table: Table, snapshot_id: int | None = None) -> list[FileEntry] | None:
    """The live data files of a snapshot (default: current), in manifest order; None when
    the snapshot has delete files (or is unknown), which a caller leaves to pyiceberg's
    planning."""
    snap = table.snapshot_by_id(snapshot_id) if snapshot_id is not None else table.current_snapshot()
    if snap is None or has_delete_files(table, snap):
        return None
    return live_files(table, snap)
