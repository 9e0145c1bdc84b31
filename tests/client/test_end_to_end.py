"""End to end on small hand-made Hive-partitioned Parquet: external tables, MVs, refresh
after outside writes, nested MVs, system tables, DROP TABLE, busy refreshes."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from sparkmv.catalog import ObjectKind, RefreshState, RunState, Trigger
from sparkmv.client.client import Client
from sparkmv.errors import BusyError, ObjectNotFoundError
from sparkmv.names import ObjectName
from tests.helpers import assert_mv_matches, rows_of, write_partition

pytestmark = [pytest.mark.spark, pytest.mark.slow]

MV_QUERY = "SELECT m, region, sum(amount) AS total, count(*) AS n FROM sales GROUP BY m, region"
NESTED_QUERY = "SELECT m, sum(total) AS total, sum(n) AS n FROM by_region GROUP BY m"

MATERIALIZED_VIEWS_COLUMNS = [
    "name",
    "definition",
    "partition_by",
    "refresh_scheme",
    "state",
    "is_active",
    "inactive_reason",
    "rows",
    "last_refresh_start",
    "last_refresh_end",
    "last_refresh_state",
    "last_refresh_error",
]
TASK_RUNS_COLUMNS = [
    "run_id",
    "mv_name",
    "trigger",
    "mode",
    "state",
    "created",
    "started",
    "finished",
    "error",
    "partitions_planned",
    "partitions_done",
    "rows_written",
]


def make_sales(root: Path) -> Path:
    """Three month partitions of a small sales table (an outside writer's files)."""
    write_partition(root, "m", "2024-01", {"id": [1, 2, 3], "region": ["eu", "us", "eu"], "amount": [1.0, 2.0, 3.5]})
    write_partition(root, "m", "2024-02", {"id": [4, 5], "region": ["us", "us"], "amount": [10.0, 20.0]})
    write_partition(root, "m", "2024-03", {"id": [6], "region": ["apac"], "amount": [7.25]})
    return root


def _is_subsequence(wanted: list[str], columns: list[str]) -> bool:
    it = iter(columns)
    return all(any(c == w for c in it) for w in wanted)


def test_create_refresh_outside_writer_nested_and_system_tables(
    make_client: Callable[..., Client], tmp_path: Path
) -> None:
    sales = make_sales(tmp_path / "data" / "sales")
    client = make_client()
    msg = client.execute(f"CREATE EXTERNAL TABLE sales USING parquet LOCATION '{sales}'").message
    assert msg == "created external table 'sales' partitioned by m"
    assert [tuple(r) for r in client.sql("DESCRIBE sales").collect()] == [  # type: ignore[union-attr]
        ("id", "bigint", False),
        ("region", "string", False),
        ("amount", "double", False),
        ("m", "string", True),
    ]

    # REFRESH IMMEDIATE is the default: CREATE builds the MV.
    result = client.execute(f"CREATE MATERIALIZED VIEW by_region PARTITION BY m AS {MV_QUERY}")
    assert result.run is not None and result.run.state == RunState.SUCCESS
    assert result.message is not None and result.message.startswith(
        f"created materialized view 'by_region'; run {result.run.run_id}: SUCCESS"
    )
    assert_mv_matches(client, "by_region", MV_QUERY)
    assert client.table("by_region").count() == 4

    # Nested MV: an MV on the MV.
    nested = client.execute(f"CREATE MATERIALIZED VIEW by_month PARTITION BY m AS {NESTED_QUERY}")
    assert nested.run is not None and nested.run.state == RunState.SUCCESS
    assert_mv_matches(client, "by_month", NESTED_QUERY)
    assert rows_of(client.table("by_month")) == [("2024-01", 6.5, 3), ("2024-02", 30.0, 2), ("2024-03", 7.25, 1)]

    # An outside writer adds a file, rewrites another and adds a partition.
    write_partition(sales, "m", "2024-02", {"id": [7], "region": ["eu"], "amount": [0.5]}, file="part-1.parquet")
    write_partition(sales, "m", "2024-01", {"id": [1], "region": ["eu"], "amount": [100.0]})
    write_partition(sales, "m", "2024-04", {"id": [8], "region": ["us"], "amount": [4.0]})
    run = client.refresh("by_region")
    assert (run.state, run.error) == (RunState.SUCCESS, None)
    assert_mv_matches(client, "by_region", MV_QUERY)
    run = client.refresh("by_month")
    assert run.state == RunState.SUCCESS
    assert_mv_matches(client, "by_month", NESTED_QUERY)
    assert rows_of(client.table("by_month")) == [
        ("2024-01", 100.0, 1),
        ("2024-02", 30.5, 3),
        ("2024-03", 7.25, 1),
        ("2024-04", 4.0, 1),
    ]
    # Nothing changed: a second refresh has nothing to do and the MV stays equal.
    again = client.refresh("by_region")
    assert again.state in (RunState.SUCCESS, RunState.SKIPPED)
    assert_mv_matches(client, "by_region", MV_QUERY)

    # System tables: the original columns, in that order (columns added since may sit among them).
    mvs = client.sql("SELECT * FROM sparkmv.materialized_views ORDER BY name")
    assert mvs is not None
    assert _is_subsequence(MATERIALIZED_VIEWS_COLUMNS, mvs.columns), mvs.columns
    rows = {r["name"]: r for r in mvs.collect()}
    assert sorted(rows) == ["by_month", "by_region"]
    by_region = rows["by_region"]
    assert (by_region["definition"], by_region["partition_by"]) == (MV_QUERY, "m")
    assert by_region["refresh_scheme"] == "MANUAL"
    assert (by_region["state"], by_region["is_active"], by_region["inactive_reason"]) == ("IDLE", True, None)
    assert by_region["rows"] == client.table("by_region").count() == 5
    assert by_region["last_refresh_state"] in ("SUCCESS", "SKIPPED")
    assert by_region["last_refresh_error"] is None
    assert by_region["last_refresh_start"] <= by_region["last_refresh_end"]

    runs = client.sql("SELECT * FROM sparkmv.task_runs ORDER BY run_id")
    assert runs is not None
    assert _is_subsequence(TASK_RUNS_COLUMNS, runs.columns), runs.columns
    run_rows = runs.collect()
    assert [(r["mv_name"], r["trigger"]) for r in run_rows][:2] == [("by_region", "MANUAL"), ("by_month", "MANUAL")]
    first = run_rows[0]
    assert (first["state"], first["error"], first["partitions_planned"], first["partitions_done"]) == (
        "SUCCESS",
        None,
        3,
        3,
    )
    assert first["rows_written"] == 4
    assert first["created"] <= first["started"] <= first["finished"]
    # Projections and filters work on system tables like on any table.
    failed = client.sql("SELECT count(*) AS c FROM sparkmv.task_runs WHERE state = 'FAILED'")
    assert failed is not None and failed.collect()[0]["c"] == 0

    shown = client.sql("SHOW MATERIALIZED VIEWS")
    assert shown is not None
    assert [tuple(r) for r in shown.collect()] == [
        ("by_month", "IDLE", True, "m", "MANUAL"),
        ("by_region", "IDLE", True, "m", "MANUAL"),
    ]
    tables = client.sql("SHOW TABLES")
    assert tables is not None
    assert [(r["name"], r["kind"]) for r in tables.collect()] == [
        ("by_month", "MATERIALIZED_VIEW"),
        ("by_region", "MATERIALIZED_VIEW"),
        ("sales", "EXTERNAL_TABLE"),
    ]
    status = {s.name: s for s in client.status()}
    assert (status["by_region"].rows, status["by_region"].partitions, status["by_region"].is_fresh) == (5, 4, True)


def test_drop_external_table_keeps_files_and_marks_dependents_inactive(
    make_client: Callable[..., Client], tmp_path: Path
) -> None:
    sales = make_sales(tmp_path / "data" / "sales")
    files_before = sorted(str(p.relative_to(sales)) for p in sales.rglob("*"))
    client = make_client()
    client.sql(f"CREATE EXTERNAL TABLE sales USING parquet LOCATION '{sales}'")
    client.sql("CREATE MATERIALIZED VIEW mv REFRESH DEFERRED AS SELECT region, count(*) AS n FROM sales GROUP BY 1")
    assert client.table("mv").count() == 0  # DEFERRED: not built yet
    mv_dir = client.settings.warehouse / "default" / "mv"
    assert client.execute("DROP TABLE sales").message == "dropped 'sales'"
    assert sorted(str(p.relative_to(sales)) for p in sales.rglob("*")) == files_before
    with pytest.raises(ObjectNotFoundError, match=r"^table or view 'sales' does not exist$"):
        client.sql("SELECT * FROM sales")
    status = {s.name: s for s in client.status()}
    assert (status["mv"].is_active, status["mv"].inactive_reason) == (False, "base table 'sales' was dropped")
    assert client.execute("DROP TABLE IF EXISTS sales").message == "'sales' does not exist"
    # Re-register the same files: the data is all still there.
    client.sql(f"CREATE EXTERNAL TABLE sales USING parquet LOCATION '{sales}'")
    count = client.sql("SELECT count(*) AS c FROM sales")
    assert count is not None and count.collect()[0]["c"] == 6
    # DROP MATERIALIZED VIEW deletes the MV's own data.
    assert any(mv_dir.iterdir())
    assert client.execute("DROP MATERIALIZED VIEW mv").message == "dropped 'mv'"
    assert not mv_dir.exists()


def test_second_refresh_while_busy_raises_busy_error(make_client: Callable[..., Client], tmp_path: Path) -> None:
    sales = make_sales(tmp_path / "data" / "sales")
    client = make_client()
    client.sql(f"CREATE EXTERNAL TABLE sales USING parquet LOCATION '{sales}'")
    client.sql(f"CREATE MATERIALIZED VIEW by_region PARTITION BY m AS {MV_QUERY}")
    before = rows_of(client.table("by_region"))
    catalog = client.runtime.catalog
    name = ObjectName("default", "by_region")
    with catalog.transaction() as s:
        row = catalog.objects.get(s, name, ObjectKind.MATERIALIZED_VIEW)
        run = catalog.runs.create(s, row.id, "by_region", Trigger.MANUAL, RunState.RUNNING)
        catalog.objects.begin_refresh(s, row, run.run_id, "otherhost:4242:1700000000", 600)
        run_id = run.run_id
    with catalog.transaction() as s:
        runs_before = len(catalog.runs.list(s))
    pattern = (
        rf"^MV 'by_region' is being refreshed \(state REFRESHING, run {run_id}, owner otherhost:4242, "
        r"since \d{4}-\d\d-\d\d \d\d:\d\d:\d\d\)$"
    )
    with pytest.raises(BusyError, match=pattern):
        client.refresh("by_region")
    with pytest.raises(BusyError, match=pattern):
        client.sql("REFRESH MATERIALIZED VIEW by_region WITH SYNC MODE")
    drop_busy = rf"^cannot drop 'by_region': it is being refreshed \(state REFRESHING, run {run_id}\)$"
    with pytest.raises(BusyError, match=drop_busy):
        client.sql("DROP MATERIALIZED VIEW by_region")
    # Nothing changed: the state is held by the other run, no run was added, the MV is readable.
    with catalog.transaction() as s:
        row = catalog.objects.get(s, name)
        assert (row.state, row.current_run_id) == (RefreshState.REFRESHING, run_id)
        assert len(catalog.runs.list(s)) == runs_before
    assert rows_of(client.table("by_region")) == before
    # Once the other run is done, a refresh goes through.
    with catalog.transaction() as s:
        catalog.objects.transition(
            s, row.id, run_id, "otherhost:4242:1700000000", RefreshState.REFRESHING, RefreshState.IDLE, 600
        )
    assert client.refresh("by_region").state in (RunState.SUCCESS, RunState.SKIPPED)


def test_failed_refresh_leaves_mv_unchanged(make_client: Callable[..., Client], tmp_path: Path) -> None:
    sales = make_sales(tmp_path / "data" / "sales")
    client = make_client()
    client.sql(f"CREATE EXTERNAL TABLE sales USING parquet LOCATION '{sales}'")
    client.sql(f"CREATE MATERIALIZED VIEW by_region PARTITION BY m AS {MV_QUERY}")
    before = rows_of(client.table("by_region"))
    # The outside writer leaves a corrupt file behind.
    (sales / "m=2024-02" / "part-9.parquet").write_bytes(b"this is not parquet")
    run = client.refresh("by_region")
    assert run.state == RunState.FAILED
    assert run.error is not None
    assert run.error.startswith("[FAILED_READ_FILE.NO_HINT] Encountered error while reading file")
    assert "m=2024-02/part-9.parquet" in run.error
    assert rows_of(client.table("by_region")) == before
    status = {s.name: s for s in client.status()}["by_region"]
    assert (status.state, status.last_refresh_state, status.last_refresh_error) == ("IDLE", "FAILED", run.error)
    # Fixed by the writer: the next refresh succeeds and is equal again.
    os.remove(sales / "m=2024-02" / "part-9.parquet")
    pq.write_table(pa.table({"id": [9], "region": ["eu"], "amount": [1.0]}), sales / "m=2024-02" / "part-9.parquet")
    assert client.refresh("by_region").state == RunState.SUCCESS
    assert_mv_matches(client, "by_region", MV_QUERY)
