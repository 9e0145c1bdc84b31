"""Job kind: incremental refresh of a materialized view (mode INCREMENTAL).

The MV job (:mod:`sparkmv.refresh.jobs.mv`) plans with
:func:`sparkmv.refresh.incremental.decide.decide`; when INCREMENTAL is chosen, its one chunk is
computed and published here:

1. compute: the MV's delta from each base table's appended files
   (:func:`sparkmv.refresh.incremental.delta.delta_terms`); an aggregate MV merges it with its
   current rows of the affected MV partitions (the whole MV when unpartitioned) by group key;
   the result is staged as new data files, with the MV partitions it replaces recorded in the
   chunk's outcome (``{"replace": [...]}``, ``{"replace_all": true}``; a projection only
   appends: ``{"replace": []}``).
2. publish: one Iceberg commit tagged with the run id replaces those partitions with the
   staged files (copy-on-write: the MV never holds delete files) and records the consumed
   snapshot ids in its summary (``sparkmv.consumed``). The consumed positions are the run's
   pinned input, stored with the run's plan; the catalog stores them as the MV's positions in
   the transaction that finishes the run, so a crash between the commit and the catalog
   update is completed by recovery (which finds the tagged commit and does not publish
   again): a delta is never applied twice or skipped.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from sparkmv.analysis.incremental import IvmAnalysis, analyze_incremental
from sparkmv.refresh.context import MvDefinition
from sparkmv.refresh.incremental.decide import IncrementalInput
from sparkmv.refresh.incremental.delta import combine, delta_terms, project_to
from sparkmv.refresh.jobs.base import ChunkOutcome
from sparkmv.refresh.runtime import Runtime
from sparkmv.sources.pinned import PinnedTable
from sparkmv.storage.files import read_files, write_staged
from sparkmv.storage.iceberg import IcebergStore
from sparkmv.storage.partition_values import to_text
from sparkmv.storage.schema import arrow_to_spark, normalize_for_iceberg

CONSUMED_PROPERTY = "sparkmv.consumed"
"""Snapshot summary key: JSON of base table -> consumed Iceberg snapshot id (None: a
Parquet listing, stored with the run)."""


def compute_incremental(
    rt: Runtime,
    mv: MvDefinition,
    pinned: dict[str, PinnedTable],
    inputs: dict[str, IncrementalInput],
    mv_snapshot: int | None,
    directory: Path,
) -> ChunkOutcome:
    """Compute the MV's new rows from the appended files and stage them under ``directory``.

    Returns:
        The staged files, with ``detail`` naming the MV partitions the publish replaces.
    """
    analysis = analyze_incremental(mv.query)
    table = rt.iceberg.load(mv.name)
    target = arrow_to_spark(table.schema().as_arrow())
    old = {t: i.old for t, i in inputs.items()}
    delta = {t: i.delta for t, i in inputs.items() if i.delta is not None}
    with delta_terms(rt, analysis.augmented_sql, pinned, old, delta) as terms:
        if terms is None:
            return ChunkOutcome([], 0, 0, {"replace": []})
        rows = project_to(normalize_for_iceberg(terms), target)
        if analysis.aggregate:
            rows, replace = _merge(rt, mv, analysis, rows, table, mv_snapshot)
            detail: dict[str, Any] = {"replace_all": True} if replace is None else {"replace": replace}
        else:
            detail = {"replace": []}
        rows = _retained(mv, rows)
        staged = write_staged(rows, directory, mv.partition_by)
    return ChunkOutcome(staged.files, staged.rows, staged.bytes, detail)


def _retained(mv: MvDefinition, rows: DataFrame) -> DataFrame:
    """Rows of the partitions ``partition_retention_condition`` keeps (evaluated by Spark)."""
    condition = mv.properties.partition_retention_condition
    if not condition or not mv.partition_by:
        return rows
    return rows.where(F.expr(condition))


def _merge(
    rt: Runtime, mv: MvDefinition, analysis: IvmAnalysis, partial: DataFrame, table: Any, mv_snapshot: int | None
) -> tuple[DataFrame, list[str | None] | None]:
    """The merged rows of the affected MV partitions, and those partitions (None: all)."""
    spark = rt.spark
    partial = partial.cache()  # read twice: the affected partitions, then the merge
    files = IcebergStore.data_files(table, mv_snapshot) if mv_snapshot is not None else []
    affected: list[str | None] | None = None
    if mv.partition_by is not None:
        column = next(f.name for f in partial.schema.fields if f.name.lower() == mv.partition_by.lower())
        values = sorted(
            {to_text(r[0]) for r in partial.select(F.col(f"`{column}`")).distinct().collect()},
            key=lambda v: (v is not None, v or ""),
        )
        affected = list(values)
        wanted = set(values)
        files = [f for f in files if f.partition in wanted]
    current = read_files(spark, [f.path for f in files], partial.schema)
    merged = combine(current.unionByName(partial), analysis, partial.schema)
    return merged, affected


def consumed_summary(pinned: dict[str, PinnedTable]) -> dict[str, str]:
    """The snapshot summary property recording the consumed positions (Iceberg snapshot ids;
    a Parquet listing is stored with the run, here as null)."""
    return {CONSUMED_PROPERTY: json.dumps({t: p.snapshot_id for t, p in sorted(pinned.items())})}


def publish_incremental(
    rt: Runtime,
    run_id: int,
    mv: MvDefinition,
    files: list[str],
    detail: dict[str, Any],
    mv_snapshot: int | None,
    pinned: dict[str, PinnedTable],
) -> int | None:
    """Commit the staged files of the run's chunk, replacing the partitions in ``detail``,
    only if the MV is still at ``mv_snapshot``; returns the new snapshot id.

    Raises:
        StorageError: when the MV changed since the run planned, or the commit fails.
    """
    replace = None if detail.get("replace_all") else list(detail.get("replace", []))
    return rt.iceberg.publish(
        mv.name,
        run_id,
        files,
        replace,
        expected_snapshot_id=mv_snapshot,
        extra_properties=consumed_summary(pinned),
    )
