"""Computing one chunk with Spark: bind the pinned base tables, filter to the chunk's
partitions, write the result to staging.

A *small* chunk (at most :data:`SMALL_CHUNK_BYTES` of base data read, a flat MV schema)
is computed in one Spark task and collected to the driver as Arrow, then written with
pyarrow (:func:`sparkmv.storage.files.write_arrow_staged`): its fixed cost is one Spark
stage instead of a scan stage, a shuffle and a write job with its commit protocol. A small
chunk whose result exceeds :data:`SMALL_CHUNK_ROWS` rows is computed again the normal way.
"""

from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import ArrayType, MapType, StructType
from sqlglot import exp

from sparkmv.analysis.incremental import augmented_query
from sparkmv.analysis.query import bind_tables, filter_partitions, parse_query
from sparkmv.names import ObjectName, is_hidden_column
from sparkmv.refresh.context import MvDefinition
from sparkmv.refresh.expectations import ExpectationCheck
from sparkmv.refresh.incremental.stage_state import StagedFull
from sparkmv.refresh.planner import Chunk
from sparkmv.refresh.runtime import Runtime
from sparkmv.sources.pinned import PinnedTable
from sparkmv.sources.resolve import read_pinned
from sparkmv.storage.files import StagedOutput, file_count, write_arrow_staged, write_staged
from sparkmv.storage.partition_values import kind_of_spark_type
from sparkmv.storage.schema import arrow_to_spark, normalize_for_iceberg, spark_to_arrow

SMALL_CHUNK_BYTES = 32 * 1024 * 1024
"""A chunk reading at most this many bytes of base files (the pinned partitions it reads
of every base table) is computed in one task and collected to the driver."""

SMALL_CHUNK_ROWS = 1_000_000
"""At most this many result rows are collected to the driver; a larger result is
written by Spark (the chunk is computed again)."""


def mv_schema(rt: Runtime, mv: MvDefinition) -> StructType:
    """The Spark schema of the MV's Iceberg table (what a chunk's rows are cast to); loaded
    once per run by the job."""
    return arrow_to_spark(rt.iceberg.load(mv.name).schema().as_arrow())


def cluster_layout(rt: Runtime, mv: MvDefinition) -> tuple[list[str], int | None]:
    """How the MV's data files are clustered: its sort order's columns (the key,
    :meth:`~sparkmv.storage.iceberg.IcebergStore.sort_columns`) and the bytes of its current
    data files (None without a snapshot), from which a full rewrite sizes its files."""
    table = rt.iceberg.load(mv.name)
    snapshot = table.current_snapshot()
    summary = snapshot.summary if snapshot is not None else None
    size = summary.get("total-files-size") if summary is not None else None
    return rt.iceberg.sort_columns(table), int(size) if size else None


def chunk_dataframe(
    rt: Runtime,
    mv: MvDefinition,
    pinned: dict[str, PinnedTable],
    chunk: Chunk,
    restrict: dict[str, set[str]],
    tag: str,
    target: StructType | None = None,
    one_task: bool = False,
    staged: StagedFull | None = None,
) -> DataFrame:
    """The rows of ``chunk``: the defining query over the pinned files, reading only the
    base partitions in ``restrict`` for reference tables, filtered to the chunk's MV
    partitions (compared as typed values of the MV's partition column), with columns cast
    to the MV table's schema ``target`` (default: loaded from the table).

    A chunk with ``outside`` (the rest chunk) keeps every row whose partition value is
    none of ``outside``: the partitions that exist only through non-reference inputs.

    ``one_task`` reads every base table as one partition, so the whole query runs in one
    task without a shuffle (a single partition satisfies every distribution Spark needs);
    for small inputs only. ``staged``: the query above the MV's inner stages over their kept
    states (:func:`~sparkmv.refresh.incremental.stage_state.full_over_states`), run instead
    of the query as written."""
    spark = rt.spark
    views: dict[ObjectName, str] = {}
    frames = {t: read_pinned(spark, p, restrict.get(t)) for t, p in sorted(pinned.items())}
    frames.update(staged.frames(rt) if staged is not None else {})
    for i, (table, frame) in enumerate(frames.items()):
        view = f"__smv_{tag}_{i}"
        (frame.coalesce(1) if one_task else frame).createOrReplaceTempView(view)
        views[ObjectName.parse(table, allow_reserved=True)] = view
    target = target or mv_schema(rt, mv)
    query = parse_query(staged.query) if staged is not None else stored_query(mv, [f.name for f in target.fields])
    sql = bind_tables(query, views)
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
    if _flat(target):
        # One statement: a cast per column through the DataFrame API costs several
        # Py4J calls each (the same Cast expression either way).
        return spark.sql(f"SELECT {cast_list(target)} FROM ({sql}) AS __smv_c")
    df = normalize_for_iceberg(spark.sql(sql))
    by_name = {f.name.lower(): f.name for f in df.schema.fields}
    return df.select(*[F.col(f"`{by_name[f.name.lower()]}`").cast(f.dataType).alias(f.name) for f in target.fields])


