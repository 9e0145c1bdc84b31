"""IcebergStore: Iceberg tables in the pyiceberg ``SqlCatalog`` named ``sparkmv``.

The catalog tables of pyiceberg live in the same database as sparkmv's metadata. Data
files are written by Spark elsewhere (:mod:`sparkmv.storage.files`) and committed here
with ``add_files``; a publish is one pyiceberg transaction (delete the replaced
partitions, add the new files) so readers see the old or the new contents, never a mix.
Every snapshot of a publish carries ``sparkmv.run-id`` in its summary, which is how
recovery finds out whether a run's commit landed.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pyiceberg.catalog.sql import SqlCatalog
from pyiceberg.exceptions import (
    CommitFailedException,
    NamespaceAlreadyExistsError,
    NoSuchTableError,
    ValidationException,
)
from pyiceberg.expressions import AlwaysTrue, BooleanExpression, EqualTo, IsNull, Or
from pyiceberg.manifest import DataFile as IcebergDataFile
from pyiceberg.manifest import ManifestFile
from pyiceberg.table import FileScanTask, Table, TableProperties, Transaction
from pyiceberg.table.metadata import TableMetadata
from pyiceberg.table.snapshots import Operation
from pyiceberg.table.sorting import NullOrder
from pyiceberg.table.update import update_table_metadata
from pyiceberg.table.update.snapshot import _OverwriteFiles, _SnapshotProducer
from pyiceberg.transforms import IdentityTransform
from pyiceberg.utils.concurrent import ExecutorFactory
from sqlalchemy import Engine
from sqlalchemy.exc import IntegrityError

from sparkmv.errors import StorageError
from sparkmv.names import ObjectName
from sparkmv.storage import footers, iceberg_manifests, iceberg_partitions, partition_values
from sparkmv.storage.iceberg_partitions import PartitionInfo
from sparkmv.storage.lazy import lazy_module
from sparkmv.storage.warehouse import Location, catalog_uri, make_dirs, normalize, remove_tree

if TYPE_CHECKING:
    import pyarrow as pa
else:  # imported where rows are read: a read-only process never loads them
    pa = lazy_module("pyarrow")


CATALOG_NAME = "sparkmv"
RUN_ID_PROPERTY = "sparkmv.run-id"
CHUNKS_PROPERTY = "sparkmv.chunks"


@dataclass(frozen=True)
class DataFile:
    """One data file of a snapshot.

    Attributes:
        path: absolute file URI.
        partition: identity partition value as text (None for the NULL partition or an
            unpartitioned table).
        record_count: rows.
        size_bytes: file size in bytes.
    """

    path: str
    partition: str | None
    record_count: int
    size_bytes: int


def partition_text(value: Any) -> str | None:
    """Text form of an identity partition value: the one text form of
    :mod:`sparkmv.storage.partition_values`."""
    return partition_values.to_text(value)


def snapshot_key(table: Table) -> tuple[int, int]:
    """``(current snapshot id, current schema id)`` of pyiceberg ``table`` (snapshot id -1
    when it has none): what a copy of the table's current data is valid for, since an
    Iceberg snapshot's files never change."""
    snapshot = table.current_snapshot()
    return (snapshot.snapshot_id if snapshot is not None else -1, table.metadata.current_schema_id)


