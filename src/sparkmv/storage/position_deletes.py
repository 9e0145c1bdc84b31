"""Reading Iceberg data files with their position deletes applied, in Spark (merge-on-read).

A position delete (Iceberg spec, "Position Delete Files"; a deletion vector says the same)
names a data file and a row position in it. Spark reads a Parquet file's row positions as
the hidden column ``_metadata.row_index``, so a data file read with its deletes applied is
the file's rows left-anti-joined with the deleted ``(file, position)`` pairs, and the rows a
change deleted are the file's rows joined with those pairs. Both stay Spark plans (column
pruning, parallel reads), where reading through pyiceberg would decode every column of the
files on the driver and hand them to Spark through Arrow.

The deleted positions themselves are small (two columns per deleted row): they are read on
the driver (by the caller, through pyiceberg, which reads Parquet delete files and Puffin
deletion vectors alike) and joined as a broadcast relation.

File paths differ in spelling between Iceberg metadata (``file:///w/a b.parquet``) and
Spark's ``_metadata.file_path`` (``file:/w/a%20b.parquet``). Rather than normalizing the
path of every row (string functions on millions of rows tripled a scan's time at TPC-H
SF1), Spark's spelling of each data file is learned once per process from Spark's listing of
the files (:func:`spark_spellings`), and the few deleted positions carry it.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING
from urllib.parse import unquote

from sparkmv.errors import StorageError
from sparkmv.storage import warehouse

if TYPE_CHECKING:  # pyspark, pyarrow and pyiceberg's reader are imported where data is read
    import pyarrow as pa
    from pyiceberg.io import FileIO
    from pyiceberg.table import FileScanTask
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.types import StructType

FILE_COLUMN = "__smv_file"
POSITION_COLUMN = "__smv_pos"

BROADCAST_POSITIONS = 2_000_000
"""Deleted positions up to this many are broadcast to the join (about 100 bytes each); more
are shuffled with the data files' rows."""


def path_key(path: str) -> str:
    """The spelling of a data file's path both sides of the join agree on: a local file's
    absolute path without its ``file:`` scheme; any other URL as given.

    >>> path_key("file:///w/d/a.parquet"), path_key("file:/w/d/a.parquet"), path_key("/w/d/a.parquet")
    ('/w/d/a.parquet', '/w/d/a.parquet', '/w/d/a.parquet')
    >>> path_key("s3://bucket/a.parquet")
    's3://bucket/a.parquet'
    """
    if path.startswith("file:"):
        return "/" + path[len("file:") :].lstrip("/")
    return path


_SPELLINGS: dict[str, str] = {}
"""Iceberg's spelling of a data file's path -> Spark's (``_metadata.file_path``); a data
file is never rewritten in place, so an entry never goes stale."""

_PREFIXES: dict[str, tuple[str, str] | None] = {}
"""URL scheme -> (prefix of Spark's listed spelling, ``DataFrame.inputFiles``; the prefix
``_metadata.file_path`` has instead), learned once per process and scheme from one file
(:func:`_learn_prefix`); None when the two spellings differ beyond a prefix."""


def spark_spellings(
    spark: SparkSession, files: list[str], schema: StructType, scan: DataFrame | None = None
) -> dict[str, str]:
    """Spark's ``_metadata.file_path`` of each of data ``files`` (Iceberg's spelling ->
    Spark's). The ones not yet known come from Spark's own listing of the files
    (``DataFrame.inputFiles`` of ``scan``, a DataFrame reading them, else of a new read: no
    job), whose spelling differs from ``_metadata.file_path``
    by a prefix per scheme (``file:///w/a%20b.parquet`` against ``file:/w/a%20b.parquet``)
    learned from one file read by a job; files whose listed spelling lacks that prefix are
    read by one job over their footers (no column read). Listing instead of reading every
    file's metadata column: the first merge-on-read scan of TPC-H SF1 ``orders`` after RF2
    took 1.3 s less.

    Raises:
        StorageError: a file's path is not among the ones Spark reports (a spelling that
            :func:`path_key` does not reconcile): the deletes could not be applied.
    """
    missing = [f for f in files if f not in _SPELLINGS]
    if missing:
        if scan is None:
            scan = spark.read.schema(schema).parquet(*[warehouse.spark_path(f) for f in missing])
        listed = scan.inputFiles()
        by_key = {path_key(unquote(s)): s for s in listed}
        unread = []
        for f in missing:
            spelled = _metadata_spelling(spark, schema, f, by_key.get(path_key(f)))
            if spelled is None:
                unread.append(f)
            else:
                _SPELLINGS[f] = spelled
        if unread:
            _read_spellings(spark, unread, schema)
    unmatched = [f for f in files if f not in _SPELLINGS]
    if unmatched:
        raise StorageError(f"cannot match data file {unmatched[0]} to a file Spark read: its deletes cannot be applied")
    return {f: _SPELLINGS[f] for f in files}


