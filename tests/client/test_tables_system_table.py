"""``sparkmv.tables``, ``SHOW TABLES`` and ``DESCRIBE EXTENDED`` telling each kind of table
what it is: external Parquet, CSV and Delta tables, a refreshable table and an MV."""

from __future__ import annotations

import os
from collections.abc import Callable
from datetime import UTC, date, datetime
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from tests.helpers import write_partition

pytestmark = [pytest.mark.spark]


def _setup(make_client: Callable[..., Any], tmp_path: Path) -> tuple[Any, dict[str, Path]]:
    from deltalake import write_deltalake

    paths = {"pq": tmp_path / "pq", "csv": tmp_path / "csv", "lake": tmp_path / "lake"}
    write_partition(paths["pq"], "m", "2024-01", {"id": [1], "amount": [2.0]})
    (paths["csv"] / "d=2024-01-01").mkdir(parents=True)
    (paths["csv"] / "d=2024-01-01" / "a.csv").write_text("id,amount\n1,2.5\n")
    events = pa.table({"d": pa.array([date(2024, 1, 1)], pa.date32()), "id": pa.array([1], pa.int64())})
    write_deltalake(str(paths["lake"]), events, partition_by=["d"])
    write_deltalake(str(paths["lake"]), events, mode="append")
    client = make_client()
    client.sql(f"CREATE EXTERNAL TABLE pq USING parquet LOCATION '{paths['pq']}'")
    client.sql(f"CREATE EXTERNAL TABLE c USING csv OPTIONS ('header' = 'true') LOCATION '{paths['csv']}'")
    client.sql(f"CREATE EXTERNAL TABLE lake USING delta LOCATION '{paths['lake']}'")
    client.sql("CREATE TABLE rt (id int, v string, PRIMARY KEY (id))")
    client.sql("CREATE MATERIALIZED VIEW mv PARTITION BY d AS SELECT d, count(*) AS n FROM lake GROUP BY d")
    return client, paths


def _newest_mtime(root: Path) -> datetime:
    newest = max(p.stat().st_mtime_ns for p in root.rglob("*.parquet") if "_delta_log" not in str(p))
    return datetime.fromtimestamp(newest / 1e9, UTC).replace(tzinfo=None)


def test_tables_system_table_show_tables_and_describe_extended(make_client: Callable[..., Any], tmp_path: Path) -> None:
    client, paths = _setup(make_client, tmp_path)
    rows = {r["name"]: tuple(r) for r in client.sql("SELECT * FROM sparkmv.tables").collect()}
    assert client.sql("SELECT * FROM sparkmv.tables").columns == [
        "name",
        "kind",
        "format",
        "location",
        "catalog",
        "partition_columns",
        "last_change_seen",
        "last_version_seen",
    ]
    from deltalake import DeltaTable

    actions = pa.table(DeltaTable(str(paths["lake"])).get_add_actions(flatten=True)).to_pylist()
    delta_seen = datetime.fromtimestamp(max(a["modification_time"] for a in actions) / 1000, UTC).replace(tzinfo=None)
    assert rows == {
        "c": ("c", "EXTERNAL_TABLE", "csv", str(paths["csv"]), None, "d", None, None),
        "lake": ("lake", "EXTERNAL_TABLE", "delta", str(paths["lake"]), None, "d", delta_seen, "version 1"),
        "mv": ("mv", "MATERIALIZED_VIEW", "iceberg", None, "sparkmv", "d", None, None),
        "pq": ("pq", "EXTERNAL_TABLE", "parquet", str(paths["pq"]), None, "m", None, None),
        "rt": ("rt", "REFRESHABLE_TABLE", "iceberg", None, "sparkmv", "_vnode", None, None),
    }
    assert os.path.isdir(paths["lake"] / "_delta_log")
    assert _newest_mtime(paths["lake"]) >= delta_seen.replace(microsecond=0)

    shown = [tuple(r) for r in client.sql("SHOW TABLES").collect()]
    assert shown == [
        ("c", "EXTERNAL_TABLE", str(paths["csv"]), "d", "csv"),
        ("lake", "EXTERNAL_TABLE", str(paths["lake"]), "d", "delta"),
        ("mv", "MATERIALIZED_VIEW", None, "", "iceberg"),
        ("pq", "EXTERNAL_TABLE", str(paths["pq"]), "m", "parquet"),
        ("rt", "REFRESHABLE_TABLE", None, "_vnode", "iceberg"),
    ]

    described = [tuple(r) for r in client.sql("DESCRIBE EXTENDED lake").collect()]
    assert described == [
        ("d", "date", True),
        ("id", "bigint", False),
        ("# kind", "EXTERNAL_TABLE", None),
        ("# format", "delta", None),
        ("# location", str(paths["lake"]), None),
        ("# catalog", None, None),
        ("# partition columns", "d", None),
    ]
    assert [tuple(r) for r in client.sql("DESCRIBE TABLE EXTENDED mv").collect()][-5:] == [
        ("# kind", "MATERIALIZED_VIEW", None),
        ("# format", "iceberg", None),
        ("# location", None, None),
        ("# catalog", "sparkmv", None),
        ("# partition columns", "d", None),
    ]
    assert [tuple(r) for r in client.sql("DESCRIBE EXTENDED c").collect()][-4:-1] == [
        ("# format", "csv", None),
        ("# location", str(paths["csv"]), None),
        ("# catalog", None, None),
    ]
    assert [tuple(r) for r in client.sql("DESCRIBE c").collect()] == [
        ("id", "int", False),
        ("amount", "double", False),
        ("d", "date", True),
    ]
