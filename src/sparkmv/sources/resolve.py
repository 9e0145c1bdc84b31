"""Pin and read any base table by kind: external Parquet, CSV, JSON, ORC or Delta, MV,
refreshable table (and its signed changelog delta), a plain table of the pyiceberg catalog,
or a table of an external Iceberg catalog (``catalog.namespace.name``)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from pyiceberg.table import Table

from sparkmv.catalog.models import ObjectRow
from sparkmv.catalog.states import ObjectKind
from sparkmv.errors import SourceError
from sparkmv.names import ObjectName
from sparkmv.sources import delta, external, external_tables, files, iceberg, parquet, refreshable, signed
from sparkmv.sources.pinned import PinnedTable
from sparkmv.storage.iceberg import IcebergStore

if TYPE_CHECKING:  # pyspark only where a DataFrame is made: pinning needs no Spark
    from pyspark.sql import DataFrame, SparkSession


def pin_base(
    name: ObjectName, row: ObjectRow | None, store: IcebergStore, catalog_properties: dict[str, str] | None = None
) -> PinnedTable:
    """Pin base table ``name`` now (``row`` is its catalog row, None for a plain Iceberg table;
    ``catalog_properties`` those of the external catalog of a three-part name, None when
    that catalog is not registered).

    Raises:
        SourceError: when the table or its data is gone, or its external catalog is
            unknown or unreachable.
        RefreshError: an external table's snapshot carries too many delete files.
    """
    if name.catalog:
        table = external.load_table(name, catalog_properties)
        assert catalog_properties is not None
        return external_tables.pin(name, table, catalog_properties)
    if row is not None and row.kind == ObjectKind.EXTERNAL_TABLE:
        assert row.location is not None and row.schema_json is not None
        fmt = row.format or "parquet"
        if fmt in files.FORMATS:
            options = dict((row.options or {}).get("read_options", {}))
            columns = list(row.partition_columns or [])
            return files.pin(name.qualified, fmt, row.location, row.schema_json, columns, options)
        if fmt == "delta":
            return delta.pin(name.qualified, row.location)
        return parquet.pin(name.qualified, row.location, row.schema_json, list(row.partition_columns or []))
    if not store.exists(name):
        raise SourceError(f"base table '{name}' does not exist")
    if row is not None and row.kind == ObjectKind.REFRESHABLE_TABLE:
        return refreshable.pin(name, store)
    return iceberg.pin(name.qualified, store.load(name))


def read_pinned(
    spark: SparkSession, pinned: PinnedTable, partitions: set[str] | None = None, store: IcebergStore | None = None
) -> DataFrame:
    """A DataFrame over the pinned files of a base table (of ``partitions`` only, when given).

    ``store`` loads an Iceberg table of sparkmv's catalog for a ``signed`` change whose
    files carry delete files (a table of an external catalog is loaded from its catalog).
    """
    if pinned.kind == "parquet":
        return parquet.read(spark, pinned, partitions)
    if pinned.kind in files.FORMATS:
        return files.read(spark, pinned, partitions)
    if pinned.kind == "delta":
        return delta.read(spark, pinned, partitions)
    if pinned.kind == "changelog":
        return refreshable.read_changes(spark, pinned)
    if pinned.kind == signed.SIGNED and signed.FEED in pinned.partitions:  # a Delta table's change data feed
        from sparkmv.sources.delta_cdf import read_feed

        return read_feed(spark, pinned)
    if pinned.kind == signed.SIGNED and any("|" in key for key in pinned.partitions):  # a Delta table's change
        return _delta_signed(spark, pinned)
    if pinned.kind == signed.SIGNED:
        return signed.read(spark, pinned, lambda: _load(pinned, store), store.warehouse if store else None)
    if pinned.catalog_properties is not None:
        return external_tables.read(spark, pinned, partitions)
    return iceberg.read(spark, pinned, partitions)


def _delta_signed(spark: SparkSession, pinned: PinnedTable) -> DataFrame:
    """The signed rows of a Delta table's change read from its removed and added files,
    netted when it has both (:func:`sparkmv.sources.delta.read_signed`)."""
    from sparkmv.storage.schema import schema_from_json

    rows = delta.read_signed(spark, pinned)
    both = all(any(k.startswith(s + "|") for k in pinned.partitions) for s in "+-")
    return signed.netted(rows, [f.name for f in schema_from_json(pinned.schema_json).fields]) if both else rows


def _load(pinned: PinnedTable, store: IcebergStore | None) -> Table:
    """The Iceberg table of ``pinned``: from its external catalog, or from ``store``.

    Raises:
        SourceError: a table of sparkmv's catalog is read without ``store``.
    """
    name = ObjectName.parse(pinned.name, allow_reserved=True)
    if pinned.catalog_properties is not None:
        return external.load_table(name, pinned.catalog_properties)
    if store is None:
        raise SourceError(f"the change of base table '{pinned.name}' is read without its catalog")
    return store.load(name)
