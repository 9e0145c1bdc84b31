"""Job kind: incremental refresh of a materialized view (mode INCREMENTAL).

The MV job (:mod:`sparkmv.refresh.jobs.mv`) plans with
:func:`sparkmv.refresh.incremental.decide.decide`; when INCREMENTAL is chosen, its one chunk is
computed and published here:

1. compute: the MV's delta from each base table's change log: appended files, or signed rows
   (an Iceberg or Delta table's deletes and updates, a refreshable table's changelog)
   (:func:`sparkmv.refresh.incremental.delta.delta_terms`); an aggregate MV merges it with its
   current rows of the affected MV partitions or files by group key;
   the result is staged as new data files, with the MV partitions it replaces recorded in the
   chunk's outcome (``{"replace": [...]}``, ``{"replace_all": true}``; a projection over
   appends only appends: ``{"replace": []}``; over signed rows it rewrites the affected
   partitions as multisets). An unpartitioned MV with a key reads and rewrites only its
   data files that may hold a touched key (:mod:`sparkmv.refresh.incremental.affected`),
   recorded as ``{"replace_files": [...]}``.
2. publish: one Iceberg commit tagged with the run id replaces those partitions (or files)
   with the staged files (copy-on-write: the MV never holds delete files) and records the consumed
   snapshot ids in its summary (``sparkmv.consumed``). The consumed positions are the run's
   pinned input, stored with the run's plan; the catalog stores them as the MV's positions in
   the transaction that finishes the run, so a crash between the commit and the catalog
   update is completed by recovery (which finds the tagged commit and does not publish
   again): a delta is never applied twice or skipped.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import StructType

from sparkmv.analysis.expectations import WHY_EXPECTATIONS
from sparkmv.analysis.signed import RETRACTED, SIGN
from sparkmv.errors import RefreshError
from sparkmv.refresh.context import MvDefinition, lineage_of
from sparkmv.refresh.expectations import ExpectationCheck
from sparkmv.refresh.incremental.affected import (
    Affected,
    affected_files,
    affected_partitions,
    delta_partitions,
    partition_files,
)
from sparkmv.refresh.incremental.correlated import correlated_terms
from sparkmv.refresh.incremental.decide import IncrementalInput, for_changes, mv_analysis
from sparkmv.refresh.incremental.delta import delta_terms, project_to
from sparkmv.refresh.incremental.keyed import replace_keys, touched_keys
from sparkmv.refresh.incremental.merge_rows import combine, merge_signed_rows, recompute_retracted
from sparkmv.refresh.incremental.reduced_state import ReducedStore
from sparkmv.refresh.incremental.stage_state import StateStore
from sparkmv.refresh.incremental.stages import StagedInputs, staged_inputs
from sparkmv.refresh.jobs.base import ChunkOutcome
from sparkmv.refresh.runtime import Runtime
from sparkmv.sources.pinned import PinnedTable
from sparkmv.storage.files import StagedOutput, file_count, read_files, write_staged
from sparkmv.storage.iceberg import IcebergStore
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
    directory: str,
) -> ChunkOutcome:
    """Compute the MV's new rows from the change of its base tables and stage them under
    ``directory``.

    Returns:
        The staged files, with ``detail`` naming the MV partitions the publish replaces.
    """
    old = {t: i.old for t, i in inputs.items()}
    delta = {t: i.delta for t, i in inputs.items() if i.delta is not None}
    analysis = for_changes(mv_analysis(rt, mv, pinned), list(delta))
    table = rt.iceberg.load(mv.name)
    target = arrow_to_spark(table.schema().as_arrow())
    state = StateStore.of(table.location())
    with staged_inputs(rt, analysis, pinned, old, delta, state) as staged:
        if staged.analysis.keyed is not None:
            return _compute_keyed(rt, mv, staged, (table, target, mv_snapshot), directory)
        # A correlation key's rows reach partitions other than the changed files' own.
        known = None if staged.analysis.correlated is not None else _known_partitions(mv, pinned, inputs, table)
        consumed = {t: i.consumed for t, i in inputs.items()}
        return _compute_delta_rules(rt, mv, staged, (table, target, mv_snapshot), directory, known, consumed)


def _known_partitions(
    mv: MvDefinition, pinned: dict[str, PinnedTable], inputs: dict[str, IncrementalInput], table: Any
) -> list[str] | None:
    """The MV partitions a delta-rule refresh of a partitioned MV rewrites when the appended
    files' partitions name them (:func:`~sparkmv.refresh.incremental.affected.delta_partitions`:
    no Spark job collects them from the delta rows); None otherwise."""
    if mv.partition_by is None:
        return None
    kind = IcebergStore.partition_kind(table) or "string"
    return delta_partitions(lineage_of(mv, pinned), {t: i.delta for t, i in inputs.items()}, kind)


def _compute_delta_rules(
    rt: Runtime,
    mv: MvDefinition,
    staged: StagedInputs,
    mv_table: tuple[Any, StructType, int | None],
    directory: str,
    known: list[str] | None = None,
    consumed: dict[str, int | None] | None = None,
) -> ChunkOutcome:
    """Delta rules (:mod:`sparkmv.refresh.incremental.delta`): the delta terms, merged with
    the MV's rows of the affected partitions (appended, for an append-only projection). With
    ``known`` (the affected partitions, known from the delta's files), the delta rows are
    computed once, inside the write, instead of cached and collected first. ``consumed``:
    base table -> consumed snapshot id (where a correlation key's reduced state is found)."""
    table, target, mv_snapshot = mv_table
    analysis = staged.analysis
    if analysis.correlated is not None:
        reduced = (ReducedStore.of(table.location()), consumed or {})
        context = correlated_terms(rt, analysis, staged.new, staged.old, staged.delta, staged.views, reduced)
    else:
        context = delta_terms(rt, analysis, staged.new, staged.old, staged.delta, staged.views)
    check = ExpectationCheck(mv.name.display, mv.expectations)
    if check and analysis.aggregate:  # the merge adds to stored rows a filter may have dropped
        raise RefreshError(f"'{mv.name.display}': {WHY_EXPECTATIONS}")
    with context as terms:
        if terms.union is None:
            return ChunkOutcome([], 0, 0, {"replace": []})
        # A filter is linear: the delta of the filtered query is the filtered delta.
        rows = check.apply(project_to(normalize_for_iceberg(terms.union), target, (SIGN, RETRACTED)))
        if not analysis.aggregate and not terms.signed:  # an append-only projection only appends
            staged_files = write_staged(_retained(mv, rows), directory, mv.partition_by)
            detail = {"replace": [], **check.detail()}
            return ChunkOutcome(staged_files.files, staged_files.rows, staged_files.bytes, detail)
        if known is None:
            rows = rows.cache()  # read twice: the affected partitions, then the merge
        try:
            affected = _affected(mv, rows, table, mv_snapshot, analysis.key_columns, known)
            current = read_files(rt.spark, affected.files, target)
            if analysis.aggregate:
                merged = combine(current.unionByName(rows, allowMissingColumns=True), analysis, target)
                if RETRACTED in merged.columns:
                    fresh = project_to(normalize_for_iceberg(terms.over_new()), target)
                    merged = recompute_retracted(merged, fresh, analysis)
            else:
                merged = merge_signed_rows(current, rows, target)
            written = _write(mv, merged, directory, table, affected)
        finally:
            rows.unpersist()
    return ChunkOutcome(written.files, written.rows, written.bytes, {**affected.detail, **check.detail()})


def _compute_keyed(
    rt: Runtime,
    mv: MvDefinition,
    staged: StagedInputs,
    mv_table: tuple[Any, StructType, int | None],
    directory: str,
) -> ChunkOutcome:
    """Affected-key recomputation (:mod:`sparkmv.refresh.incremental.keyed`): the MV
    partitions holding a touched key are rewritten with those keys' rows recomputed."""
    table, target, mv_snapshot = mv_table
    analysis = staged.analysis
    assert analysis.keyed is not None
    with touched_keys(rt, analysis, target, staged.new, staged.old, staged.delta, staged.views) as terms:
        if terms.union is None:
            return ChunkOutcome([], 0, 0, {"replace": []})
        keys = terms.union.cache()
        try:
            affected = _affected(mv, keys, table, mv_snapshot, analysis.keyed.keys)
            current = read_files(rt.spark, affected.files, target)
            check = ExpectationCheck(mv.name.display, mv.expectations)
            fresh = project_to(normalize_for_iceberg(terms.over_new()), target)
            merged = replace_keys(current, fresh, keys, analysis.keyed.keys, check.apply)
            if merged is None:  # no row of the change reached a group
                return ChunkOutcome([], 0, 0, {"replace": []})
            written = _write(mv, merged, directory, table, affected)
        finally:
            keys.unpersist()
    return ChunkOutcome(written.files, written.rows, written.bytes, {**affected.detail, **check.detail()})


def _retained(mv: MvDefinition, rows: DataFrame) -> DataFrame:
    """Rows of the partitions ``partition_retention_condition`` keeps (evaluated by Spark)."""
    condition = mv.properties.partition_retention_condition
    if not condition or not mv.partition_by:
        return rows
    return rows.where(F.expr(condition))


def _affected(
    mv: MvDefinition,
    rows: DataFrame,
    table: Any,
    mv_snapshot: int | None,
    keys: Sequence[str],
    known: list[str] | None = None,
) -> Affected:
    """The MV's data files the delta ``rows`` (or touched keys) may change: of the affected
    partitions of a partitioned MV (``known``, or collected from ``rows``), else those that
    may hold a touched key (:mod:`sparkmv.refresh.incremental.affected`)."""
    if mv.partition_by is None:
        return affected_files(table, mv_snapshot, rows, keys)
    if known is not None:
        paths, size = partition_files(table, mv_snapshot, known)
        return Affected(paths, size, {"replace": known})
    files, replace, size = affected_partitions(mv.partition_by, rows, table, mv_snapshot)
    return Affected(files, size, {"replace": replace})


def _write(mv: MvDefinition, merged: DataFrame, directory: str, table: Any, affected: Affected) -> StagedOutput:
    """Stage the merged rows of the affected files, clustered by the MV's key (its sort
    order) into about as many files of :data:`~sparkmv.storage.files.TARGET_FILE_BYTES`
    as the files they replace hold."""
    cluster_by = IcebergStore.sort_columns(table)
    files = file_count(affected.bytes) if mv.partition_by is None else None
    return write_staged(_retained(mv, merged), directory, mv.partition_by, cluster_by=cluster_by, files=files)


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
        replace_files=list(detail.get("replace_files", [])),
    )