class IcebergStore:
    """Create, read and commit Iceberg tables of the ``sparkmv`` catalog.

    Args:
        catalog_url: SQLAlchemy URL of the shared catalog database.
        warehouse: location under which table data and metadata are written: a local
            directory, or an object-store URL (``s3://bucket/warehouse``).
        engine: the engine sparkmv already opened on ``catalog_url`` (shared, so SQLite
            sees one set of locking rules).

    The catalog's FileIO properties (``s3.endpoint``, ``s3.region``, ...) come from
    pyiceberg's own configuration of the catalog named ``sparkmv`` (``~/.pyiceberg.yaml``
    or ``PYICEBERG_CATALOG__SPARKMV__S3__ENDPOINT``-style variables); ``uri`` and
    ``warehouse`` are always sparkmv's.
    """

    def __init__(self, catalog_url: str, warehouse: Location, engine: Engine | None = None) -> None:
        from pyiceberg.utils.config import Config

        make_dirs(warehouse)
        self.warehouse = warehouse
        configured = {
            k: str(v)
            for k, v in (Config().get_catalog_config(CATALOG_NAME) or {}).items()
            if k not in _OWN_PROPERTIES and not isinstance(v, dict)
        }
        self.catalog = SqlCatalog(CATALOG_NAME, **configured, uri=catalog_url, warehouse=catalog_uri(warehouse))
        if engine is not None:
            self.catalog.engine.dispose()
            self.catalog.engine = engine

    def read_through_fsspec(self) -> None:
        """Read a local warehouse's tables through pyiceberg's fsspec FileIO instead of its
        default PyArrowFileIO, which imports pyarrow and pandas (~130 MB): for a process
        that only reads table metadata (the web UI). Nothing changes when a FileIO is
        configured (``py-io-impl``) or the warehouse is an object store."""
        from pyiceberg.io import FSSPEC_FILE_IO, PY_IO_IMPL

        if isinstance(self.warehouse, Path) and PY_IO_IMPL not in self.catalog.properties:
            self.catalog.properties[PY_IO_IMPL] = FSSPEC_FILE_IO

    # -- tables ------------------------------------------------------------------------------
    def _ensure_namespace(self, namespace: str) -> None:
        """Create ``namespace`` unless it exists. pyiceberg's SqlCatalog checks, then inserts:
        two refreshes creating the same namespace at once (threads of a pipeline run, or two
        processes) both pass the check and the second insert fails on the unique key, which
        means the namespace now exists."""
        try:
            self.catalog.create_namespace(namespace)
        except NamespaceAlreadyExistsError:
            pass
        except IntegrityError:
            if not self.catalog.namespace_exists(namespace):
                raise

    def create_table(
        self, name: ObjectName, schema: pa.Schema, partition_column: str | None, sort_columns: Sequence[str] = ()
    ) -> Table:
        """Create an (empty) Iceberg table; identity-partitioned on ``partition_column``, with
        the sort order ``sort_columns`` (ascending, NULLs first, as Spark sorts): the key
        sparkmv clusters the table's data files by (:meth:`sort_columns`).

        Raises:
            StorageError: when the table already exists.
        """
        self._ensure_namespace(name.namespace)
        ident = (name.namespace, name.name)
        if self.catalog.table_exists(ident):
            raise StorageError(f"Iceberg table {name.qualified} already exists")
        table = self.catalog.create_table(ident, schema=schema)
        if partition_column or sort_columns:
            with table.transaction() as tx:
                if partition_column:
                    with tx.update_spec() as spec:
                        spec.add_identity(partition_column)
                if sort_columns:
                    with tx.update_sort_order(case_sensitive=False) as order:
                        for column in sort_columns:
                            order.asc(column, IdentityTransform(), NullOrder.NULLS_FIRST)
        return self.catalog.load_table(ident)

    def exists(self, name: ObjectName) -> bool:
        """True when the Iceberg table exists."""
        return bool(self.catalog.table_exists((name.namespace, name.name)))

    def load(self, name: ObjectName) -> Table:
        """The Iceberg table ``name``.

        Raises:
            StorageError: when it does not exist.
        """
        try:
            return self.catalog.load_table((name.namespace, name.name))
        except NoSuchTableError as exc:
            raise StorageError(f"Iceberg table {name.qualified} does not exist") from exc

    def drop_table(self, name: ObjectName) -> None:
        """Drop the table from the catalog and delete its directory (sparkmv-owned data)."""
        if not self.exists(name):
            return
        location = self.load(name).location()
        self.catalog.drop_table((name.namespace, name.name))
        remove_tree(location)

    def list_tables(self) -> list[ObjectName]:
        """Every table of the ``sparkmv`` Iceberg catalog."""
        out: list[ObjectName] = []
        for (ns,) in self.catalog.list_namespaces():
            for ident in self.catalog.list_tables(ns):
                out.append(ObjectName(ident[0], ident[-1]))
        return out

    # -- reading ------------------------------------------------------------------------------
    @staticmethod
    def partition_column(table: Table) -> str | None:
        """The identity partition column of the current spec, or None."""
        spec = table.spec()
        if not spec.fields:
            return None
        return table.schema().find_column_name(spec.fields[0].source_id)

    @staticmethod
    def sort_columns(table: Table) -> list[str]:
        """The columns of the table's sort order (identity transforms, in order; empty when
        unsorted): the key its data files are clustered by."""
        schema = table.schema()
        columns: list[str] = []
        for sort_field in table.sort_order().fields:
            if not isinstance(sort_field.transform, IdentityTransform):
                break
            columns.append(schema.find_column_name(sort_field.source_id) or "")
        return [c for c in columns if c]

    @staticmethod
    def partition_kind(table: Table) -> str | None:
        """The kind (:mod:`sparkmv.storage.partition_values`) of the identity partition
        column, or None for an unpartitioned table."""
        ptype = table.spec().partition_type(table.schema())
        return partition_values.kind_of_iceberg_type(ptype.fields[0].field_type) if ptype.fields else None

    @staticmethod
    def data_files(table: Table, snapshot_id: int | None = None) -> list[DataFile]:
        """The data files of ``snapshot_id`` (default: current snapshot).

        Raises:
            StorageError: when the snapshot has delete files (not readable as plain Parquet).
        """
        if table.current_snapshot() is None:
            return []
        entries = iceberg_manifests.data_entries(table, snapshot_id)  # manifests read once per process
        if entries is None:  # delete files: pyiceberg plans (and names them)
            return IcebergStore.task_files(table, table.scan(snapshot_id=snapshot_id).plan_files())
        ptype = table.spec().partition_type(table.schema())
        field_type = ptype.fields[0].field_type if ptype.fields else None
        text = {
            e.partition: partition_values.from_iceberg_physical(e.partition[0], field_type)
            for e in entries
            if e.partition
        }
        return [
            DataFile(e.path, partition_text(text[e.partition]) if e.partition else None, e.record_count, e.size_bytes)
            for e in entries
        ]

    @staticmethod
    def task_files(table: Table, tasks: Iterable[FileScanTask]) -> list[DataFile]:
        """The data files of planned scan tasks (of a snapshot scan or an incremental append
        scan), their identity partition values as text of the current spec.

        Raises:
            StorageError: when a task has delete files (not readable as plain Parquet).
        """
        files: list[DataFile] = []
        ptype = table.spec().partition_type(table.schema())
        field_type = ptype.fields[0].field_type if ptype.fields else None
        for task in tasks:
            if task.delete_files:
                raise StorageError(f"table {table.name()} has delete files; sparkmv reads only data files")
            part = task.file.partition
            value = partition_text(partition_values.from_iceberg_physical(part[0], field_type)) if len(part) else None
            files.append(DataFile(task.file.file_path, value, task.file.record_count, task.file.file_size_in_bytes))
        return files

    @staticmethod
    def partitions(table: Table, snapshot_id: int | None = None) -> list[PartitionInfo]:
        """Per-partition metadata of a snapshot (default: current): see
        :func:`sparkmv.storage.iceberg_partitions.partitions`."""
        return iceberg_partitions.partitions(table, snapshot_id)

    @staticmethod
    def snapshot_of_run(table: Table, run_id: int) -> int | None:
        """The id of the newest snapshot tagged with ``run_id``, or None."""
        found = None
        for snap in table.snapshots():
            if snap.summary is not None and snap.summary.get(RUN_ID_PROPERTY) == str(run_id):
                found = snap.snapshot_id
        return found

    # -- committing -----------------------------------------------------------------------------
    def publish(
        self,
        name: ObjectName,
        run_id: int,
        files: list[str],
        replace_partitions: list[str | None] | None,
        expected_snapshot_id: int | None = None,
        extra_properties: dict[str, str] | None = None,
        replace_files: Sequence[str] = (),
    ) -> int | None:
        """Commit ``files`` and drop what they replace, in one Iceberg snapshot.

        The snapshot is an ``overwrite`` when it removes files, an ``append`` when it only
        adds (so an MV read by another MV's incremental refresh stays append-only when a run
        only adds partitions). Only the footers of ``files`` are read; the files removed are
        found from the manifests of the current snapshot (identity partition values).

        Args:
            replace_partitions: identity partition values whose current files are removed;
                None removes every file (full refresh).
            replace_files: data files of the current snapshot removed as well (paths as
                the snapshot lists them): a copy-on-write rewrite of just those files.
            expected_snapshot_id: when given, the commit fails unless the table's current
                snapshot is still this one (the run's view of the table).

        Returns:
            The new current snapshot id (the current one when nothing had to change).

        Raises:
            StorageError: on a commit conflict (another writer committed first), or when a
                file cannot be read or does not match the table, or a file of
                ``replace_files`` is not in the current snapshot; the table is then unchanged.
        """
        table = self.load(name)
        current = table.current_snapshot()
        if expected_snapshot_id is not None and (current.snapshot_id if current else None) != expected_snapshot_id:
            raise StorageError(f"table {name.qualified} changed since run {run_id} planned its publish")
        props = {RUN_ID_PROPERTY: str(run_id), **(extra_properties or {})}
        try:
            removed = self._replaced_files(table, replace_partitions) if current is not None else []
            if replace_files:
                removed += _listed_files(table, replace_files, {f.file_path for f in removed})
            added = _data_files(table, files)
            if removed or added:
                self._commit(table, removed, added, props)
        except (CommitFailedException, ValidationException, OSError, ValueError) as exc:
            # Nothing is committed when reading a staged file fails (missing, unreadable,
            # schema mismatch) or the commit loses a race: the table is unchanged.
            raise StorageError(f"commit of run {run_id} to {name.qualified} failed: {exc}") from exc
        snap = table.current_snapshot()  # the commit refreshed ``table``'s metadata
        return snap.snapshot_id if snap else None

    @staticmethod
    def _commit(
        table: Table, removed: list[IcebergDataFile], added: list[IcebergDataFile], props: dict[str, str]
    ) -> None:
        """One snapshot that removes ``removed`` and adds ``added`` (pyiceberg data files)."""
        with _Transaction(table) as tx:
            if table.metadata.name_mapping() is None:
                # Files written by Spark or pyarrow carry no Iceberg field ids: readers map
                # their columns by name (what ``add_files`` sets on a first commit, too).
                mapping = table.schema().name_mapping.model_dump_json()
                tx.set_properties({TableProperties.DEFAULT_NAME_MAPPING: mapping})
            producer: _SnapshotProducer[Any]
            if removed:
                producer = _Overwrite(Operation.OVERWRITE, tx, table.io, snapshot_properties=props)
            else:
                producer = tx.update_snapshot(snapshot_properties=props).fast_append()
            with producer as snapshot:
                for data_file in removed:
                    snapshot.delete_data_file(data_file)
                for data_file in added:
                    snapshot.append_data_file(data_file)

    @staticmethod
    def _replaced_files(table: Table, values: list[str | None] | None) -> list[IcebergDataFile]:
        """The data files of the current snapshot in the identity partitions ``values``
        (every file when ``values`` is None, or the table is unpartitioned and ``values``
        is not empty), read from the manifests whose partition summaries may hold them.

        Raises:
            StorageError: when the snapshot has delete files (sparkmv never writes any).
        """
        if values is not None and not values:
            return []
        column = IcebergStore.partition_column(table)
        kind = IcebergStore.partition_kind(table) or "string"
        if values is None or column is None:
            wanted: set[str | None] | None = None
            row_filter: BooleanExpression = AlwaysTrue()
        else:
            wanted = {partition_values.canonical(v, kind) for v in values}
            row_filter = IcebergStore._replace_predicate(column, values, kind) or AlwaysTrue()
        ptype = table.spec().partition_type(table.schema())
        field_type = ptype.fields[0].field_type if ptype.fields else None
        out: list[IcebergDataFile] = []
        for task in table.scan(row_filter=row_filter).plan_files():
            if task.delete_files:
                raise StorageError(f"table {table.name()} has delete files; sparkmv reads only data files")
            part = task.file.partition
            value = partition_text(partition_values.from_iceberg_physical(part[0], field_type)) if len(part) else None
            if wanted is None or value in wanted:
                out.append(task.file)
        return out

    @staticmethod
    def _replace_predicate(
        column: str | None, values: list[str | None] | None, kind: str = "string"
    ) -> BooleanExpression | None:
        """The delete filter of the replaced partitions: pyiceberg expressions built from
        typed literals (a date partition is compared with a date, never with text).

        >>> IcebergStore._replace_predicate("d", ["2024-01-01", None], "date")
        Or(left=EqualTo(term=Reference(name='d'), literal=DateLiteral(19723)), right=IsNull(term=Reference(name='d')))
        """
        if values is None:
            return AlwaysTrue()
        if not values:
            return None  # nothing to replace, also on an unpartitioned table
        if column is None:
            return AlwaysTrue()  # the one partition of an unpartitioned table
        preds: list[BooleanExpression] = [
            IsNull(column) if v is None else EqualTo(column, partition_values.iceberg_value(v, kind))  # type: ignore[call-arg, arg-type]
            for v in values
        ]
        expr = preds[0]
        for p in preds[1:]:
            expr = Or(expr, p)
        return expr

    def expire_snapshots(self, name: ObjectName, older_than: datetime) -> int:
        """Expire snapshots older than ``older_than`` (naive UTC), keeping the current one.

        Returns the number of snapshots expired.
        """
        table = self.load(name)
        current = table.current_snapshot()
        cutoff_ms = int(older_than.replace(tzinfo=UTC).timestamp() * 1000)
        old = [
            s.snapshot_id
            for s in table.snapshots()
            if s.timestamp_ms < cutoff_ms and (current is None or s.snapshot_id != current.snapshot_id)
        ]
        if old:
            table.maintenance.expire_snapshots().by_ids(old).commit()
        return len(old)

    def referenced_files(self, name: ObjectName) -> set[str]:
        """Data files referenced by any live snapshot, as normalized locations (local
        paths without scheme, URLs on an object store)."""
        table = self.load(name)
        paths: set[str] = set()
        for snap in table.snapshots():
            for f in self.data_files(table, snap.snapshot_id):
                paths.add(normalize(f.path))
        return paths


