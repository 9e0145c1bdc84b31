"""Refreshable tables as base tables: pinned with the reload run they hold and the
position of their changelog; their change since a consumed position is the changelog rows
of the later reload runs, each signed (+1: insert ``I`` and update-after ``U``; -1:
update-before ``UB`` and delete ``D``, both carrying the old row), as RisingWave's
``UpdateInsert``/``UpdateDelete``/``Delete``.

A reload commits the table, then its changelog (two commits, each tagged with the run id).
Pinning reads the changelog's snapshot *before* the table's: every reload run after the
pinned one then commits its changelog after the pinned changelog snapshot, so the delta of
runs ``(consumed, current]`` is exactly the changelog rows of those runs appended after
the consumed changelog snapshot — never one missed, never one twice.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

from pyiceberg.table import Table

from sparkmv.names import ObjectName, changelog_name
from sparkmv.sources import iceberg
from sparkmv.sources.pinned import UNPARTITIONED, PinnedPartition, PinnedTable
from sparkmv.storage.iceberg import RUN_ID_PROPERTY, DataFile, IcebergStore

if TYPE_CHECKING:  # pyspark only where a DataFrame is made
    from pyspark.sql import DataFrame, SparkSession

SIGN_COLUMN = "__smv_sign"
"""The column of a changelog delta holding each row's sign (+1 or -1)."""


def pin(name: ObjectName, store: IcebergStore) -> PinnedTable:
    """Pin refreshable table ``name``: its current snapshot (kind ``refreshable``), the
    reload run that snapshot holds, and its changelog's snapshot (read first)."""
    log = store.load(changelog_name(name)).current_snapshot()
    table = store.load(name)
    pinned = iceberg.pin(name.qualified, table)
    return dataclasses.replace(
        pinned,
        kind="refreshable",
        reload_run_id=_run_of(table, pinned.snapshot_id),
        changelog_snapshot_id=log.snapshot_id if log is not None else None,
    )


def _run_of(table: Table, snapshot_id: int | None) -> int:
    """The reload run id tagged on ``snapshot_id`` (0 for none: never reloaded)."""
    if snapshot_id is None:
        return 0
    snap = table.snapshot_by_id(snapshot_id)
    text = snap.summary.get(RUN_ID_PROPERTY) if snap is not None and snap.summary is not None else None
    return int(text) if text and text.isdigit() else 0


def changelog_delta(consumed: PinnedTable, current: PinnedTable, log: Table) -> tuple[PinnedTable | None, str | None]:
    """The signed changelog rows between ``consumed`` and ``current`` as a PinnedTable of
    kind ``changelog`` (None when no reload ran since), or the reason they cannot be read.

    Args:
        log: the loaded changelog Iceberg table.
    """
    name, done, now = current.name, consumed.reload_run_id, current.reload_run_id
    if done is None or (consumed.changelog_snapshot_id is None and done > 0):
        return None, f"no changelog position of refreshable table '{name}' was stored"
    if now == done:
        return None, None
    if now is None or now < done:
        return None, f"refreshable table '{name}' holds reload run {now}, older than the consumed run {done}"
    runs, files, problem = _appended(log, name, consumed.changelog_snapshot_id, current.changelog_snapshot_id)
    if problem is not None:
        return None, problem
    if now not in runs:
        return None, f"the changelog of reload run {now} of refreshable table '{name}' is not published yet"
    part = PinnedPartition(
        files=sorted(f.path for f in files), version=str(now), bytes=sum(f.size_bytes for f in files)
    )
    delta = dataclasses.replace(
        current,
        kind="changelog",
        partition_columns=[],
        partitions={UNPARTITIONED: dataclasses.replace(part, rows=sum(f.record_count for f in files))},
        row_filter=f"run_id > {done} AND run_id <= {now}",
    )
    return delta, None


def _appended(
    log: Table, name: str, since: int | None, until: int | None
) -> tuple[set[int], list[DataFile], str | None]:
    """Run ids tagged and data files added by the changelog snapshots after ``since`` up
    to ``until``, or why they cannot be read (an expired snapshot, a non-append)."""
    runs: set[int] = set()
    snap = log.snapshot_by_id(until) if until is not None else None
    while snap is not None and snap.snapshot_id != since:
        summary = snap.summary
        if summary is None or summary.operation.value != "append":
            op = summary.operation.value if summary is not None else "unknown"
            return runs, [], f"changelog snapshot {snap.snapshot_id} of refreshable table '{name}' is a {op}"
        run = summary.get(RUN_ID_PROPERTY)
        if run is not None and run.isdigit():
            runs.add(int(run))
        snap = log.snapshot_by_id(snap.parent_snapshot_id) if snap.parent_snapshot_id is not None else None
    if snap is None and since is not None:
        return runs, [], f"the changelog history of refreshable table '{name}' after snapshot {since} was expired"
    if until is None or until == since:
        return runs, [], None
    scan = log.incremental_append_scan(from_snapshot_id_exclusive=since, to_snapshot_id_inclusive=until)
    return runs, IcebergStore.task_files(log, scan.plan_files()), None


def read_changes(spark: SparkSession, pinned: PinnedTable) -> DataFrame:
    """The signed rows of a changelog delta: the table's columns (``_vnode`` as NULL) and
    :data:`SIGN_COLUMN`."""
    from pyspark.sql import functions as F
    from pyspark.sql.types import IntegerType, LongType, StringType, StructField, StructType

    from sparkmv.storage.files import read_files
    from sparkmv.storage.schema import schema_from_json

    table = schema_from_json(pinned.schema_json)
    data = [f for f in table.fields if f.name != "_vnode"]
    schema = StructType(
        [
            StructField("op", StringType()),
            *data,
            StructField("run_id", LongType()),
            StructField("sign", IntegerType()),
        ]
    )
    files = [f for p in pinned.partitions.values() for f in p.files]
    df = read_files(spark, files, schema)
    if pinned.row_filter:
        df = df.where(pinned.row_filter)
    columns = [
        F.col(f"`{f.name}`") if f.name != "_vnode" else F.lit(None).cast(f.dataType).alias(f.name) for f in table.fields
    ]
    return df.select(*columns, F.col("sign").alias(SIGN_COLUMN))
