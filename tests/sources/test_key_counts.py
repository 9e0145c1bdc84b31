"""Sources: the rows of a pinned Iceberg table holding some keys, counted on the driver
(sparkmv.sources.key_counts, the probes' reader), on real pyiceberg tables with
merge-on-read position deletes. No Spark."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pytest
from pyiceberg.catalog.sql import SqlCatalog
from pyiceberg.table import Table

from sparkmv.demo.iceberg_deletes import delete_rows
from sparkmv.names import ObjectName
from sparkmv.sources import external_tables, key_counts
from sparkmv.sources.pinned import PinnedTable

T = ObjectName.parse("lake.db.t")
SCHEMA = pa.schema([("k", pa.int64()), ("s", pa.string()), ("x", pa.float64())])


@pytest.fixture
def lake(tmp_path: Path) -> tuple[SqlCatalog, dict[str, str]]:
    """An external SQLite Iceberg catalog ``lake`` (an outside writer's: its tables take
    position deletes) and its properties as CREATE EXTERNAL CATALOG stores them."""
    uri, warehouse = f"sqlite:///{tmp_path}/lake.db", (tmp_path / "wh").as_uri()
    catalog = SqlCatalog("lake", uri=uri, warehouse=warehouse)
    catalog.create_namespace("db")
    return catalog, {"type": "iceberg", "iceberg.catalog.type": "sql", "uri": uri, "warehouse": warehouse}


def _pin(table: Table, props: dict[str, str]) -> PinnedTable:
    return external_tables.pin(T, table, props)


def _rows(keys: list[int | None]) -> pa.Table:
    return pa.table(
        {"k": keys, "s": [None if k is None else f"s{k % 3}" for k in keys], "x": [0.5] * len(keys)}, schema=SCHEMA
    )


def test_counts_follow_the_pinned_snapshot_with_its_position_deletes(lake: tuple[SqlCatalog, dict[str, str]]) -> None:
    catalog, props = lake
    table = catalog.create_table(("db", "t"), schema=SCHEMA)
    table.append(_rows([1, 2, 2, 3, None]))
    table.append(_rows([4, 5, 2]))
    before = _pin(table, props)
    # merge-on-read: position delete files for every row of key 2 and the row of key 4
    delete_rows(table, lambda t: pc.is_in(t.column("k"), value_set=pa.array([2, 4], pa.int64())), ["k"])
    after = _pin(catalog.load_table(("db", "t")), props)
    assert any(p.delete_files for p in after.partitions.values())
    store = None  # an external table is loaded from its catalog

    # Reading stops at the first file holding a key: its matching rows are the answer
    # (each file holds two rows of 2 and 4 before the deletes, one of the others after).
    assert key_counts.count_matching(before, "k", [2, 4, 9], store) == 2
    assert key_counts.count_matching(after, "k", [2, 4, 9], store) == 0
    assert key_counts.count_matching(after, "K", [1, 5, None], store) == 1  # NULL never matches
    assert key_counts.count_matching(after, "s", ["s0", "s2"], store) == 1  # keys 3 and 5 are left of them
    assert key_counts.count_matching(after, "k", [9], store) == 0
    assert key_counts.count_matching(after, "k", [], store) == 0


def test_what_the_driver_cannot_count_is_left_to_spark(
    lake: tuple[SqlCatalog, dict[str, str]], monkeypatch: pytest.MonkeyPatch
) -> None:
    catalog, props = lake
    table = catalog.create_table(("db", "t"), schema=SCHEMA)
    table.append(_rows([1, 2]))
    pinned = _pin(table, props)
    assert key_counts.count_matching(pinned, "k", [1], None) == 1
    assert key_counts.count_matching(pinned, "x", [0.5], None) is None  # a join equates -0.0 and 0.0
    own = PinnedTable(pinned.name, "iceberg", pinned.schema_json, [], pinned.partitions, snapshot_id=pinned.snapshot_id)
    assert key_counts.count_matching(own, "k", [1], None) is None  # sparkmv's own table, no store to load it
    monkeypatch.setattr(key_counts, "MAX_BYTES", 0)
    assert key_counts.count_matching(pinned, "k", [1], None) is None