class _Transaction(Transaction):
    """A pyiceberg transaction that builds its metadata view once per change.

    pyiceberg's ``Transaction.table_metadata`` applies the staged updates to a deep copy
    of the table's metadata on every access, and producing one snapshot reads it about
    twenty times: with a few dozen snapshots in the metadata that is most of the cost of
    a small commit. The view is rebuilt whenever the base metadata or the staged updates
    change (both are replaced, never modified in place); the metadata models are frozen.
    """

    _view: tuple[TableMetadata, tuple[Any, ...], TableMetadata] | None = None

    @property
    def table_metadata(self) -> TableMetadata:
        base, updates = self._table.metadata, self._updates
        view = self._view
        if view is None or view[0] is not base or view[1] is not updates:
            view = (base, updates, update_table_metadata(base, updates))
            self._view = view
        return view[2]


class _Overwrite(_OverwriteFiles):
    """pyiceberg's overwrite that also drops the manifests of earlier snapshots holding no
    live file (only entries of files deleted before), as Iceberg's Java writers do.

    pyiceberg 0.12 keeps them, so every overwrite would leave one more manifest to read
    when the table is planned or scanned (a fast append drops them the same way)."""

    def _existing_manifests(self) -> list[ManifestFile]:
        return [
            m
            for m in super()._existing_manifests()
            if m.has_added_files() or m.has_existing_files() or m.added_snapshot_id == self._snapshot_id
        ]


