"""A base table's change between a consumed position and a run's pinned input: its kind
and what an incremental refresh reads of it (:mod:`sparkmv.sources.changes` finds it; the
Delta and Iceberg readers build it).

Plain data, no I/O: every source module may import it.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from sparkmv.sources.pinned import PinnedPartition, PinnedTable

UNCHANGED = "unchanged"
APPEND = "append"
SIGNED = "signed"
NOT_APPEND_ONLY = "not_append_only"
APPLICABLE = (APPEND, SIGNED)
"""Kinds of change an incremental refresh applies."""


@dataclass(frozen=True)
class BaseChange:
    """The change of one base table between a consumed position and the pinned input of a run.

    Attributes:
        table: qualified base table name.
        kind: ``unchanged``, ``append``, ``signed`` or ``not_append_only``.
        reason: for ``not_append_only``: why, naming the base table and the snapshot id or
            file; None otherwise.
        old: the consumed position (readable: its snapshot or files still exist when the
            kind is ``append`` or ``unchanged``).
        delta: for ``append``: the current position restricted to the added files (same
            name, kind, schema, partition columns, location and snapshot id; only the
            partitions holding added files, each with their files' bytes and, for Iceberg,
            rows). None otherwise.
            For ``signed``: a PinnedTable of kind ``signed`` (its rows carry a sign).
        delta_bytes: bytes of the files the delta reads (``append``: the added files;
            ``signed``: added and removed data files, and files with new delete files).
        delta_rows: rows added (Iceberg record counts); None for Parquet.
        compactions: ``replace`` snapshots skipped in the range (Iceberg).
        rows_retracted: ``signed``: rows of the removed data files plus positions deleted
            (before netting: a copy-on-write rewrite retracts every row of the old file and
            adds back the kept ones).
        files_read: data files the delta reads.
        netted_rows: ``signed`` Iceberg changes whose netted rows are in the change cache
            (:mod:`sparkmv.sources.change_cache`): how many (``delta_bytes`` is then the
            entry's size, what the refresh reads); None otherwise.
    """

    table: str
    kind: str
    reason: str | None
    old: PinnedTable
    delta: PinnedTable | None
    delta_bytes: int = 0
    delta_rows: int | None = None
    compactions: int = 0
    rows_retracted: int = 0
    files_read: int = 0
    netted_rows: int | None = None


def unchanged(consumed: PinnedTable, compactions: int = 0) -> BaseChange:
    """No change since ``consumed`` (``compactions``: replace snapshots skipped)."""
    return BaseChange(consumed.name, UNCHANGED, None, consumed, None, compactions=compactions)


def not_append_only(consumed: PinnedTable, reason: str) -> BaseChange:
    """A change incremental refresh cannot apply, with the reason."""
    return BaseChange(consumed.name, NOT_APPEND_ONLY, reason, consumed, None)


def appended(
    consumed: PinnedTable, current: PinnedTable, parts: dict[str, PinnedPartition], compactions: int = 0
) -> BaseChange:
    """An append: the delta is ``current`` restricted to the partitions ``parts`` (added files)."""
    rows = [p.rows for p in parts.values()]
    return BaseChange(
        current.name,
        APPEND,
        None,
        consumed,
        dataclasses.replace(current, partitions=parts, files_from_snapshot=False),
        delta_bytes=sum(p.bytes for p in parts.values()),
        delta_rows=None if any(r is None for r in rows) else sum(r for r in rows if r is not None),
        compactions=compactions,
    )
