"""The netted signed change of an Iceberg base table, computed once and shared by every MV
that reads the same change (DESIGN.md, "change log").

A copy-on-write delete or update rewrites whole data files: the signed change between two
snapshots is then every row of each old file retracted and every kept row added back, and
only netting it per distinct row (:func:`sparkmv.sources.signed_arrow.net_arrow`) leaves the rows
really deleted or inserted. Netting reads the rewritten files twice (old and new), about as
much as recomputing a query over that table. Twenty MVs over ``lineitem`` refreshed after
one such delete would each pay it; instead the first computes the netted rows and stores
them here, and the others read a few kilobytes. As a materialized change log, the way
Materialize and RisingWave share one arrangement of a source among the views reading it.

An entry is one Parquet file ``<warehouse>/_sparkmv_changes/<key>.parquet`` holding the
table's columns and :data:`~sparkmv.sources.signed.SIGN_COLUMN` (int32, +1 / -1), netted.
Its key hashes what determines the change: the table's name, the two snapshot ids, its
schema and the files of each role. A snapshot id is random (63 bits) and never reused by a
table, so an entry is never stale; entries older than :data:`KEEP_SECONDS` are removed when
a new one is written. An entry is written under a temporary name and renamed (atomic on a
local disk; one object on an object store), so a reader never sees half a file; two writers
of one key write the same rows.
"""

from __future__ import annotations

import hashlib
import json
import time
import uuid
from typing import TYPE_CHECKING

from sparkmv.sources.pinned import PinnedTable
from sparkmv.storage import warehouse

if TYPE_CHECKING:
    import pyarrow as pa

DIRECTORY = "_sparkmv_changes"
KEEP_SECONDS = 7 * 24 * 3600
"""Entries older than this (seconds since written) are removed when a new one is written."""
MAX_ROWS = 2_000_000
"""A netted change of more rows than this is not stored: it is no small change, and
collecting it to the driver would cost more than the recomputation it saves."""


def key(change: PinnedTable) -> str:
    """The cache key of a ``signed`` change (hex sha256 of its name, snapshot ids, schema and
    files per role).

    >>> from sparkmv.sources.pinned import PinnedPartition
    >>> c = PinnedTable("t", "signed", "{}", [], {"+": PinnedPartition("+", ["a.parquet"], 10)}, snapshot_id=2)
    >>> key(c) == key(c), key(c) == key(PinnedTable("t", "signed", "{}", [], snapshot_id=3))
    (True, False)
    """
    files = {role: sorted(p.files) for role, p in sorted(change.partitions.items())}
    identity = [change.name, change.since_snapshot_id, change.snapshot_id, change.schema_json, files]
    return hashlib.sha256(json.dumps(identity, sort_keys=True).encode()).hexdigest()


def location(root: warehouse.Location, change: PinnedTable) -> str:
    """Where the entry of ``change`` is (or would be) stored under the warehouse ``root``."""
    return warehouse.join(root, DIRECTORY, f"{key(change)}.parquet")


def cached_rows(root: warehouse.Location, change: PinnedTable) -> tuple[int, int] | None:
    """``(rows, bytes)`` of the stored entry of ``change``; None when there is none."""
    where = location(root, change)
    if not warehouse.is_file(where):
        return None
    return int(warehouse.parquet_metadata(where).num_rows), warehouse.stat(where).size


def load(root: warehouse.Location, change: PinnedTable) -> pa.Table | None:
    """The stored netted rows of ``change``; None when there is no entry (or it vanished)."""
    where = location(root, change)
    try:
        return warehouse.read_parquet(where)
    except (FileNotFoundError, OSError):
        return None


def store(root: warehouse.Location, change: PinnedTable, rows: pa.Table) -> bool:
    """Store the netted ``rows`` of ``change`` (False, storing nothing, when they are more
    than :data:`MAX_ROWS`); removes entries older than :data:`KEEP_SECONDS`.

    Raises:
        OSError: the warehouse cannot be written.
    """
    if rows.num_rows > MAX_ROWS:
        return False
    target = location(root, change)
    temporary = f"{target}.{uuid.uuid4().hex}.tmp"
    warehouse.make_dirs(warehouse.parent(target))
    warehouse.write_parquet(rows, temporary)
    warehouse.rename(temporary, target)
    _expire(warehouse.join(root, DIRECTORY))
    return True


def _expire(directory: str) -> None:
    """Remove entries (and temporary files left by a crash) written over KEEP_SECONDS ago."""
    horizon = (time.time() - KEEP_SECONDS) * 1e9
    for info in warehouse.list_files(directory):
        if info.mtime_ns < horizon:
            try:
                warehouse.remove_file(info.path)
            except FileNotFoundError:  # another writer expired it first
                pass
