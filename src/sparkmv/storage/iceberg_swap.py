"""Pointing a name of the ``sparkmv`` Iceberg catalog at another table, inside a caller's
catalog transaction.

pyiceberg's ``SqlCatalog`` keeps one row per table in ``iceberg_tables`` (catalog name,
namespace, table name, current metadata location), in the same database as sparkmv's own
metadata tables. Swapping a table in is rewriting those rows: the replaced table's row is
deleted and the replacement's row renamed, each a compare-and-set on the metadata location
read in the same transaction (as pyiceberg commits are), so a commit that landed in between
makes the swap fail instead of being lost. Done in the transaction that also swaps the
sparkmv rows, readers see the old table or the new one, never neither. The replaced table's
row is renamed to a retired name (:func:`sparkmv.names.retired_name`) rather than deleted,
so its files stay until ``sparkmv vacuum`` drops it after the snapshot retention: a reader
that opened the old table before the swap finishes its read (as Iceberg keeps a replaced
table's old snapshots until they expire). No pyiceberg catalog
call is made here: on SQLite it would wait for the lock this transaction holds.
"""

from __future__ import annotations

import uuid
from datetime import UTC, datetime

from pyiceberg.catalog.sql import IcebergTables
from sqlalchemy import select, update
from sqlalchemy.orm import Session

from sparkmv.errors import ObjectExistsError, StorageError
from sparkmv.names import ObjectName, retired_name
from sparkmv.storage.iceberg import CATALOG_NAME


def point_name_at(
    session: Session, name: ObjectName, replacement: ObjectName, replaces_table: bool, retire_as: ObjectName
) -> str | None:
    """Make Iceberg table name ``name`` denote table ``replacement`` (same namespace), whose
    own name disappears; ``replaces_table``: whether ``name`` is expected to exist (its
    table is then named ``retire_as``, hidden, with its files, until vacuum drops it).

    Returns:
        The metadata location ``name`` had (None when it had none).

    Raises:
        StorageError: ``replacement`` does not exist, or either table was committed to
            between this transaction's read and its write.
        ObjectExistsError: ``name`` exists though ``replaces_table`` is False.
    """
    if not name.namespace == replacement.namespace == retire_as.namespace:
        raise StorageError(f"cannot swap {replacement.qualified} in as {name.qualified}: namespaces differ")
    key = (IcebergTables.catalog_name == CATALOG_NAME, IcebergTables.table_namespace == name.namespace)
    found = session.execute(
        select(IcebergTables.table_name, IcebergTables.metadata_location).where(
            *key, IcebergTables.table_name.in_([name.name, replacement.name])
        )
    ).all()
    locations = {row[0]: row[1] for row in found}
    new_location = locations.get(replacement.name)
    if new_location is None:
        raise StorageError(f"Iceberg table {replacement.qualified} does not exist")
    old_location = locations.get(name.name)
    if old_location is not None and not replaces_table:
        raise ObjectExistsError(f"'{name}' was created meanwhile")
    if name.name in locations:
        gone = session.execute(
            update(IcebergTables)
            .where(*key, IcebergTables.table_name == name.name, _at(old_location))
            .values(table_name=retire_as.name)
            .execution_options(synchronize_session=False)
        )
        if gone.rowcount != 1:  # type: ignore[attr-defined]
            raise StorageError(f"Iceberg table {name.qualified} was committed to while it was being replaced")
    moved = session.execute(
        update(IcebergTables)
        .where(*key, IcebergTables.table_name == replacement.name, _at(new_location))
        .values(table_name=name.name)
        .execution_options(synchronize_session=False)
    )
    if moved.rowcount != 1:  # type: ignore[attr-defined]
        raise StorageError(f"Iceberg table {replacement.qualified} was committed to while it was being swapped in")
    return old_location


def _at(location: str | None):  # type: ignore[no-untyped-def]
    """The condition ``metadata_location`` is ``location`` (NULL-safe)."""
    column = IcebergTables.metadata_location
    return column.is_(None) if location is None else column == location


def retirement(name: ObjectName) -> ObjectName:
    """The retired name for the table of ``name`` replaced now (UTC, a random token)."""
    return retired_name(name, datetime.now(UTC).replace(tzinfo=None), uuid.uuid4().hex[:8])
