"""The signed change of an Iceberg base table between two snapshots (DESIGN.md, "change
log"): what an ``overwrite`` / ``delete`` (copy-on-write or with position delete files) did,
as signed rows (+1 inserted, -1 retracted), for incremental refresh.

The change is the difference of the scan plans of the consumed and the pinned snapshot
(their data files with the delete files applying to each):

* a data file only in the new plan: + its rows (read with its delete files applied);
* a data file only in the old plan (a copy-on-write rewrite or a dropped file): - its rows
  as they were at the consumed snapshot (read with the delete files that applied then);
* a data file in both whose delete files differ (position deletes or deletion vectors
  written merge-on-read): - the rows at the positions deleted since, + the rows at the
  positions no longer deleted (a rewrite of delete files deletes the same positions).

A compaction (``replace``) in the range shows up as - old file, + new file with the same
rows; the reader nets the signed rows per distinct row, so it cancels (and a copy-on-write
rewrite of a file keeps only the rows really deleted or inserted). Equality delete files
cannot be read (pyiceberg 0.12 does not apply them): the change gets a reason instead.

The change is stored as a :class:`~sparkmv.sources.pinned.PinnedTable` of kind ``signed``
(JSON-able, in the run's plan) whose partitions are the roles of :data:`ROLES`; files read
through pyiceberg (with delete files) are planned again at read time from the two
snapshot ids (``snapshot_id`` and ``since_snapshot_id``).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from pyiceberg.table import FileScanTask, Table

from sparkmv.sources import change_cache
from sparkmv.sources.pinned import PinnedPartition, PinnedTable
from sparkmv.sources.signed_arrow import SIGN_COLUMN, SignedFile, changed_positions, net_by_partition
from sparkmv.storage.lazy import lazy_module
from sparkmv.storage.warehouse import Location

if TYPE_CHECKING:
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc
else:  # imported where rows are read: a read-only process never loads them
    np = lazy_module("numpy")
    pa = lazy_module("pyarrow")
    pc = lazy_module("pyarrow.compute")


if TYPE_CHECKING:  # pyspark only where a DataFrame is made
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.types import StructType

SIGNED = "signed"
"""PinnedTable kind of a signed Iceberg change."""
ADDED, REMOVED, ADDED_DELETES, REMOVED_DELETES, REPOSITIONED = "+", "-", "+d", "-d", "~p"
ROLES = (ADDED, REMOVED, ADDED_DELETES, REMOVED_DELETES, REPOSITIONED)
"""Partition keys of a ``signed`` PinnedTable: data files added / removed read as plain
Parquet, added / removed read through pyiceberg (they carry delete files), and data files
kept whose delete files changed (their positions deleted since are read)."""
FEED = "feed|"
"""Partition key of a Delta table's ``signed`` change read from its change data feed
(:mod:`sparkmv.sources.delta_cdf`)."""


@dataclass(frozen=True)
class SignedChange:
    """The signed change of one Iceberg table between two snapshots.

    Attributes:
        delta: the change as a PinnedTable of kind ``signed`` (None: no data file changed).
        rows_added: rows of the added data files (record counts, deletes not subtracted).
        rows_retracted: rows of the removed data files plus positions deleted since.
        bytes_read: bytes of the data and delete files the change reads.
        files_read: data files the change reads.
        reason: why the change cannot be read (equality delete files), else None.
    """

    delta: PinnedTable | None
    rows_added: int = 0
    rows_retracted: int = 0
    bytes_read: int = 0
    files_read: int = 0
    reason: str | None = None


def plan(table: Table, snapshot_id: int | None) -> list[FileScanTask]:
    """The scan tasks of ``snapshot_id`` (none for an empty table).

    Raises:
        ValueError: the snapshot has equality delete files (pyiceberg cannot apply them).
    """
    if snapshot_id is None:
        return []
    return list(table.scan(snapshot_id=snapshot_id).plan_files())


def signed_change(consumed: PinnedTable, current: PinnedTable, table: Table) -> SignedChange:
    """The signed change of ``table`` from the consumed position to the pinned one (the
    ancestry between them was checked by the caller)."""
    name = current.name
    try:
        old = {t.file.file_path: t for t in plan(table, consumed.snapshot_id)}
        new = {t.file.file_path: t for t in plan(table, current.snapshot_id)}
    except ValueError as exc:
        if "equality deletes" not in str(exc):
            raise
        return SignedChange(
            None,
            reason=(
                f"base table '{name}' has equality delete files between snapshot {consumed.snapshot_id} and "
                f"{current.snapshot_id}, which sparkmv cannot apply (it applies position deletes only)"
            ),
        )
    roles: dict[str, list[FileScanTask]] = {r: [] for r in ROLES}
    for path, task in new.items():
        if path not in old:
            roles[ADDED_DELETES if task.delete_files else ADDED].append(task)
        elif _deletes(task) != _deletes(old[path]):
            roles[REPOSITIONED].append(task)
    for path, task in old.items():
        if path not in new:
            roles[REMOVED_DELETES if task.delete_files else REMOVED].append(task)
    parts = {r: _partition(tasks, str(current.snapshot_id)) for r, tasks in roles.items() if tasks}
    if not parts:
        return SignedChange(None)
    # Each new delete file once, however many data files it covers (Spark writes one per
    # partition): its record count is the positions it deletes.
    repositioned = sum(
        {
            d.file_path: d.record_count
            for t in roles[REPOSITIONED]
            for d in t.delete_files
            if d.file_path not in _deletes(old[t.file.file_path])
        }.values()
    )
    delta = dataclasses.replace(
        current,
        kind=SIGNED,
        partition_columns=[],
        partitions=parts,
        since_snapshot_id=consumed.snapshot_id,
        files_from_snapshot=False,
    )
    added = roles[ADDED] + roles[ADDED_DELETES]
    removed = roles[REMOVED] + roles[REMOVED_DELETES]
    tasks = [t for group in roles.values() for t in group]
    return SignedChange(
        delta,
        rows_added=sum(t.file.record_count for t in added),
        rows_retracted=sum(t.file.record_count for t in removed) + repositioned,
        bytes_read=sum(t.file.file_size_in_bytes + sum(d.file_size_in_bytes for d in t.delete_files) for t in tasks),
        files_read=len(tasks),
    )


def _deletes(task: FileScanTask) -> frozenset[str]:
    return frozenset(d.file_path for d in task.delete_files)


def _partition(tasks: list[FileScanTask], version: str) -> PinnedPartition:
    return PinnedPartition(
        files=sorted(t.file.file_path for t in tasks),
        version=version,
        bytes=sum(t.file.file_size_in_bytes for t in tasks),
        rows=sum(t.file.record_count for t in tasks),
        delete_files=len({d.file_path for t in tasks for d in t.delete_files}),
    )


# -- reading ---------------------------------------------------------------------------------


def read(
    spark: SparkSession, pinned: PinnedTable, load: Callable[[], Table], cache_root: Location | None = None
) -> DataFrame:
    """The signed rows of an Iceberg table's ``signed`` change (a Delta table's is read by
    :func:`sparkmv.sources.resolve.read_pinned`): the table's columns and :data:`SIGN_COLUMN`,
    netted per distinct row (a row both removed and added, as in a copy-on-write rewrite
    or a compaction, is not in the result).

    Args:
        load: loads the Iceberg table (called only when files with delete files are read).
        cache_root: the warehouse whose :mod:`~sparkmv.sources.change_cache` holds the
            netted rows of Iceberg changes: read from there when stored, else netted and
            stored (then the netting runs now, not when the DataFrame is used). None:
            netted on every read.
    """
    from pyspark.sql import functions as F

    from sparkmv.storage.files import read_files
    from sparkmv.storage.schema import schema_from_json

    schema = schema_from_json(pinned.schema_json)
    parts = pinned.partitions
    if cache_root is not None:
        cached = change_cache.load(cache_root, pinned)
        if cached is not None:
            return _from_arrow(spark, cached, schema)
    table: Table | None = None
    if in_arrow_on_the_driver(parts):
        table = load()
        in_arrow = _netted_in_arrow(pinned, table, [f.name for f in schema.fields])
        if in_arrow is not None:
            if cache_root is not None:
                change_cache.store(cache_root, pinned, in_arrow)
            return _from_arrow(spark, in_arrow, schema)
    frames = []
    for role, sign in ((ADDED, 1), (REMOVED, -1)):
        if role in parts:
            frames.append(read_files(spark, parts[role].files, schema).withColumn(SIGN_COLUMN, F.lit(sign)))
    if any(r in parts for r in (ADDED_DELETES, REMOVED_DELETES, REPOSITIONED)):
        frames.extend(_merge_on_read_rows(spark, pinned, table or load(), schema))
    if not frames:
        return spark.createDataFrame([], schema).withColumn(SIGN_COLUMN, F.lit(1))
    rows = frames[0]
    for frame in frames[1:]:
        rows = rows.unionByName(frame)
    net = netted(rows, [f.name for f in schema.fields]) if len(frames) > 1 else rows
    return _stored(spark, net, pinned, schema, cache_root) if cache_root is not None else net


def _merge_on_read_rows(spark: SparkSession, pinned: PinnedTable, table: Table, schema: StructType) -> list[DataFrame]:
    """The signed rows of the roles that carry delete files, as Spark scans of their data
    files (:mod:`sparkmv.storage.position_deletes`): files added or removed read with the
    deletes applying to them then, and the rows of kept files at the positions deleted
    since (-1) or no longer deleted (+1). Only the deleted positions are read on the driver."""
    from pyspark.sql import functions as F

    from sparkmv.storage import position_deletes

    parts = pinned.partitions
    new = {t.file.file_path: t for t in plan(table, pinned.snapshot_id)}
    old = {t.file.file_path: t for t in plan(table, pinned.since_snapshot_id)}
    frames: list[DataFrame] = []
    for role, sign, tasks in ((ADDED_DELETES, 1, new), (REMOVED_DELETES, -1, old)):
        if role in parts:
            files = parts[role].files
            deleted = position_deletes.deleted_positions(table.io, [tasks[f] for f in files])
            rows = position_deletes.read_applying(spark, files, schema, deleted)
            frames.append(rows.withColumn(SIGN_COLUMN, F.lit(sign)))
    if REPOSITIONED in parts:
        files = parts[REPOSITIONED].files
        before = position_deletes.deleted_positions(table.io, [old[f] for f in files])
        after = position_deletes.deleted_positions(table.io, [new[f] for f in files])
        changed = changed_positions(before, after)
        if changed.num_rows:
            frames.append(position_deletes.read_at(spark, files, schema, changed))
    return frames


def _stored(
    spark: SparkSession, net: DataFrame, pinned: PinnedTable, schema: StructType, cache_root: Location
) -> DataFrame:
    """The netted rows ``net`` computed now and stored in the change cache, as a local
    relation; the lazy ``net`` itself when it has more rows than the cache keeps."""
    rows = net.limit(change_cache.MAX_ROWS + 1).toArrow()
    if not change_cache.store(cache_root, pinned, rows):
        return net
    return _from_arrow(spark, rows, schema)


ARROW_NETTING_BYTES = 64 * 1024 * 1024
"""A signed Iceberg change whose files total at most this many bytes is read and netted in
Arrow on the driver (no Spark shuffle; Spark then sees the few netted rows as a local
relation, with exact statistics for its join planning); a larger one is netted by Spark."""
ARROW_REPOSITIONED_BYTES = 1024 * 1024 * 1024
"""Kept data files with newly deleted positions (merge-on-read deletes) up to this many bytes
in all are read on the driver too, whatever :data:`ARROW_NETTING_BYTES` says: only their rows
at the changed positions stay in memory (a file at a time per thread), and the Spark scan
with row positions joined to the deleted ones cost 2-5.5 s against pyarrow's 0.7 s for
TPC-H SF1 RF2's 5,869 deleted lineitems in 86 files (bench/RESULTS.md, TPC-H, 2026-11-28)."""