def _metadata_spelling(spark: SparkSession, schema: StructType, file: str, listed: str | None) -> str | None:
    """``_metadata.file_path`` of data ``file``, which Spark listed as ``listed``, by its
    scheme's learned prefix; None when not listed or its prefix is not the learned one."""
    if listed is None:
        return None
    scheme = listed.split(":", 1)[0]
    if scheme not in _PREFIXES:
        _learn_prefix(spark, schema, file, listed)
    prefixes = _PREFIXES.get(scheme)
    if prefixes is None or not listed.startswith(prefixes[0]):
        return None
    return prefixes[1] + listed[len(prefixes[0]) :]


def _learn_prefix(spark: SparkSession, schema: StructType, file: str, listed: str) -> None:
    """Learn the prefixes of ``listed``'s scheme from data ``file``, which Spark listed as
    ``listed``: its ``_metadata.file_path`` read by a job; learned only when both spellings
    have the same host and path (then the prefixes are what precedes the path), else the
    scheme's files are read by a job.

    >>> from urllib.parse import urlsplit
    >>> [urlsplit(u).path for u in ("file:///w/a%20b.parquet", "file:/w/a%20b.parquet")]
    ['/w/a%20b.parquet', '/w/a%20b.parquet']
    """
    from urllib.parse import urlsplit

    from pyspark.sql import functions as F

    read = spark.read.schema(schema).parquet(warehouse.spark_path(file))
    rows = read.select(F.col("_metadata.file_path")).limit(1).collect()
    if not rows:
        return  # an empty file has no row to carry its spelling: learned from another one
    spelled = str(rows[0][0])
    a, b = urlsplit(listed), urlsplit(spelled)
    if (a.scheme, a.netloc, a.path, a.query, a.fragment) != (b.scheme, b.netloc, b.path, "", "") or not a.path:
        _PREFIXES[a.scheme] = None  # the scheme's files are read by a job
        return
    _PREFIXES[a.scheme] = (listed[: -len(a.path)], spelled[: -len(b.path)])


def _read_spellings(spark: SparkSession, files: list[str], schema: StructType) -> None:
    """Spark's spelling of ``files`` read by one job over their footers."""
    from pyspark.sql import functions as F

    rows = spark.read.schema(schema).parquet(*[warehouse.spark_path(f) for f in files])
    seen = {r[0] for r in rows.select(F.col("_metadata.file_path")).distinct().collect()}
    by_key = {path_key(unquote(s)): s for s in seen}
    for f in files:
        found = by_key.get(path_key(f))
        if found is not None:
            _SPELLINGS[f] = found


def with_positions(spark: SparkSession, files: list[str], schema: StructType) -> DataFrame:
    """The rows of data ``files`` as written (no deletes applied): ``schema``'s columns,
    then :data:`FILE_COLUMN` (string, Spark's spelling of the file's path:
    :func:`spark_spellings`) and :data:`POSITION_COLUMN` (long, the row's position in its
    file, from 0)."""
    from pyspark.sql import functions as F

    rows = spark.read.schema(schema).parquet(*[warehouse.spark_path(f) for f in files])
    return rows.select(
        *[F.col(f"`{f.name}`") for f in schema.fields],
        F.col("_metadata.file_path").alias(FILE_COLUMN),
        F.col("_metadata.row_index").alias(POSITION_COLUMN),
    )


