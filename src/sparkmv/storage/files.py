"""Writing staged data files from Spark (or from rows collected to the driver) and reading
committed files back into Spark.

Spark's ``partitionBy(col)`` drops ``col`` from the files, but pyiceberg infers a file's
partition from the column statistics inside it (DESIGN.md, facts), so staged files are
partitioned by a copy of the partition column, ``__smv_part``, and keep the real one.
A small result collected as Arrow is written with pyarrow instead
(:func:`write_arrow_staged`): one file per partition value, the partition column inside.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from sparkmv.storage import footers, warehouse
from sparkmv.storage.warehouse import Location

if TYPE_CHECKING:  # pyspark and pyarrow are imported where data is written: listing files needs neither
    import pyarrow as pa
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.types import StructType

PARTITION_COPY = "__smv_part"

TARGET_FILE_BYTES = 64 * 1024 * 1024
"""Target size of a data file of an MV clustered by its key: an incremental refresh rewrites
whole files, so a file is the unit of write amplification (a few touched keys rewrite one
file of at most about this size), while fewer, larger files keep planning and reading cheap.
The count of files is estimated before writing (:func:`file_count`), so sizes vary around it;
an MV smaller than this is one file."""


def file_count(estimated_bytes: int | None, rows: int | None = None) -> int | None:
    """The number of data files to write for about ``estimated_bytes`` of Parquet data
    (at least 1, at most ``rows`` when given), or None when nothing is known.

    >>> file_count(10), file_count(3 * TARGET_FILE_BYTES + 1), file_count(None)
    (1, 4, None)
    """
    if estimated_bytes is None:
        return None
    count = max(1, -(-estimated_bytes // TARGET_FILE_BYTES))
    return max(1, min(count, rows)) if rows is not None else count


@dataclass(frozen=True)
class StagedOutput:
    """What a chunk wrote to staging.

    Attributes:
        files: the Parquet data files: absolute ``file://`` URIs (URLs on an object store).
        rows: rows in those files (from the Parquet footers).
        bytes: total size in bytes.
    """

    files: list[str]
    rows: int
    bytes: int


def write_staged(
    df: DataFrame,
    directory: Location,
    partition_column: str | None,
    max_files: int = 8,
    single_partition: bool = False,
    cluster_by: Sequence[str] = (),
    files: int | None = None,
) -> StagedOutput:
    """Write ``df`` as Parquet under ``directory`` (a warehouse location, replacing
    anything there).

    With a partition column the rows are hash-partitioned by it (without a fixed count,
    so adaptive execution coalesces small outputs into few tasks: one file per partition
    value and task). ``max_files`` caps the tasks of an unpartitioned write.
    ``single_partition`` (the chunk holds one MV partition) writes one file without the
    extra shuffle: the fixed cost of a small PCT refresh is mostly Spark stages.

    ``cluster_by`` (the MV's key columns) clusters the files by the key, so each holds a
    narrow key range (its column statistics then tell which keys it may hold): rows are
    sorted by the key within each file and, unpartitioned, range-partitioned by it into
    ``files`` files (:func:`file_count`; None: as many as adaptive execution coalesces
    the shuffle into).
    """
    from pyspark.sql import functions as F

    warehouse.remove_tree(directory)
    target = warehouse.spark_path(warehouse.normalize(directory))
    out = df
    writer_df: DataFrame
    keys = [F.col(f"`{c}`") for c in cluster_by]
    if partition_column:
        out = out.withColumn(PARTITION_COPY, F.col(f"`{partition_column}`"))
        if single_partition:
            writer_df = out.coalesce(1)
        else:
            writer_df = out.repartition(F.col(PARTITION_COPY))
        if keys:
            writer_df = writer_df.sortWithinPartitions(F.col(PARTITION_COPY), *keys)
        writer_df.write.mode("overwrite").partitionBy(PARTITION_COPY).parquet(target)
    elif keys:
        if files == 1:
            writer_df = out.coalesce(1)
        else:
            writer_df = out.repartitionByRange(files, *keys) if files else out.repartitionByRange(*keys)
        writer_df.sortWithinPartitions(*keys).write.mode("overwrite").parquet(target)
    else:
        writer_df = out.coalesce(max_files)
        writer_df.write.mode("overwrite").parquet(target)
    return collect_staged(directory)


def write_arrow_staged(
    rows: pa.Table,
    directory: Location,
    partition_column: str | None,
    schema: pa.Schema,
    cluster_by: Sequence[str] = (),
) -> StagedOutput:
    """Write ``rows`` (collected to the driver) as Parquet under ``directory``, replacing
    anything there: one file per value of ``partition_column`` (one file when None), with
    the partition column inside, no file for no rows.

    ``cluster_by`` (the MV's key columns) sorts the rows by the key (NULLs first, as Spark)
    and, unpartitioned, cuts them into :func:`file_count` files of consecutive key ranges
    (the in-memory size taken as the estimate: Parquet is smaller, never larger).

    Columns are cast to ``schema`` first (the MV table's types: timestamps in
    microseconds, ``timestamptz`` in UTC, exact decimals stored as integers where the
    precision allows, as Spark writes them). Each file is written under a temporary name
    and renamed when complete, so a crash never leaves a partial ``.parquet`` file.

    Raises:
        OSError: when a file cannot be written. pyarrow.ArrowInvalid: when a column
            cannot be cast to ``schema`` (e.g. a value out of a decimal's range).
    """
    import pyarrow.compute as pc

    warehouse.remove_tree(directory)
    warehouse.make_dirs(directory)
    table = rows.select(schema.names).cast(schema)
    if cluster_by and table.num_rows:
        by_name = {n.lower(): n for n in schema.names}
        order = [(by_name[c.lower()], "ascending", "at_start") for c in cluster_by]
        table = table.take(pc.sort_indices(table, sort_keys=order))
    parts = _split_by_value(table, partition_column)
    if cluster_by and partition_column is None and parts:
        count = file_count(table.nbytes, table.num_rows) or 1
        step = -(-table.num_rows // count)
        parts = [table.slice(start, step) for start in range(0, table.num_rows, step)]
    written: list[tuple[str, int]] = []
    for i, part in enumerate(parts):
        file_name = f"part-{i:05d}-{uuid.uuid4().hex}.parquet"
        path = warehouse.join(directory, file_name)
        temporary = warehouse.join(directory, "." + file_name + ".tmp")
        warehouse.write_parquet(part, temporary, compression="snappy", store_decimal_as_integer=True)
        warehouse.rename(temporary, path)
        written.append((path, part.num_rows))
    files = [warehouse.file_uri(p) for p, _ in written]  # unencoded, as collect_staged
    return StagedOutput(files, sum(n for _, n in written), sum(warehouse.stat(p).size for p, _ in written))


def _split_by_value(table: pa.Table, column: str | None) -> list[pa.Table]:
    """The non-empty slices of ``table`` with one value of ``column`` each (NULL included),
    or ``table`` whole when ``column`` is None."""
    if table.num_rows == 0:
        return []
    if column is None:
        return [table]
    import pyarrow.compute as pc

    values = table.column(column)
    parts = [table.filter(pc.equal(values, v)) for v in pc.unique(values).drop_null()]
    if values.null_count:
        parts.append(table.filter(pc.is_null(values)))
    return parts


def remove_unreferenced(candidates: Iterable[Location], referenced: Iterable[str]) -> list[str]:
    """Delete each directory of ``candidates`` that holds none of the ``referenced`` files.

    Args:
        candidates: staged attempt directories (warehouse locations).
        referenced: files to keep (paths or URIs): recorded in the progress table, or
            referenced by a live Iceberg snapshot.

    Returns:
        The directories removed (normalized locations).
    """
    keep = {warehouse.parent(f) for f in referenced}
    removed: list[str] = []
    for directory in (warehouse.normalize(c) for c in candidates):
        if any(warehouse.is_within(d, directory) for d in keep):
            continue
        warehouse.remove_tree(directory)
        removed.append(directory)
    return removed


def collect_staged(directory: Location) -> StagedOutput:
    """List the Parquet files under ``directory`` with their row counts and sizes.

    The footers are read in parallel (a round trip each on an object store) and kept for
    the publish of this process (:mod:`sparkmv.storage.footers`)."""
    from pyiceberg.utils.concurrent import ExecutorFactory

    files: list[str] = []
    rows = 0
    size = 0
    found = [f for f in warehouse.list_files(directory) if f.name.endswith(".parquet")]
    found.sort(key=lambda f: f.path.split("/"))  # by components, as pathlib sorts
    metas = ExecutorFactory.get_or_create().map(lambda f: warehouse.parquet_metadata(f.path), found)
    for info, meta in zip(found, metas, strict=True):
        if meta.num_rows == 0:
            continue  # Spark writes an empty file for empty input; Iceberg needs none
        rows += meta.num_rows
        size += info.size
        uri = warehouse.file_uri(info.path)  # unencoded: pyiceberg opens the path as is
        footers.remember(uri, info.size, meta)
        files.append(uri)
    return StagedOutput(files, rows, size)


def read_files(spark: SparkSession, files: list[str], schema: StructType) -> DataFrame:
    """A DataFrame over committed data files, or an empty one with ``schema``."""
    if not files:
        return spark.createDataFrame([], schema)
    return spark.read.schema(schema).parquet(*[warehouse.spark_path(f) for f in files])