def in_arrow_on_the_driver(parts: dict[str, PinnedPartition]) -> bool:
    """True when the change of these roles may be read and netted in Arrow on the driver:
    the files read at changed positions (:data:`REPOSITIONED`) total at most
    :data:`ARROW_REPOSITIONED_BYTES` and no file read whole is over
    :data:`ARROW_NETTING_BYTES` on average in its role (a partition holding such a file
    could not be netted there; :func:`_netted_in_arrow` checks each partition's sum)."""
    whole = [p.bytes / max(1, len(p.files)) for role, p in parts.items() if role != REPOSITIONED and p.files]
    repositioned = parts[REPOSITIONED].bytes if REPOSITIONED in parts else 0
    return max(whole, default=0) <= ARROW_NETTING_BYTES and repositioned <= ARROW_REPOSITIONED_BYTES


def _from_arrow(spark: SparkSession, arrow: pa.Table, schema: StructType) -> DataFrame:
    """Signed rows in Arrow as a DataFrame of ``schema``'s columns and :data:`SIGN_COLUMN`."""
    from pyspark.sql import functions as F

    if not arrow.num_rows:
        return spark.createDataFrame([], schema).withColumn(SIGN_COLUMN, F.lit(1))
    df = spark.createDataFrame(arrow)
    columns = [F.col(f"`{f.name}`").cast(f.dataType).alias(f.name) for f in schema.fields]
    return df.select(*columns, F.col(SIGN_COLUMN).cast("int"))


