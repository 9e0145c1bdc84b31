"""The change log of a base table: what changed between the position a materialized view
consumed and the pinned input of a run (DESIGN.md, "change log").

A position is the :class:`~sparkmv.sources.pinned.PinnedTable` of a run. The change is
``unchanged``, ``append`` (only rows were added: the delta is the added files), ``signed``
(rows were added and retracted: the delta is signed rows, :mod:`sparkmv.sources.signed`) or
``not_append_only`` (a change without a readable change log, with the reason naming the base
table and the snapshot or file), which an incremental refresh cannot apply.

- Iceberg: the snapshots after the consumed one, walked from the current snapshot back through
  parent ids. ``append`` snapshots add files; ``replace`` (compaction) carries no logical
  change and is skipped. When every snapshot is one of those and no appended file has delete
  files, the change is ``append``: the added files are pyiceberg's incremental append scan,
  files added by the ``append`` snapshots of the range, never a compaction's output (an
  appended file later compacted away is still listed: its snapshot is live, as the walk
  checked, and its rows are the appended ones). Without delete files in the current
  snapshot, they are read from the data manifests the ``append`` snapshots added only
  (:mod:`sparkmv.storage.iceberg_manifests`: each manifest once per process), never from
  planning every file of the table. An ``overwrite`` / ``delete`` (copy-on-write,
  or position delete files written merge-on-read) makes the change ``signed``: the
  difference of the two snapshots' scan plans. A consumed snapshot that is not an ancestor
  (rollback, branch) or whose history was expired, and equality delete files, give
  ``not_append_only`` with the reason.
- Parquet: per partition, the consumed files must all still be listed with the same size and
  modification time (:attr:`PinnedPartition.file_stats`); the files beyond them, and new
  partitions, are the delta.

Plain Python and pyiceberg (no Spark).
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable

from pyiceberg.table import FileScanTask, Table
from pyiceberg.table.snapshots import Operation, Snapshot

from sparkmv.sources.base_change import (
    APPEND,
    APPLICABLE,
    NOT_APPEND_ONLY,
    SIGNED,
    UNCHANGED,
    BaseChange,
)
from sparkmv.sources.base_change import appended as _append
from sparkmv.sources.base_change import not_append_only as _not_append_only
from sparkmv.sources.base_change import unchanged as _unchanged
from sparkmv.sources.iceberg import group_files
from sparkmv.sources.pinned import LISTED_FORMATS, UNPARTITIONED, PinnedPartition, PinnedTable
from sparkmv.storage import iceberg_manifests
from sparkmv.storage.iceberg import DataFile, IcebergStore

__all__ = [
    "APPEND",
    "APPLICABLE",
    "NOT_APPEND_ONLY",
    "SIGNED",
    "UNCHANGED",
    "BaseChange",
    "base_change",
    "delta_bytes_total",
]


def base_change(consumed: PinnedTable, current: PinnedTable, table: Table | None) -> BaseChange:
    """The change of a base table from ``consumed`` (the position the MV last consumed) to
    ``current`` (the run's pinned input).

    Args:
        consumed: the PinnedTable of the MV's last successful run for this base table.
        current: the PinnedTable this run pinned.
        table: the loaded Iceberg table for kind ``iceberg`` (its metadata must hold
            ``current.snapshot_id``); None for ``parquet``.

    Returns:
        The change; ``not_append_only`` when the schema, partition columns or kind differ, or
        for the per-kind rules of the module docstring.

    Raises:
        ValueError: ``table`` is None for an Iceberg base table (a caller bug).
    """
    reason = _shape_reason(consumed, current)
    if reason is not None:
        return _not_append_only(consumed, reason)
    if current.kind in LISTED_FORMATS:
        return _parquet_change(consumed, current)
    if current.kind == "delta":
        from sparkmv.sources.delta import delta_change
        from sparkmv.sources.delta_cdf import feed_change

        return delta_change(consumed, current, feed_change)
    if table is None:
        raise ValueError(f"base table '{current.name}' is an Iceberg table: its loaded table is needed")
    return _iceberg_change(consumed, current, table)


def delta_bytes_total(changes: Iterable[BaseChange]) -> int:
    """Bytes added over all base tables (what an incremental refresh reads of the deltas).

    >>> old = PinnedTable("t", "parquet", "{}", [])
    >>> delta_bytes_total([BaseChange("t", APPEND, None, old, old, 10), BaseChange("u", UNCHANGED, None, old, None)])
    10
    """
    return sum(c.delta_bytes for c in changes)


def _position(pinned: PinnedTable) -> str:
    if pinned.kind == "iceberg" and pinned.snapshot_id is not None:
        return f"snapshot {pinned.snapshot_id}"
    if pinned.kind == "delta" and pinned.snapshot_id is not None:
        return f"version {pinned.snapshot_id}"
    return "it was consumed"


def _shape_reason(consumed: PinnedTable, current: PinnedTable) -> str | None:
    name = current.name
    if consumed.kind != current.kind:
        return f"base table '{name}' changed from {consumed.kind} to {current.kind} since it was consumed"
    if _parsed(consumed.schema_json) != _parsed(current.schema_json):
        return f"schema of base table '{name}' changed since {_position(consumed)}"
    if [c.lower() for c in consumed.partition_columns] != [c.lower() for c in current.partition_columns]:
        return (
            f"partition columns of base table '{name}' changed since {_position(consumed)}: "
            f"({', '.join(consumed.partition_columns)}) -> ({', '.join(current.partition_columns)})"
        )
    return None


def _parsed(schema_json: str) -> object:
    try:
        return json.loads(schema_json)
    except ValueError:
        return schema_json


# -- Iceberg ---------------------------------------------------------------------------------


def _iceberg_change(consumed: PinnedTable, current: PinnedTable, table: Table) -> BaseChange:
    name, old_id, new_id = current.name, consumed.snapshot_id, current.snapshot_id
    if old_id == new_id:
        return _unchanged(consumed)
    if new_id is None:
        return _not_append_only(consumed, f"base table '{name}' has no snapshot now; snapshot {old_id} was consumed")
    if old_id is not None and table.snapshot_by_id(old_id) is None:
        return _not_append_only(consumed, f"snapshot {old_id} of base table '{name}' was expired")
    compactions, reason, rewrites = _walk(table, name, old_id, new_id)
    if reason is not None:
        return _not_append_only(consumed, reason)
    if rewrites:
        return _signed(consumed, current, table, compactions)
    groups = _appended_groups(consumed, current, table)
    if groups is None:
        return _signed(consumed, current, table, compactions)
    if not groups:
        return _unchanged(consumed, compactions)
    parts: dict[str, PinnedPartition] = {}
    for key, files in sorted(groups.items()):
        now = current.partitions.get(key)
        parts[key] = PinnedPartition(
            files=sorted(f.path for f in files),
            version=now.version if now is not None else str(new_id),
            changed_at=now.changed_at if now is not None else None,
            bytes=sum(f.size_bytes for f in files),
            rows=sum(f.record_count for f in files),
        )
    return _append(consumed, current, parts, compactions)


def _appended_groups(consumed: PinnedTable, current: PinnedTable, table: Table) -> dict[str, list[DataFile]] | None:
    """The data files the ``append`` snapshots after the consumed one added, by partition
    key; None when one of them has delete files (the change is then signed). Without delete
    files in the current snapshot, read from the manifests those snapshots added only
    (:func:`sparkmv.storage.iceberg_manifests.appended_files`); otherwise pyiceberg's
    incremental append scan matches the delete files."""
    old_id, new_id = consumed.snapshot_id, current.snapshot_id
    snap = table.snapshot_by_id(new_id) if new_id is not None else None
    if snap is not None and not iceberg_manifests.has_delete_files(table, snap):
        appends = [
            s
            for s in _chain(table, old_id, snap)
            if s.summary is not None and (s.summary.operation == Operation.APPEND or adds_only(s))
        ]
        entries = iceberg_manifests.appended_files(table, appends)
        tasks = [FileScanTask(e.file) for e in entries]
    else:
        if snap is not None and any(adds_only(s) for s in _chain(table, old_id, snap)):
            return None  # pyiceberg's append scan reads append snapshots only: signed instead
        tasks = list(
            table.incremental_append_scan(
                from_snapshot_id_exclusive=old_id, to_snapshot_id_inclusive=new_id
            ).plan_files()
        )
        if any(task.delete_files for task in tasks):
            return None
    if current.catalog_properties is not None:  # external: keys of transformed partitions
        from sparkmv.sources.external_tables import group_tasks

        return group_tasks(table, tasks, current)
    column = current.partition_columns[0] if current.partition_columns else None
    return group_files(column, IcebergStore.task_files(table, tasks))


def _signed(consumed: PinnedTable, current: PinnedTable, table: Table, compactions: int) -> BaseChange:
    from sparkmv.sources.signed import signed_change

    change = signed_change(consumed, current, table)
    if change.reason is not None:
        return _not_append_only(consumed, change.reason)
    if change.delta is None:
        return _unchanged(consumed, compactions)
    return BaseChange(
        current.name,
        SIGNED,
        None,
        consumed,
        change.delta,
        delta_bytes=change.bytes_read,
        delta_rows=change.rows_added,
        compactions=compactions,
        rows_retracted=change.rows_retracted,
        files_read=change.files_read,
    )


_REMOVALS = (
    "deleted-data-files",
    "deleted-records",
    "removed-delete-files",
    "added-delete-files",
    "added-position-deletes",
    "added-equality-deletes",
    "removed-position-deletes",
    "removed-equality-deletes",
)
"""Snapshot summary counts (Iceberg spec) of anything but added data files."""


def adds_only(snapshot: Snapshot) -> bool:
    """True for an ``overwrite`` snapshot whose summary counts added data files and nothing
    removed or deleted (a commit that replaced nothing: an append in effect, as a
    copy-on-write refresh that only added rows writes it); its files are an append."""
    summary = snapshot.summary
    if summary is None or summary.operation != Operation.OVERWRITE or summary.get("added-data-files") is None:
        return False
    return all(summary.get(key) in (None, "0") for key in _REMOVALS)


def _walk(table: Table, name: str, old_id: int | None, new_id: int) -> tuple[int, str | None, int]:
    """Walk from snapshot ``new_id`` back through parent ids to ``old_id`` (to the root when
    None). Returns the ``replace`` snapshots skipped, the reason when the range has no
    change log (a snapshot in between was expired, ``old_id`` is not an ancestor, or one has
    an unknown operation, the oldest such named), and the ``overwrite`` / ``delete``
    snapshots in the range."""
    snap = table.snapshot_by_id(new_id)
    if snap is None:
        return 0, f"snapshot {new_id} of base table '{name}' was expired", 0
    old = table.snapshot_by_id(old_id) if old_id is not None else None
    chain = []
    while snap.snapshot_id != old_id:
        chain.append(snap)
        parent = snap.parent_snapshot_id
        found = table.snapshot_by_id(parent) if parent is not None else None
        if found is None and (parent is not None or _cut(snap, old)):
            # Java Iceberg leaves the parent id of an expired snapshot dangling; pyiceberg
            # clears it, which leaves a root younger than the consumed position.
            after = f"after snapshot {old_id}" if old_id is not None else f"before snapshot {snap.snapshot_id}"
            return 0, f"the change history of base table '{name}' {after} was expired", 0
        if found is None:
            if old_id is None:
                break
            return (
                0,
                (
                    f"snapshot {old_id} of base table '{name}' is not an ancestor of its snapshot {new_id}"
                    " (a rollback or a branch)"
                ),
                0,
            )
        snap = found
    compactions = rewrites = 0
    for s in reversed(chain):
        operation = s.summary.operation if s.summary is not None else None
        if operation == Operation.REPLACE:
            compactions += 1
        elif adds_only(s):
            continue  # an append in effect
        elif operation in (Operation.OVERWRITE, Operation.DELETE):
            rewrites += 1
        elif operation != Operation.APPEND:
            return 0, f"snapshot {s.snapshot_id} of base table '{name}' has an unknown operation", 0
    return compactions, None, rewrites


def _chain(table: Table, old_id: int | None, snap: Snapshot) -> list[Snapshot]:
    """``snap`` and its ancestors after snapshot ``old_id`` (all of them when None), newest
    first (a range :func:`_walk` found complete)."""
    out: list[Snapshot] = []
    found: Snapshot | None = snap
    while found is not None and found.snapshot_id != old_id:
        out.append(found)
        parent = found.parent_snapshot_id
        found = table.snapshot_by_id(parent) if parent is not None else None
    return out


def _cut(root: Snapshot, consumed: Snapshot | None) -> bool:
    """True when ``root`` (a snapshot without parent) is younger than the consumed snapshot
    (or, for an empty consumed table, than a table's first commit): its parent was expired.
    Sequence numbers order commits (format v2); v1 tables have none, timestamps order them."""
    if consumed is None:
        return root.sequence_number is not None and root.sequence_number > 1
    if root.sequence_number and consumed.sequence_number:
        return root.sequence_number > consumed.sequence_number
    return root.timestamp_ms > consumed.timestamp_ms


# -- Parquet ---------------------------------------------------------------------------------


def _parquet_change(consumed: PinnedTable, current: PinnedTable) -> BaseChange:
    name = current.name
    parts: dict[str, PinnedPartition] = {}
    for key, old in consumed.partitions.items():
        new = current.partitions.get(key)
        if new is None and key != UNPARTITIONED:
            return _not_append_only(consumed, f"partition {key} of base table '{name}' was removed")
        new = new or PinnedPartition([], "", file_stats=[])
        if new.version == old.version:
            continue
        added = _added_files(name, key, old, new)
        if isinstance(added, str):
            return _not_append_only(consumed, added)
        if added:
            parts[key] = _partition_of(new, added)
    for key, new in current.partitions.items():
        if key not in consumed.partitions:
            parts[key] = new
    if not parts:
        return _unchanged(consumed)
    return _append(consumed, current, dict(sorted(parts.items())))


def _added_files(name: str, key: str, old: PinnedPartition, new: PinnedPartition) -> list[tuple[str, list[int]]] | str:
    """The files of ``new`` beyond those of ``old`` with their ``[size, mtime_ns]``, or the
    reason the partition is not append-only."""
    where = f" partition {key}" if key else ""
    for side, p in (("at the consumed position", old), ("now", new)):
        if p.file_stats is None:
            return f"no file listing stored for base table '{name}'{where} {side}"
    assert old.file_stats is not None and new.file_stats is not None
    now = dict(zip(new.files, new.file_stats, strict=True))
    for path, stats in zip(old.files, old.file_stats, strict=True):
        got = now.get(path)
        if got is None or list(got) != list(stats):
            what = "removed" if got is None else "modified"
            return f"file '{os.path.basename(path)}' of base table '{name}'{where} was {what}"
    before = set(old.files)
    return [(f, s) for f, s in zip(new.files, new.file_stats, strict=True) if f not in before]


def _partition_of(now: PinnedPartition, added: list[tuple[str, list[int]]]) -> PinnedPartition:
    return PinnedPartition(
        files=[f for f, _ in added],
        version=now.version,
        changed_at=now.changed_at,
        bytes=sum(s[0] for _, s in added),
        file_stats=[list(s) for _, s in added],
    )