def _listed_files(table: Table, paths: Sequence[str], skip: set[str]) -> list[IcebergDataFile]:
    """The data files ``paths`` of the current snapshot, except those in ``skip``.

    Raises:
        ValueError: when a path is not a data file of the current snapshot (the table
            changed since the run chose it).
    """
    wanted = set(paths)
    found = {t.file.file_path: t.file for t in table.scan().plan_files() if t.file.file_path in wanted}
    missing = sorted(wanted - set(found))
    if missing:
        raise ValueError(f"data file {missing[0]} to replace is not in the current snapshot")
    return [found[p] for p in paths if p not in skip]


def _data_files(table: Table, files: list[str]) -> list[IcebergDataFile]:
    """pyiceberg data files of staged Parquet ``files``, from their footers: kept by the
    chunk that staged them in this process, else read (in parallel, as ``add_files`` does:
    on an object store each read is a round trip); :func:`sparkmv.storage.footers.data_file`.

    Raises:
        OSError: a file is missing or unreadable. ValueError: its schema does not match.
    """
    if len(files) != len(set(files)):
        raise ValueError("staged file paths must be unique")
    if len(files) <= 1:
        return [footers.data_file(table.io, table.metadata, f) for f in files]
    executor = ExecutorFactory.get_or_create()
    return list(executor.map(lambda f: footers.data_file(table.io, table.metadata, f), files))


_OWN_PROPERTIES = ("uri", "warehouse", "type", "py-catalog-impl")
"""pyiceberg catalog properties sparkmv sets itself (never taken from pyiceberg's config)."""