def cast_list(schema: StructType) -> str:
    """A SELECT list casting each column of a flat ``schema`` to its type, by name
    (resolved case-insensitively, as Spark does by default).

    >>> from pyspark.sql.types import DecimalType, StringType, StructField
    >>> cast_list(StructType([StructField("a`b", StringType()), StructField("s", DecimalType(38, 4))]))
    'CAST(`a``b` AS string) AS `a``b`, CAST(`s` AS decimal(38,4)) AS `s`'
    """
    return ", ".join(
        f"CAST({_quoted(f.name)} AS {f.dataType.simpleString()}) AS {_quoted(f.name)}" for f in schema.fields
    )


def _quoted(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"


def stored_query(mv: MvDefinition, columns: list[str]) -> exp.Query:
    """The query whose rows the MV's table stores: the defining query, or, when the table
    has hidden state columns (:data:`sparkmv.names.HIDDEN_COLUMN_PREFIX`), the query
    augmented with them (:func:`sparkmv.analysis.incremental.augmented_query`), so a FULL
    or PCT refresh keeps the state an incremental refresh needs. Not to be modified: the
    augmented query is shared between runs of the same definition."""
    if not any(is_hidden_column(c) for c in columns):
        return mv.query
    return augmented_query(mv.query.sql(dialect="spark"))


def input_bytes(pinned: dict[str, PinnedTable], restrict: dict[str, set[str]]) -> int:
    """Bytes of the base files a chunk reads: the partitions in ``restrict`` of the tables
    it names, every partition of the others."""
    return sum(
        part.bytes
        for table, p in pinned.items()
        for key, part in p.partitions.items()
        if table not in restrict or key in restrict[table]
    )


def compute_chunk(
    rt: Runtime,
    mv: MvDefinition,
    pinned: dict[str, PinnedTable],
    chunk: Chunk,
    restrict: dict[str, set[str]],
    directory: str,
    tag: str,
    target: StructType | None = None,
    layout: tuple[list[str], int | None] | None = None,
    staged: StagedFull | None = None,
    check: ExpectationCheck | None = None,
) -> StagedOutput:
    """Compute ``chunk`` and write it under ``directory``; returns the staged files.

    ``target``: the MV table's Spark schema (:func:`mv_schema`; loaded when None). A small
    chunk goes through Arrow (module docstring). ``layout``: :func:`cluster_layout` (loaded
    when None): the files are clustered by the MV's key, an unpartitioned MV cut into files
    of about :data:`~sparkmv.storage.files.TARGET_FILE_BYTES` as its current size suggests.
    ``staged``: as :func:`chunk_dataframe`'s. ``check``: the MV's expectations, applied to
    the rows written (:class:`~sparkmv.refresh.expectations.ExpectationCheck`; the caller
    reads its counts once this returns)."""
    check = check or ExpectationCheck(mv.name.display, ())
    target = target or mv_schema(rt, mv)
    cluster_by, current_bytes = layout or cluster_layout(rt, mv)
    try:
        if input_bytes(pinned, restrict) <= SMALL_CHUNK_BYTES and _flat(target):
            df = chunk_dataframe(rt, mv, pinned, chunk, restrict, tag, target, one_task=True, staged=staged)
            rows = check.apply(df).limit(SMALL_CHUNK_ROWS + 1).toArrow()
            if rows.num_rows > SMALL_CHUNK_ROWS:
                check.discard()  # counted again by the write below
            else:
                column = next(
                    (f.name for f in target.fields if f.name.lower() == (mv.partition_by or "").lower()), None
                )
                return write_arrow_staged(rows, directory, column, spark_to_arrow(target), cluster_by)
        df = check.apply(chunk_dataframe(rt, mv, pinned, chunk, restrict, tag, target, staged=staged))
        single = chunk.partitions is not None and chunk.outside is None and len(chunk.partitions) == 1
        files = file_count(current_bytes) if chunk.partitions is None else None
        return write_staged(df, directory, mv.partition_by, single_partition=single, cluster_by=cluster_by, files=files)
    finally:
        for i in range(len(pinned) + len(staged.states if staged is not None else ())):
            rt.spark.catalog.dropTempView(f"__smv_{tag}_{i}")


def _flat(schema: StructType) -> bool:
    """True when no column is nested (arrays, maps, structs go through Spark's writer,
    which lays nested Parquet types out as the rest of the table's files)."""
    return not any(isinstance(f.dataType, ArrayType | MapType | StructType) for f in schema.fields)
