"""Building the planner's input for one MV: pin base tables, trace lineage, read the
version map and the MV's published partitions."""

from __future__ import annotations

import json
from dataclasses import dataclass

from sqlglot import exp

from sparkmv.analysis.lineage import Lineage, partition_lineage
from sparkmv.analysis.query import parse_query
from sparkmv.catalog import Catalog
from sparkmv.catalog.models import ObjectRow
from sparkmv.names import ObjectName
from sparkmv.refresh.planner import PartitionValue
from sparkmv.refresh.properties import MvProperties
from sparkmv.sources.pinned import PinnedTable
from sparkmv.sources.resolve import pin_base
from sparkmv.storage.iceberg import IcebergStore


@dataclass(frozen=True)
class MvDefinition:
    """An MV as the refresh sees it."""

    object_id: int
    name: ObjectName
    query: exp.Query
    partition_by: str | None
    base_tables: list[ObjectName]
    properties: MvProperties

    @classmethod
    def from_row(cls, row: ObjectRow) -> MvDefinition:
        """Parse the stored definition of an MV row."""
        assert row.definition is not None
        return cls(
            object_id=row.id,
            name=ObjectName(row.namespace, row.name),
            query=parse_query(row.definition),
            partition_by=row.partition_by,
            base_tables=[ObjectName.parse(t, allow_reserved=True) for t in row.base_tables],
            properties=MvProperties.parse(row.properties or {}),
        )


def pin_all(catalog: Catalog, store: IcebergStore, tables: list[ObjectName]) -> dict[str, PinnedTable]:
    """Pin every base table now.

    Raises:
        SourceError: when a base table is gone.
    """
    out: dict[str, PinnedTable] = {}
    for name in tables:
        with catalog.transaction() as s:
            row = catalog.objects.find(s, name)
        out[name.qualified] = pin_base(name, row, store)
    return out


def _type_names(schema_json: str) -> dict[str, str]:
    fields = json.loads(schema_json).get("fields", [])
    return {f["name"]: f["type"] if isinstance(f["type"], str) else "string" for f in fields}


def lineage_of(mv: MvDefinition, pinned: dict[str, PinnedTable]) -> Lineage:
    """Partition lineage of ``mv`` given the pinned base schemas."""
    if mv.partition_by is None:
        return Lineage({}, "unpartitioned MV")
    schema = {t: _type_names(p.schema_json) for t, p in pinned.items()}
    parts = {t: p.partition_columns for t, p in pinned.items()}
    return partition_lineage(mv.query, mv.partition_by, schema, parts)


def mv_partitions(store: IcebergStore, name: ObjectName) -> set[PartitionValue]:
    """Partition values of the MV's current snapshot."""
    table = store.load(name)
    return {p.value for p in store.partitions(table)} if IcebergStore.partition_column(table) else set()
