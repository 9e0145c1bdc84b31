"""Freshness of a materialized view: which base partitions changed since its last refresh.

The one freshness rule, used by ``sparkmv status`` (:mod:`sparkmv.services.status`), by the
scheduler's on-change trigger and by its staleness metric: pin every base table now and
compare each partition's version with the MV's version map. A base partition that
appeared, disappeared or changed version is *changed*; the MV is fresh when no
non-excluded base partition changed. Staleness is now minus the oldest unconsumed change.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from sparkmv.catalog import Catalog
from sparkmv.names import ObjectName
from sparkmv.refresh.planner import changed_partitions
from sparkmv.storage.iceberg import IcebergStore

if TYPE_CHECKING:  # refresh.context imports pyiceberg's table module, which status need not
    from sparkmv.refresh.context import MvDefinition
    from sparkmv.sources.pinned import PinnedTable


@dataclass(frozen=True)
class Freshness:
    """What changed under one MV since its last refresh.

    Attributes:
        changed: qualified base table -> changed partition paths (excluded tables left out).
        oldest_change: epoch seconds of the oldest unconsumed change (None when fresh).
    """

    changed: dict[str, list[str]] = field(default_factory=dict)
    oldest_change: float | None = None
    read_bound_bytes: int | None = None
    """Asked for with ``mv`` (:func:`freshness`): the bytes of base data a refresh of the
    changes reads at most (:func:`read_bound`); None when not asked for."""

    @property
    def is_fresh(self) -> bool:
        """True when no non-excluded base partition changed."""
        return not any(self.changed.values())

    @property
    def stale_partitions(self) -> int:
        """Number of changed base partitions."""
        return sum(len(v) for v in self.changed.values())

    @property
    def changed_tables(self) -> list[str]:
        """Qualified names of the base tables with a changed partition, sorted."""
        return sorted(t for t, paths in self.changed.items() if paths)

    def staleness_seconds(self, now: float | None = None) -> float:
        """Now (epoch seconds) minus the oldest unconsumed change; 0.0 when fresh."""
        if self.oldest_change is None:
            return 0.0
        return max(0.0, (time.time() if now is None else now) - self.oldest_change)


def freshness(
    catalog: Catalog,
    store: IcebergStore,
    object_id: int,
    base_tables: Iterable[str],
    excluded: Iterable[str] = (),
    mv: MvDefinition | None = None,
) -> Freshness:
    """Pin the base tables (qualified names) of MV ``object_id`` and compare them with its
    version map, leaving out the ``excluded`` tables; with ``mv`` (its definition), also
    bound what a refresh of the changes reads (:attr:`Freshness.read_bound_bytes`).

    A changed partition whose change time is unknown counts as changed now.

    Raises:
        SourceError: when a base table is gone.
    """
    from sparkmv.refresh.context import pin_all

    skip = set(excluded)
    bases = [ObjectName.parse(t, allow_reserved=True) for t in base_tables]
    bases = [b for b in bases if b.qualified not in skip]
    if not bases:
        return Freshness()
    with catalog.read() as s:
        versions = {k: v.version for k, v in catalog.versions.load(s, object_id).items()}
    pinned = pin_all(catalog, store, bases)
    changed: dict[str, list[str]] = {}
    oldest: float | None = None
    for table, p in pinned.items():
        paths = changed_partitions(p, versions)
        if not paths:
            continue
        changed[table] = paths
        for path in paths:
            part = p.partitions.get(path)
            when = part.changed_at if part and part.changed_at else time.time()
            oldest = when if oldest is None else min(oldest, when)
    bound = read_bound(mv, pinned, changed) if mv is not None else None
    return Freshness(changed, oldest, bound)


def read_bound(mv: MvDefinition, pinned: dict[str, PinnedTable], changed: dict[str, list[str]]) -> int:
    """The bytes of base data (Parquet/Iceberg file sizes) that a partition change tracking
    refresh of ``changed`` reads: the changed partitions of the reference tables and every
    other base table whole; every base table whole when a non-reference table changed or the
    lineage does not cover every MV row (then PCT refreshes all partitions, or FULL runs). AUTO
    never picks a technique it estimates dearer than PCT, so this bounds a refresh's read
    without planning it (0 when nothing changed).
    """
    from sparkmv.refresh.context import lineage_of

    if not any(changed.values()):
        return 0
    lineage = lineage_of(mv, pinned)
    partial = lineage.complete and all(t in lineage.mappings for t, paths in changed.items() if paths)
    total = 0
    for table, p in pinned.items():
        if partial and table in lineage.mappings:
            total += sum(p.partitions[path].bytes for path in changed.get(table, []) if path in p.partitions)
        else:
            total += sum(part.bytes for part in p.partitions.values())
    return total
