"""Computing one chunk with Spark: bind the pinned base tables, filter to the chunk's
partitions, write the result to staging."""

from __future__ import annotations

from pathlib import Path

from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from sqlglot import exp

from sparkmv.analysis.incremental import analyze_incremental
from sparkmv.analysis.query import bind_tables, filter_partitions, parse_query
from sparkmv.names import ObjectName, is_hidden_column
from sparkmv.refresh.context import MvDefinition
from sparkmv.refresh.planner import Chunk
from sparkmv.refresh.runtime import Runtime
from sparkmv.sources.pinned import PinnedTable
from sparkmv.sources.resolve import read_pinned
from sparkmv.storage.files import StagedOutput, write_staged
from sparkmv.storage.partition_values import kind_of_spark_type
from sparkmv.storage.schema import arrow_to_spark, normalize_for_iceberg


def chunk_dataframe(
    rt: Runtime,
    mv: MvDefinition,
    pinned: dict[str, PinnedTable],
    chunk: Chunk,
    restrict: dict[str, set[str]],
    tag: str,
) -> DataFrame:
    """The rows of ``chunk``: the defining query over the pinned files, reading only the
    base partitions in ``restrict`` for reference tables, filtered to the chunk's MV
    partitions (compared as typed values of the MV's partition column), with columns cast
    to the MV table's schema.

    A chunk with ``outside`` (the rest chunk) keeps every row whose partition value is
    none of ``outside``: the partitions that exist only through non-reference inputs."""
    spark = rt.spark
    views: dict[ObjectName, str] = {}
    for i, (table, p) in enumerate(sorted(pinned.items())):
        view = f"__smv_{tag}_{i}"
        read_pinned(spark, p, restrict.get(table)).createOrReplaceTempView(view)
        views[ObjectName.parse(table, allow_reserved=True)] = view
    target = arrow_to_spark(rt.iceberg.load(mv.name).schema().as_arrow())
    sql = bind_tables(stored_query(mv, [f.name for f in target.fields]), views)
    if chunk.partitions is not None and mv.partition_by:
        field = next(f for f in target.fields if f.name.lower() == mv.partition_by.lower())
        kind = kind_of_spark_type(field.dataType.simpleString())
        if chunk.outside is not None:
            sql = filter_partitions(sql, mv.partition_by, chunk.outside, kind, exclude=True)
        else:
            sql = filter_partitions(sql, mv.partition_by, chunk.partitions, kind)
    condition = mv.properties.partition_retention_condition
    if condition and mv.partition_by:
        # Retention, evaluated by Spark: rows of partitions the condition drops are never written.
        sql = f"SELECT * FROM ({sql}) AS __smv_r WHERE ({condition})"
    df = normalize_for_iceberg(spark.sql(sql))
    by_name = {f.name.lower(): f.name for f in df.schema.fields}
    return df.select(*[F.col(f"`{by_name[f.name.lower()]}`").cast(f.dataType).alias(f.name) for f in target.fields])


def stored_query(mv: MvDefinition, columns: list[str]) -> exp.Query:
    """The query whose rows the MV's table stores: the defining query, or, when the table
    has hidden state columns (:data:`sparkmv.names.HIDDEN_COLUMN_PREFIX`), the query
    augmented with them (:func:`sparkmv.analysis.incremental.analyze_incremental`), so a FULL
    or PCT refresh keeps the state an incremental refresh needs."""
    if not any(is_hidden_column(c) for c in columns):
        return mv.query
    return parse_query(analyze_incremental(mv.query).augmented_sql)


def compute_chunk(
    rt: Runtime,
    mv: MvDefinition,
    pinned: dict[str, PinnedTable],
    chunk: Chunk,
    restrict: dict[str, set[str]],
    directory: Path,
    tag: str,
) -> StagedOutput:
    """Compute ``chunk`` and write it under ``directory``; returns the staged files."""
    df = chunk_dataframe(rt, mv, pinned, chunk, restrict, tag)
    try:
        single = chunk.partitions is not None and chunk.outside is None and len(chunk.partitions) == 1
        return write_staged(df, directory, mv.partition_by, single_partition=single)
    finally:
        for i in range(len(pinned)):
            rt.spark.catalog.dropTempView(f"__smv_{tag}_{i}")