def _signed_files(
    parts: dict[str, PinnedPartition], new: dict[str, FileScanTask], old: dict[str, FileScanTask]
) -> list[SignedFile]:
    """Each data file of the change's roles, with its sign and how it is read."""
    files = [SignedFile(new[f], 1) for f in parts[ADDED].files] if ADDED in parts else []
    files += [SignedFile(old[f], -1) for f in parts[REMOVED].files] if REMOVED in parts else []
    files += [SignedFile(new[f], 1, True) for f in parts[ADDED_DELETES].files] if ADDED_DELETES in parts else []
    files += [SignedFile(old[f], -1, True) for f in parts[REMOVED_DELETES].files] if REMOVED_DELETES in parts else []
    if REPOSITIONED in parts:
        files += [SignedFile(new[f], 0, before=old[f]) for f in parts[REPOSITIONED].files]
    return files


def _netted_in_arrow(pinned: PinnedTable, table: Table, columns: list[str]) -> pa.Table | None:
    """Every role's signed rows read through pyiceberg and netted per distinct row (as
    :func:`netted`), a partition at a time (:func:`~sparkmv.sources.signed_arrow.net_by_partition`);
    None when a partition's files read whole exceed :data:`ARROW_NETTING_BYTES`, the netted
    rows exceed the change cache's :data:`~sparkmv.sources.change_cache.MAX_ROWS`, Arrow
    cannot group these columns (nested types) or a snapshot of the change was expired since
    (the files are then read by path)."""
    parts = pinned.partitions
    try:
        new = {t.file.file_path: t for t in plan(table, pinned.snapshot_id)}
        old = {t.file.file_path: t for t in plan(table, pinned.since_snapshot_id)}
    except ValueError:  # a snapshot expired since the run planned: Spark reads the files by path
        if any(r in parts for r in (ADDED_DELETES, REMOVED_DELETES, REPOSITIONED)):
            raise
        return None
    files = _signed_files(parts, new, old)
    return net_by_partition(table, files, columns, ARROW_NETTING_BYTES, change_cache.MAX_ROWS)


