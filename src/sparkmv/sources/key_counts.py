"""Counting the rows of a pinned Iceberg table whose column holds one of some keys, on the
driver (the emptiness probes of :mod:`sparkmv.refresh.incremental.probe`).

A probe reads one column of a table as pinned, its position deletes applied, and counts
the rows holding a key. In Spark that is a scan with row positions left-anti-joined to the
deleted ones (:mod:`sparkmv.storage.position_deletes`), then a semi-join: 2-3 s at TPC-H
SF1 for ``lineitem.l_orderkey`` after RF2's merge-on-read delete. pyiceberg's Arrow reader
reads the one column of each data file with its deletes applied, in parallel, and
``pyarrow.compute.is_in`` counts: under a second (bench/RESULTS.md, TPC-H, 2026-11-28). Only
one column reaches the driver, so a table whose column is larger than :data:`MAX_BYTES`
is left to Spark.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import TYPE_CHECKING

from sparkmv.names import ObjectName
from sparkmv.sources.pinned import PinnedTable

if TYPE_CHECKING:
    from pyiceberg.table import Table

    from sparkmv.storage.iceberg import IcebergStore

MAX_BYTES = 256 * 1024 * 1024
"""Largest share of a table's bytes (its bytes over its column count) counted on the driver."""


def column_bytes(pinned: PinnedTable) -> int:
    """What reading one column of ``pinned`` costs: its bytes over its column count."""
    columns = max(1, len(json.loads(pinned.schema_json).get("fields", [])))
    return sum(p.bytes for p in pinned.partitions.values()) // columns


def count_matching(
    pinned: PinnedTable, column: str, values: Sequence[object], store: IcebergStore | None
) -> int | None:
    """Whether rows of the Iceberg table ``pinned`` (at its pinned snapshot, position
    deletes applied) hold one of ``values`` in ``column`` (equality as an equi-join's: NULL
    never matches): 0 when none does, else the matching rows of the batches read until the
    first that holds one (reading stops there: a probe asks only whether any key is left),
    read by pyiceberg's Arrow reader on the driver; None when it is left to Spark:
    not an Iceberg table (of an external catalog, or of sparkmv's own with ``store``), no
    pinned snapshot, the column's share above :data:`MAX_BYTES`, or a type Arrow cannot
    compare (the caller then counts with Spark).

    Raises:
        RefreshError: the snapshot carries equality deletes (an external table's).
    """
    if pinned.kind != "iceberg" or pinned.snapshot_id is None or column_bytes(pinned) > MAX_BYTES:
        return None
    import pyarrow as pa
    import pyarrow.compute as pc
    from pyiceberg.expressions import AlwaysTrue
    from pyiceberg.io.pyarrow import ArrowScan

    from sparkmv.sources import external, external_tables

    name = ObjectName.parse(pinned.name, allow_reserved=True)
    table: Table
    if pinned.catalog_properties is not None:
        table = external.load_table(name, pinned.catalog_properties)
    elif store is not None:
        table = store.load(name)
    else:
        return None
    schema = table.schema()
    field = next((f for f in schema.fields if f.name.lower() == column.lower()), None)
    if field is None or not _comparable(str(field.field_type)):
        return None
    keys = [v for v in values if v is not None]
    if not keys:
        return 0
    tasks = external_tables.plan(name, table, pinned.snapshot_id)
    scan = ArrowScan(table.metadata, table.io, schema.select(field.name), AlwaysTrue())
    try:
        wanted = None
        for batch in scan.to_record_batches(tasks):
            wanted = wanted if wanted is not None else pa.array(keys, type=batch.schema.field(0).type)
            count = int(pc.sum(pc.is_in(batch.column(0), value_set=wanted)).as_py() or 0)
            if count:
                return count  # some key is left: the rest of the table need not be read
    except (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError):
        return None
    return 0


def _comparable(iceberg_type: str) -> bool:
    """Iceberg types whose Arrow equality is the equi-join's: not floating point (a join
    equates ``-0.0`` and ``0.0``, Arrow's hash does not), no timestamp (keys collected from
    Spark may be local-time values), nested or binary type.

    >>> _comparable("long"), _comparable("decimal(15, 2)"), _comparable("double"), _comparable("timestamptz")
    (True, True, False, False)
    """
    return iceberg_type in ("int", "long", "string", "date", "boolean") or iceberg_type.startswith("decimal")