def positions_frame(spark: SparkSession, positions: pa.Table, spellings: dict[str, str]) -> DataFrame:
    """Deleted positions (Arrow: ``file_path`` string as Iceberg spells it, ``pos`` int64,
    and any further columns, such as a sign) as a DataFrame keyed by :data:`FILE_COLUMN`
    (Spark's spelling, from ``spellings``) and :data:`POSITION_COLUMN`, hinted for
    broadcast when small."""
    import pyarrow as pa
    from pyspark.sql import functions as F

    keys = pa.array([spellings[p] for p in positions.column("file_path").to_pylist()], pa.string())
    table = positions.drop_columns(["file_path", "pos"])
    table = table.append_column(FILE_COLUMN, keys).append_column(POSITION_COLUMN, positions.column("pos"))
    frame = spark.createDataFrame(table)
    return F.broadcast(frame) if positions.num_rows <= BROADCAST_POSITIONS else frame


def read_applying(spark: SparkSession, files: list[str], schema: StructType, deleted: pa.Table) -> DataFrame:
    """The rows of data ``files`` with the positions ``deleted`` (``file_path``, ``pos``)
    removed, in ``schema``'s columns: a merge-on-read scan."""
    if not files:
        return spark.createDataFrame([], schema)
    if not deleted.num_rows:
        return spark.read.schema(schema).parquet(*[warehouse.spark_path(f) for f in files])
    rows = with_positions(spark, files, schema)
    pairs = positions_frame(spark, deleted.select(["file_path", "pos"]), spark_spellings(spark, files, schema, rows))
    kept = rows.join(pairs, [FILE_COLUMN, POSITION_COLUMN], "left_anti")
    return kept.drop(FILE_COLUMN, POSITION_COLUMN)


def read_at(spark: SparkSession, files: list[str], schema: StructType, positions: pa.Table) -> DataFrame:
    """The rows of data ``files`` at ``positions`` (``file_path``, ``pos`` and further
    columns, e.g. a sign), as written: ``schema``'s columns and the further columns."""
    if not files or not positions.num_rows:
        extra = [c for c in positions.column_names if c not in ("file_path", "pos")]
        from pyspark.sql import functions as F

        empty = spark.createDataFrame([], schema)
        return empty.select("*", *[F.lit(None).cast("int").alias(c) for c in extra])
    rows = with_positions(spark, files, schema)
    pairs = positions_frame(spark, positions, spark_spellings(spark, files, schema, rows))
    return rows.join(pairs, [FILE_COLUMN, POSITION_COLUMN], "inner").drop(FILE_COLUMN, POSITION_COLUMN)


def deleted_positions(io: FileIO, tasks: Iterable[FileScanTask]) -> pa.Table:
    """The positions deleted from the data files of planned scan ``tasks`` by their delete
    files (Parquet position deletes or deletion vectors, read through pyiceberg; each delete
    file read once however many data files it covers): ``file_path`` (string, as Iceberg
    spells the data file), ``pos`` (int64), sorted, without duplicates.

    Raises:
        ValueError: a task has an equality delete file (pyiceberg reads position deletes only).
    """
    import pyarrow as pa
    import pyarrow.compute as pc
    from pyiceberg.io.pyarrow import _read_deletes
    from pyiceberg.manifest import DataFileContent

    read: dict[str, dict[str, pa.ChunkedArray]] = {}
    paths: list[str] = []
    chunks: list[pa.Array] = []
    for task in tasks:
        found: list[pa.Array] = []
        for delete in task.delete_files:
            if delete.content == DataFileContent.EQUALITY_DELETES:
                raise ValueError(f"equality deletes of {task.file.file_path} cannot be applied")
            if delete.file_path not in read:
                read[delete.file_path] = _read_deletes(io, delete)
            positions = read[delete.file_path].get(task.file.file_path)
            if positions is not None:
                found.extend(positions.cast(pa.int64()).chunks)
        if found:
            unique = pc.unique(pa.concat_arrays(found))
            paths.extend([task.file.file_path] * len(unique))
            chunks.append(unique)
    pos = pa.concat_arrays(chunks) if chunks else pa.array([], pa.int64())
    return pa.table({"file_path": pa.array(paths, pa.string()), "pos": pos})
