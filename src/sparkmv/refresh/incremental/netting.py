"""What a signed Iceberg change costs to read, and when AUTO reads it before deciding.

Two kinds of Iceberg delete differ by orders of magnitude here:

* **copy-on-write** (a data file rewritten without the deleted rows; an ``overwrite``): the
  change is every row of the old file retracted and every kept row added back, which only
  netting (:func:`sparkmv.sources.signed.netted`) reduces to the rows really deleted: two
  reads of each rewritten file and a shuffle of all their rows;
* **merge-on-read** (position delete files or deletion vectors; no data file removed): the
  change is exactly the rows at the deleted positions: up to
  :data:`~sparkmv.sources.signed.ARROW_REPOSITIONED_BYTES` of touched files read on the
  driver by pyarrow, each file's rows taken at its positions; beyond, one Spark scan of the
  touched files joined with the positions (:mod:`sparkmv.storage.position_deletes`);
  nothing to net.

Either read is stored once in the change cache (:mod:`sparkmv.sources.change_cache`) and
serves every MV over the table that consumed the same snapshot. A copy-on-write netting is
paid by the MV that finds it worth it alone (at TPC-H SF1 RF2, netting ``lineitem`` a month
at a time on the driver takes 4 s against Q1's 10 s FULL; in Spark it took 38-61 s), or in a
refresh pass by the MVs of the pass that consume it, split among them
(:mod:`sparkmv.refresh.passes`). A merge-on-read read is shared: its cost is split among
the MVs whose consumed position is the change's start (:func:`shared_read_bytes`), as the
first of them pays it and the others find it cached.
"""

from __future__ import annotations

from dataclasses import replace

from sparkmv.refresh import timing
from sparkmv.refresh.pass_context import change_lock, consumers_in_pass
from sparkmv.refresh.runtime import Runtime
from sparkmv.sources import change_cache
from sparkmv.sources.changes import APPEND, SIGNED, BaseChange
from sparkmv.sources.delta_cdf import from_feed
from sparkmv.sources.pinned import PinnedTable
from sparkmv.sources.signed import REMOVED, REMOVED_DELETES, in_arrow_on_the_driver


def iceberg_signed(change: BaseChange) -> bool:
    """True for a signed change of an Iceberg table (Delta's are netted as they are read)."""
    delta = change.delta
    return (
        change.kind == SIGNED
        and delta is not None
        and not from_feed(delta)
        and not any("|" in k for k in delta.partitions)
    )


def read_exactly(change: BaseChange) -> bool:
    """True for a signed Iceberg change that removed no data file (appends, position
    deletes, deletion vectors): its rows are read as they are, without netting, and its
    record counts are the rows it changes."""
    delta = change.delta
    return iceberg_signed(change) and delta is not None and not ({REMOVED, REMOVED_DELETES} & set(delta.partitions))


def consumers(rt: Runtime, change: BaseChange) -> int:
    """How many objects consumed ``change.table`` at the change's start (the snapshot its
    signed rows start from): the refreshes its cached read will serve (at least 1)."""
    delta = change.delta
    if delta is None or delta.since_snapshot_id is None:
        return 1
    with rt.catalog.read() as s:
        count = rt.catalog.positions.count_at(s, change.table, delta.since_snapshot_id)
    return max(1, count)


DRIVER_NETTING_WEIGHT = 0.25
"""What a byte netted in Arrow on the driver, a partition at a time
(:func:`sparkmv.sources.signed_arrow.net_by_partition`), weighs against a byte of a Spark
scan in AUTO's estimates: at TPC-H SF1 (2 cores), netting the copy-on-write rewrite of every
month of ``lineitem`` (2 x 175 MiB) took 4.0 s so, 46.9 s in Spark, while Q1's FULL read of
the 175 MiB took about 10 s (bench/RESULTS.md, "netting a copy-on-write change")."""


def netting_bytes(change: BaseChange) -> int:
    """The Spark-scan bytes netting a copy-on-write ``change`` is worth: its files' bytes,
    times :data:`DRIVER_NETTING_WEIGHT` when it is netted on the driver."""
    delta = change.delta
    if delta is not None and in_arrow_on_the_driver(delta.partitions):
        return int(change.delta_bytes * DRIVER_NETTING_WEIGHT)
    return change.delta_bytes


def shared_read_bytes(rt: Runtime, change: BaseChange) -> int:
    """This MV's share of reading a merge-on-read change not yet cached: its files' bytes
    split among :func:`consumers`; a copy-on-write change's netting cost
    (:func:`netting_bytes`), split among the MVs of the refresh pass that consume it
    (:mod:`sparkmv.refresh.passes`; whole for a refresh alone)."""
    if not read_exactly(change):
        delta = change.delta
        since = delta.since_snapshot_id if delta else None
        return netting_bytes(change) // consumers_in_pass(change.table, since)
    return change.delta_bytes // consumers(rt, change)


def changed_share(change: BaseChange, table: PinnedTable, table_bytes: int) -> float:
    """The bytes of ``table`` (``table_bytes`` in all) the change amounts to: for netted
    rows (change cache), a change read exactly or an append of known rows, its rows' share
    of the table's rows times its bytes; otherwise the bytes of the files it reads."""
    rows = sum(p.rows or 0 for p in table.partitions.values())
    changed = change.netted_rows
    if changed is None and (read_exactly(change) or (change.kind == APPEND and change.delta_rows is not None)):
        # Rows, not file bytes: a new file's fixed overhead (footer, statistics) is most of
        # its bytes on a table of a few hundred rows, and the cap is a share of rows.
        changed = (change.delta_rows or 0) + change.rows_retracted
    if changed is None or not rows:
        return change.delta_bytes
    return changed / rows * table_bytes


def netted(rt: Runtime, change: BaseChange, eager: bool) -> BaseChange:
    """``change`` measured by its netted rows when the change cache holds them; when it
    does not and ``eager``, the change is read (netted if need be) now and stored, so every
    later MV over the same change reads the few rows it is, not the files it touched."""
    delta = change.delta
    if not iceberg_signed(change) or delta is None:
        return change
    found = change_cache.cached_rows(rt.iceberg.warehouse, delta)
    if found is None and eager and rt.has_spark:
        from sparkmv.sources.resolve import read_pinned

        with timing.phase("changes"), change_lock(change_cache.key(delta)):  # the pass's others wait
            found = change_cache.cached_rows(rt.iceberg.warehouse, delta)
            if found is None:
                read_pinned(rt.spark, delta, store=rt.iceberg)  # reads, nets and stores the change
                found = change_cache.cached_rows(rt.iceberg.warehouse, delta)
    if found is None:
        return change
    rows, size = found
    return replace(change, delta_bytes=size, netted_rows=rows)
