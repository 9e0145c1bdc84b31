"""External CSV, JSON and ORC tables: a directory of such files, optionally Hive-partitioned,
read by Spark with the reader options given in ``OPTIONS (...)``.

The schema is inferred once, at CREATE (as for Parquet), and stored: every later read uses
it, so a file added by an outside writer is read with the same columns and types. Change
detection is Parquet's (:func:`sparkmv.sources.parquet.pin`): per partition, the listing
of the files with their sizes and modification times.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

from sparkmv.errors import SourceError
from sparkmv.sources import parquet
from sparkmv.sources.pinned import PinnedTable
from sparkmv.storage import warehouse

if TYPE_CHECKING:  # pyspark only where a DataFrame is made: pinning needs no Spark
    from pyspark.sql import DataFrame, SparkSession

FORMATS = ("csv", "json", "orc", "text")
"""The formats of this module (``USING csv | json | orc | text``; text: one string column
``value``, as Spark reads it)."""

ORC_MAGIC = b"ORC"


def check_location(location: str, fmt: str) -> str:
    """Check a LOCATION without Spark: an absolute path of a directory holding data files;
    for ORC, at least one file of the sample must start with the ORC magic bytes.

    Returns:
        The location, normalized (:func:`sparkmv.storage.warehouse.normalize`).

    Raises:
        SourceError: a relative path, a path that does not exist, a file, a directory with
            no data files, or (ORC) one whose files are not ORC.
    """
    root, files = parquet.check_directory(location, fmt.upper())
    if fmt == "orc" and not any(parquet.starts_with(f, ORC_MAGIC) for f in files):
        raise SourceError(f"LOCATION '{location}' holds no ORC files")
    return root


def discover(spark: SparkSession, location: str, fmt: str, options: dict[str, str]) -> tuple[str, list[str]]:
    """Schema JSON and partition columns of the ``fmt`` data under ``location``, inferred by
    Spark with ``options`` (CSV: ``inferSchema`` is on unless the options say otherwise, so
    numbers are numbers).

    Raises:
        SourceError: when the location is not a directory of data files (see
            :func:`check_location`), Spark cannot read it, or it yields no column.
    """
    from sparkmv.storage.schema import schema_to_json

    root = check_location(location, fmt)
    partition_columns = parquet.partition_columns_of(root)
    opts = dict(options)
    if fmt == "csv" and not any(k.lower() == "inferschema" for k in opts):
        opts["inferSchema"] = "true"
    try:
        schema = spark.read.options(**opts).format(fmt).load(warehouse.spark_path(root)).schema
    except Exception as exc:
        raise SourceError(f"cannot read {fmt.upper()} at '{location}': {parquet.first_line(exc)}") from exc
    data = [f for f in schema.fields if f.name.lower() not in {c.lower() for c in partition_columns}]
    if not data or any(f.name == "_corrupt_record" for f in data):
        raise SourceError(f"cannot read {fmt.upper()} at '{location}': no columns could be read with the options given")
    return schema_to_json(schema), partition_columns


def pin(
    name: str, fmt: str, location: str, schema_json: str, partition_columns: list[str], options: dict[str, str]
) -> PinnedTable:
    """List the files of every partition now and pin them (kind ``fmt``, with the reader
    options).

    Raises:
        SourceError: when the location vanished.
    """
    pinned = parquet.pin(name, location, schema_json, partition_columns)
    return dataclasses.replace(pinned, kind=fmt, read_options=dict(options))


def read(spark: SparkSession, pinned: PinnedTable, partitions: set[str] | None = None) -> DataFrame:
    """A DataFrame over the pinned files (of ``partitions`` only, when given), read with the
    stored schema and reader options; partition columns come from the directory names."""
    from sparkmv.storage.schema import schema_from_json

    schema = schema_from_json(pinned.schema_json)
    files = [f for key, p in pinned.partitions.items() if partitions is None or key in partitions for f in p.files]
    if not files:
        return spark.createDataFrame([], schema)
    reader = spark.read.schema(schema).options(**(pinned.read_options or {}))
    base = warehouse.spark_path(pinned.location or "")
    return reader.option("basePath", base).format(pinned.kind).load([warehouse.spark_path(f) for f in files])