def netted(rows: DataFrame, columns: list[str]) -> DataFrame:
    """One signed row per unit of each distinct row's net count (+n: n rows of sign +1).

    A copy-on-write rewrite retracts and adds back millions of rows to change a few, and
    grouping every column of them shuffles them whole. So the rows are first grouped by a
    64-bit hash of the row (with each column's NULL flag, so ``(1, NULL)`` and ``(NULL, 1)``
    differ): a bucket whose signs sum to 0 and whose rows agree on a second, independent
    64-bit hash holds one row added back as often as it was retracted, and is dropped; only
    the rows of the other buckets (the few changed) are netted exactly by every column.
    A changed row is lost only if it shares both hashes with another changed row of the
    opposite sign (a 128-bit collision).
    """
    from pyspark.sql import functions as F

    quoted = [F.col(f"`{c}`") for c in columns]
    flagged = [part for c in quoted for part in (c, c.isNull())]
    hashed = rows.select(
        *quoted,
        F.col(SIGN_COLUMN),
        F.xxhash64(*flagged).alias("__smv_h1"),
        F.xxhash64(F.lit("sparkmv"), *flagged).alias("__smv_h2"),
    )
    changed = (
        hashed.groupBy("__smv_h1")
        .agg(F.sum(SIGN_COLUMN).alias("__smv_n"), F.min("__smv_h2").alias("lo"), F.max("__smv_h2").alias("hi"))
        .where((F.col("__smv_n") != 0) | (F.col("lo") != F.col("hi")))
        .select("__smv_h1")
    )
    candidates = hashed.join(changed, "__smv_h1", "left_semi").select(*quoted, F.col(SIGN_COLUMN))
    n = candidates.groupBy(*quoted).agg(F.sum(SIGN_COLUMN).alias("__smv_n")).where(F.col("__smv_n") != 0)
    ones = F.explode(F.array_repeat(F.signum("__smv_n").cast("int"), F.abs("__smv_n").cast("int")))
    return n.select(*quoted, ones.alias(SIGN_COLUMN))
