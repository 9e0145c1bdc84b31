"""External Parquet tables: a directory of Parquet files, optionally Hive-partitioned.

Change detection lists the directory (no Spark): per partition, file count, total bytes,
newest modification time and a hash of the sorted file names; a partition that appears,
disappears or changes any of these is changed (as StarRocks does for Hive tables).
"""

from __future__ import annotations

import hashlib
from typing import TYPE_CHECKING

from sparkmv.errors import SourceError
from sparkmv.sources.pinned import UNPARTITIONED, PinnedPartition, PinnedTable
from sparkmv.storage import warehouse
from sparkmv.storage.warehouse import FileInfo

if TYPE_CHECKING:  # pyspark only where a DataFrame is made: pinning needs no Spark
    from pyspark.sql import DataFrame, SparkSession


def _is_data_file(name: str) -> bool:
    return not name.startswith(("_", ".")) and not name.endswith(".crc")


PARQUET_MAGIC = b"PAR1"
_SAMPLE_FILES = 64


def check_directory(location: str, what: str) -> tuple[str, list[FileInfo]]:
    """Check a LOCATION without Spark: an absolute path (or an object-store URL) of a
    directory holding data files (``what`` names their format in the messages).

    Returns:
        The location, normalized (:func:`sparkmv.storage.warehouse.normalize`), and a sample
        of at most 64 of its data files (:func:`sample_data_files`).

    Raises:
        SourceError: a relative path, a path that does not exist, a file, or a directory
            with no data files.
    """
    root = warehouse.normalize(location)
    if not (warehouse.is_url(root) or root.startswith("/")):
        raise SourceError(f"LOCATION '{location}' is a relative path: give an absolute path")
    if not warehouse.exists(root):
        raise SourceError(f"LOCATION '{location}' does not exist")
    if not warehouse.is_dir(root):
        raise SourceError(f"LOCATION '{location}' is a file, not a directory of {what} files")
    files = sample_data_files(root)
    if not files:
        raise SourceError(f"LOCATION '{location}' holds no data files")
    return root, files


def check_location(location: str) -> str:
    """Check a Parquet LOCATION without Spark: an absolute path (or an object-store URL)
    of a directory holding Parquet data files (read by their ``PAR1`` magic bytes, a
    sample of at most 64 files).

    Returns:
        The location, normalized (:func:`sparkmv.storage.warehouse.normalize`).

    Raises:
        SourceError: a relative path, a path that does not exist, a file, a directory
            with no data files, or one whose files are not Parquet (``holds no Parquet
            files (found 3 .csv files)``).
    """
    root, files = check_directory(location, "Parquet")
    if not any(starts_with(f, PARQUET_MAGIC) for f in files):
        kinds: dict[str, int] = {}
        for f in files:
            ext = _suffix(f.name).lower() or "(no extension)"
            kinds[ext] = kinds.get(ext, 0) + 1
        found = ", ".join(f"{n} {ext} file{'s' if n > 1 else ''}" for ext, n in sorted(kinds.items()))
        raise SourceError(f"LOCATION '{location}' holds no Parquet files (found {found})")
    return root


def _suffix(file_name: str) -> str:
    """The extension as ``pathlib`` gives it (``a.tar.gz`` -> ``.gz``, ``.x`` -> ``""``)."""
    stem, dot, ext = file_name.rpartition(".")
    return dot + ext if stem.strip(".") and ext else ""


def sample_data_files(root: str) -> list[FileInfo]:
    """At most 64 data files under ``root`` (hidden and ``_`` names skipped), in walk order."""
    out: list[FileInfo] = []
    for _parts, _dirs, files in warehouse.walk(root, _is_data_file):
        out.extend(files)
        if len(out) >= _SAMPLE_FILES:
            return out[:_SAMPLE_FILES]
    return out


def starts_with(file: FileInfo, magic: bytes) -> bool:
    """Whether ``file`` begins with the bytes ``magic`` (a format's magic number); False
    when it cannot be read."""
    try:
        with warehouse.open_input(file.path) as f:
            return f.read(len(magic)) == magic
    except OSError:
        return False


def discover(spark: SparkSession, location: str) -> tuple[str, list[str]]:
    """Schema JSON and partition columns of the Parquet data under ``location``.

    Call :func:`check_location` first: it needs no Spark (``spark`` here may start one).

    Raises:
        SourceError: when the location is not a directory of Parquet data (see
            :func:`check_location`) or Spark cannot read it.
    """
    from sparkmv.storage.schema import schema_to_json

    root = check_location(location)
    partition_columns = partition_columns_of(root)
    try:
        schema = spark.read.parquet(warehouse.spark_path(root)).schema
    except Exception as exc:
        raise SourceError(f"cannot read Parquet at '{location}': {first_line(exc)}") from exc
    return schema_to_json(schema), partition_columns


def first_line(exc: BaseException) -> str:
    """The first line of an exception's text (its type name when it has none)."""
    return str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__


def partition_columns_of(root: str) -> list[str]:
    """Hive partition columns under ``root``, outermost first (from the first ``col=value``
    directory at each level)."""
    columns: list[str] = []
    current = root
    while True:
        subdirs = [e for e in warehouse.list_dir(current) if e.is_dir and "=" in e.name and _is_data_file(e.name)]
        if not subdirs:
            return columns
        columns.append(subdirs[0].name.split("=", 1)[0])
        current = subdirs[0].path


def pin(name: str, location: str, schema_json: str, partition_columns: list[str]) -> PinnedTable:
    """List the files of every partition now and pin them.

    Raises:
        SourceError: when the location vanished.
    """
    root = warehouse.normalize(location)
    if not warehouse.is_dir(root):
        raise SourceError(f"base table '{name}': LOCATION '{location}' no longer exists")
    depth = len(partition_columns)
    groups: dict[str, list[tuple[str, int, int]]] = {}
    # directory names are filtered as data files are (no ``_temporary``, ``.hidden``)
    for parts, _dirs, found in warehouse.walk(root, _is_data_file):
        if len(parts) != depth:
            continue
        key = "/".join(parts) if depth else UNPARTITIONED
        for f in found:
            groups.setdefault(key, []).append((f.path, f.size, f.mtime_ns))
    partitions: dict[str, PinnedPartition] = {}
    for key, files in sorted(groups.items()):
        files.sort()
        names_hash = hashlib.sha1("\n".join(warehouse.name(f[0]) for f in files).encode()).hexdigest()[:12]
        total = sum(f[1] for f in files)
        newest = max(f[2] for f in files)
        partitions[key] = PinnedPartition(
            files=[f[0] for f in files],
            version=f"n={len(files)};b={total};m={newest};h={names_hash}",
            changed_at=newest / 1e9,
            bytes=total,
            file_stats=[[f[1], f[2]] for f in files],
        )
    return PinnedTable(name, "parquet", schema_json, list(partition_columns), partitions, location=location)


def read(spark: SparkSession, pinned: PinnedTable, partitions: set[str] | None = None) -> DataFrame:
    """A DataFrame over the pinned files (of ``partitions`` only, when given).

    Partition columns come from the Hive directory names with the stored schema's types.
    """
    from sparkmv.storage.schema import schema_from_json

    schema = schema_from_json(pinned.schema_json)
    files = [f for key, p in pinned.partitions.items() if partitions is None or key in partitions for f in p.files]
    if not files:
        return spark.createDataFrame([], schema)
    base = warehouse.spark_path(pinned.location or "")
    return spark.read.schema(schema).option("basePath", base).parquet(*[warehouse.spark_path(f) for f in files])
