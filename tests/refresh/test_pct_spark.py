"""Partition change tracking end to end with Spark: each test checks the MV against its
query recomputed from scratch and which MV partitions a run rewrote (Iceberg partition
metadata: ``last_updated_snapshot_id`` among the run's snapshots)."""

from __future__ import annotations

import shutil
import time
from datetime import date, timedelta
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from sparkmv.errors import AnalysisError, InactiveError
from sparkmv.names import ObjectName
from sparkmv.storage.iceberg import RUN_ID_PROPERTY, IcebergStore
from tests.helpers import assert_mv_matches, write_partition

DAYS = ["2024-01-01", "2024-01-02", "2024-01-03", "2024-01-04", "2024-01-05"]
DAILY = "SELECT d, count(*) AS n, sum(amount) AS total FROM sales GROUP BY d"


def rows(k: int, amount: int, n: int = 3) -> dict[str, list[Any]]:
    return {"k": [k * 10 + i for i in range(n)], "amount": [amount + i for i in range(n)]}


def write_days(root: Path, days: list[str], amount: int = 1, file: str = "part-0.parquet") -> None:
    for i, day in enumerate(days):
        write_partition(root, "d", day, rows(i, amount), file)


def run_snapshots(client: Any, mv: str, run_id: int) -> list[Any]:
    table = client.runtime.iceberg.load(ObjectName.parse(mv))
    return [s for s in table.snapshots() if s.summary is not None and s.summary.get(RUN_ID_PROPERTY) == str(run_id)]


def rewritten(client: Any, mv: str, run_id: int) -> set[str | None]:
    """MV partitions whose current files were written by run ``run_id``."""
    snaps = {s.snapshot_id for s in run_snapshots(client, mv, run_id)}
    table = client.runtime.iceberg.load(ObjectName.parse(mv))
    return {p.value for p in IcebergStore.partitions(table) if p.last_updated_snapshot_id in snaps}


def partitions(client: Any, mv: str) -> set[str | None]:
    return {p.value for p in IcebergStore.partitions(client.runtime.iceberg.load(ObjectName.parse(mv)))}


def versions(client: Any, mv: str) -> dict[tuple[str, str], str]:
    rt = client.runtime
    with rt.catalog.transaction() as s:
        row = rt.catalog.objects.get(s, ObjectName.parse(mv))
        return {k: v.version for k, v in rt.catalog.versions.load(s, row.id).items()}


def status(client: Any, mv: str) -> dict[str, Any]:
    row = client.sql(f"SELECT * FROM sparkmv.materialized_views WHERE name = '{mv}'").collect()
    assert len(row) == 1
    return row[0].asDict()


def refresh(client: Any, statement: str) -> Any:
    run = client.execute(statement).run
    assert run is not None
    return run


@pytest.fixture
def sales(client: Any, tmp_path: Path) -> Path:
    root = tmp_path / "sales"
    write_days(root, DAYS)
    client.sql(f"CREATE EXTERNAL TABLE sales USING parquet LOCATION '{root}'")
    return root


def test_daily_chunks_single_day_no_change_force_range_status_explain(client: Any, sales: Path) -> None:
    client.sql(
        "CREATE MATERIALIZED VIEW daily PARTITION BY d REFRESH DEFERRED REFRESH MANUAL "
        "PROPERTIES ('partition_refresh_strategy' = 'STRICT', 'partition_refresh_number' = '2') AS " + DAILY
    )
    first = refresh(client, "REFRESH MATERIALIZED VIEW daily")
    assert (first.state, first.mode, first.chunks_done, first.partitions_done) == ("SUCCESS", "FULL", 3, 5)
    assert [c["partitions"] for c in client.chunks(first.run_id)] == [DAYS[0:2], DAYS[2:4], DAYS[4:5]]
    assert rewritten(client, "daily", first.run_id) == set(DAYS)
    assert_mv_matches(client, "daily", DAILY)
    st = status(client, "daily")
    assert st["is_fresh"] and st["stale_partitions"] == 0 and st["staleness_seconds"] == 0
    assert st["last_refresh_mv_partitions"] == 5 and st["last_refresh_base_partitions"] == 5

    # Insert into one day: only that MV partition is rewritten.
    write_partition(sales, "d", DAYS[2], rows(7, 100), "part-1.parquet")
    st = status(client, "daily")
    assert not st["is_fresh"] and st["stale_partitions"] == 1 and st["staleness_seconds"] >= 0
    explain = client.execute("EXPLAIN REFRESH MATERIALIZED VIEW daily").message or ""
    assert "mode: PCT" in explain and f"default.sales: d={DAYS[2]}" in explain
    assert f"{DAYS[2]}: default.sales partition d={DAYS[2]} changed" in explain
    assert "chunks: 1" in explain and f"chunk 0: {DAYS[2]}" in explain
    run = refresh(client, "REFRESH MATERIALIZED VIEW daily")
    assert (run.state, run.mode, run.partitions_done, run.chunks_done) == ("SUCCESS", "PCT", 1, 1)
    assert rewritten(client, "daily", run.run_id) == {DAYS[2]}
    summary = run_snapshots(client, "daily", run.run_id)[-1].summary
    assert summary is not None and summary.get("changed-partition-count") == "1"
    assert_mv_matches(client, "daily", DAILY)
    st = status(client, "daily")
    assert st["is_fresh"] and st["last_refresh_mv_partitions"] == 1 and st["last_refresh_base_partitions"] == 1

    # No change: no Spark job, SKIPPED 'up to date', fast.
    sc = client.spark.sparkContext
    sc.setJobGroup("pct-test-noop", "no-change refresh", False)
    started = time.monotonic()
    noop = client.refresh("daily")
    elapsed = time.monotonic() - started
    sc.setLocalProperty("spark.jobGroup.id", None)
    assert (noop.state, noop.reason) == ("SKIPPED", "up to date")
    assert list(sc.statusTracker().getJobIdsForGroup("pct-test-noop")) == []
    assert list(sc.statusTracker().getJobIdsForGroup(f"sparkmv-run-{noop.run_id}")) == []
    assert elapsed < 2.0

    # FORCE on unchanged data: every partition in range rewritten, same contents.
    before = sorted(map(tuple, client.table("daily").collect()))
    forced = refresh(client, "REFRESH MATERIALIZED VIEW daily FORCE")
    assert forced.state == "SUCCESS" and rewritten(client, "daily", forced.run_id) == set(DAYS)
    assert sorted(map(tuple, client.table("daily").collect())) == before
    ranged_force = refresh(
        client, f"REFRESH MATERIALIZED VIEW daily PARTITION START ('{DAYS[1]}') END ('{DAYS[3]}') FORCE"
    )
    assert rewritten(client, "daily", ranged_force.run_id) == set(DAYS[1:3])

    # START/END: only changed partitions inside the range; the rest later.
    write_partition(sales, "d", DAYS[0], rows(8, 5), "part-2.parquet")
    write_partition(sales, "d", DAYS[3], rows(9, 5), "part-2.parquet")
    inside = refresh(client, f"REFRESH MATERIALIZED VIEW daily PARTITION START ('{DAYS[2]}') END ('{DAYS[4]}')")
    assert inside.state == "SUCCESS" and rewritten(client, "daily", inside.run_id) == {DAYS[3]}
    assert status(client, "daily")["stale_partitions"] == 1
    rest = refresh(client, "REFRESH MATERIALIZED VIEW daily")
    assert rewritten(client, "daily", rest.run_id) == {DAYS[0]}
    assert_mv_matches(client, "daily", DAILY)

    # ALTER ... SET PROPERTIES changes the chunking of the next refresh.
    client.sql("ALTER MATERIALIZED VIEW daily SET PROPERTIES ('partition_refresh_number' = '5')")
    again = client.refresh("daily", force=True)
    assert again.chunks_done == 1 and again.partitions_done == 5


def test_month_rollup_and_dropped_base_partitions(client: Any, tmp_path: Path) -> None:
    root = tmp_path / "sales"
    days = ["2024-01-30", "2024-01-31", "2024-02-01", "2024-02-02", "2024-03-01"]
    write_days(root, days)
    client.sql(f"CREATE EXTERNAL TABLE sales USING parquet LOCATION '{root}'")
    by_format = "SELECT date_format(d, 'yyyy-MM') AS m, count(*) AS n, sum(amount) AS total FROM sales GROUP BY 1"
    by_substr = "SELECT substr(d, 1, 7) AS m, sum(amount) AS total FROM sales GROUP BY 1"
    client.sql(f"CREATE MATERIALIZED VIEW monthly PARTITION BY m AS {by_format}")
    client.sql(f"CREATE MATERIALIZED VIEW monthly2 PARTITION BY m AS {by_substr}")
    assert partitions(client, "monthly") == {"2024-01", "2024-02", "2024-03"}

    write_partition(root, "d", "2024-02-02", rows(5, 50), "part-1.parquet")
    # Spark casts a DATE to text for substr; DuckDB wants the cast written.
    duck_substr = "SELECT substr(CAST(d AS VARCHAR), 1, 7) AS m, sum(amount) AS total FROM sales GROUP BY 1"
    for mv, query, duck in (("monthly", by_format, None), ("monthly2", by_substr, duck_substr)):
        run = client.refresh(mv)
        assert (run.mode, run.partitions_done) == ("PCT", 1)
        assert rewritten(client, mv, run.run_id) == {"2024-02"}
        assert_mv_matches(client, mv, query, duck)

    # One of January's days vanishes: January is recomputed from the other day.
    shutil.rmtree(root / "d=2024-01-31")
    run = client.refresh("monthly")
    assert rewritten(client, "monthly", run.run_id) == {"2024-01"}
    assert_mv_matches(client, "monthly", by_format)
    # March's only day vanishes: March is removed.
    shutil.rmtree(root / "d=2024-03-01")
    run = client.refresh("monthly")
    assert run.state == "SUCCESS" and run.partitions_done == 1
    assert partitions(client, "monthly") == {"2024-01", "2024-02"}
    assert_mv_matches(client, "monthly", by_format)
    assert not any(path == "d=2024-03-01" for _, path in versions(client, "monthly"))


def test_fact_joined_with_unpartitioned_dimension(client: Any, tmp_path: Path) -> None:
    fact = tmp_path / "fact"
    write_days(fact, DAYS[:3])
    dim = tmp_path / "dim"
    dim.mkdir()
    pa_table = pa.table({"k": list(range(40)), "grp": [f"g{i % 3}" for i in range(40)]})
    import pyarrow.parquet as pq

    pq.write_table(pa_table, dim / "part-0.parquet")
    client.sql(f"CREATE EXTERNAL TABLE fact USING parquet LOCATION '{fact}'")
    client.sql(f"CREATE EXTERNAL TABLE dim USING parquet LOCATION '{dim}'")
    query = "SELECT f.d, g.grp, sum(f.amount) AS total FROM fact f JOIN dim g ON f.k = g.k GROUP BY f.d, g.grp"
    client.sql(f"CREATE MATERIALIZED VIEW joined PARTITION BY d AS {query}")
    assert_mv_matches(client, "joined", query)

    pq.write_table(pa.table({"k": list(range(40)), "grp": [f"h{i % 2}" for i in range(40)]}), dim / "part-0.parquet")
    run = client.refresh("joined")
    assert run.mode == "PCT" and rewritten(client, "joined", run.run_id) == set(DAYS[:3])
    assert_mv_matches(client, "joined", query)
    assert client.refresh("joined").state == "SKIPPED"  # the dimension's version was consumed

    write_partition(fact, "d", DAYS[1], rows(3, 9), "part-1.parquet")
    run = client.refresh("joined")
    assert rewritten(client, "joined", run.run_id) == {DAYS[1]}
    assert_mv_matches(client, "joined", query)


def test_union_all_of_two_partitioned_tables(client: Any, tmp_path: Path) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    write_days(a, DAYS[:3])
    write_days(b, DAYS[2:], amount=50)
    client.sql(f"CREATE EXTERNAL TABLE online USING parquet LOCATION '{a}'")
    client.sql(f"CREATE EXTERNAL TABLE stores USING parquet LOCATION '{b}'")
    query = (
        "SELECT d, sum(amount) AS total, count(*) AS n FROM "
        "(SELECT d, amount FROM online UNION ALL SELECT d, amount FROM stores) u GROUP BY d"
    )
    client.sql(f"CREATE MATERIALIZED VIEW both_channels PARTITION BY d AS {query}")
    assert partitions(client, "both_channels") == set(DAYS)
    write_partition(b, "d", DAYS[4], rows(4, 7), "part-1.parquet")
    write_partition(a, "d", DAYS[0], rows(4, 7), "part-1.parquet")
    run = client.refresh("both_channels")
    assert run.mode == "PCT" and rewritten(client, "both_channels", run.run_id) == {DAYS[0], DAYS[4]}
    assert_mv_matches(client, "both_channels", query)


def test_ttl_drops_old_partitions(client: Any, tmp_path: Path) -> None:
    today = date.today()
    days = [(today - timedelta(days=n)).isoformat() for n in (20, 10, 1, 0)]
    root = tmp_path / "sales"
    write_days(root, days)
    client.sql(f"CREATE EXTERNAL TABLE sales USING parquet LOCATION '{root}'")
    client.sql(f"CREATE MATERIALIZED VIEW daily PARTITION BY d AS {DAILY}")
    assert partitions(client, "daily") == set(days)
    client.sql("ALTER MATERIALIZED VIEW daily SET PROPERTIES ('partition_ttl' = '5 DAY')")
    run = client.refresh("daily")  # no base change: the TTL still drops
    assert run.state == "SUCCESS" and partitions(client, "daily") == set(days[2:])
    write_partition(root, "d", days[0], rows(1, 3), "part-1.parquet")  # late data, outside the TTL
    late = client.refresh("daily")
    assert late.state == "SKIPPED" and partitions(client, "daily") == set(days[2:])
    assert status(client, "daily")["is_fresh"]
    expected = f"SELECT * FROM ({DAILY}) q WHERE d >= '{days[2]}'"
    assert_mv_matches(client, "daily", expected)


def test_failure_in_chunk_two_keeps_versions_and_next_refresh_recovers(client: Any, sales: Path) -> None:
    client.sql(
        "CREATE MATERIALIZED VIEW daily PARTITION BY d "
        "PROPERTIES ('partition_refresh_strategy' = 'STRICT', 'partition_refresh_number' = '2') AS " + DAILY
    )
    before = versions(client, "daily")
    write_days(sales, DAYS, amount=1000, file="part-1.parquet")
    (sales / f"d={DAYS[2]}" / "part-1.parquet").write_bytes(b"this is not a parquet file" * 10)
    failed = client.refresh("daily")
    assert failed.state == "FAILED" and failed.chunks_planned == 3 and failed.chunks_done == 1
    assert versions(client, "daily") == before
    assert rewritten(client, "daily", failed.run_id) == set()
    assert status(client, "daily")["stale_partitions"] == 5
    write_partition(sales, "d", DAYS[2], rows(2, 1000), "part-1.parquet")  # repaired
    run = client.refresh("daily")
    assert run.state == "SUCCESS" and rewritten(client, "daily", run.run_id) == set(DAYS)
    assert_mv_matches(client, "daily", DAILY)


def test_inactive_on_dropped_base_and_on_schema_change(client: Any, sales: Path) -> None:
    client.sql(f"CREATE MATERIALIZED VIEW daily PARTITION BY d AS {DAILY}")
    client.sql("DROP TABLE sales")
    st = status(client, "daily")
    assert not st["is_active"] and "dropped" in st["inactive_reason"]
    with pytest.raises(InactiveError, match="dropped"):
        client.refresh("daily")
    assert client.table("daily").count() == 5  # still readable
    with pytest.raises(AnalysisError, match="does not exist"):
        client.sql("ALTER MATERIALIZED VIEW daily ACTIVE")
    client.sql(f"CREATE EXTERNAL TABLE sales USING parquet LOCATION '{sales}'")
    client.sql("ALTER MATERIALIZED VIEW daily ACTIVE")
    run = client.refresh("daily")
    assert (run.state, run.mode) == ("SUCCESS", "FULL")
    assert_mv_matches(client, "daily", DAILY)

    # New files whose 'amount' is text: the MV turns inactive at planning, with the reason.
    write_partition(sales, "d", DAYS[1], {"k": [1], "amount": ["lots"]}, "part-9.parquet")
    failed = client.refresh("daily")
    assert failed.state == "FAILED" and "schema of base table 'default.sales' changed" in (failed.error or "")
    st = status(client, "daily")
    assert not st["is_active"] and "column 'amount' is string" in st["inactive_reason"]
    with pytest.raises(InactiveError, match="schema"):
        client.refresh("daily")
    with pytest.raises(AnalysisError, match="column 'amount' is string"):
        client.sql("ALTER MATERIALIZED VIEW daily ACTIVE")
    (sales / f"d={DAYS[1]}" / "part-9.parquet").unlink()
    client.sql("ALTER MATERIALIZED VIEW daily ACTIVE")
    assert client.refresh("daily").state == "SUCCESS"
    assert_mv_matches(client, "daily", DAILY)


def test_iceberg_base_table_written_with_pyarrow(client: Any) -> None:
    from pyiceberg.partitioning import PartitionField, PartitionSpec
    from pyiceberg.schema import Schema
    from pyiceberg.transforms import IdentityTransform
    from pyiceberg.types import LongType, NestedField, StringType

    catalog = client.runtime.iceberg.catalog
    if ("default",) not in catalog.list_namespaces():
        catalog.create_namespace("default")
    schema = Schema(
        NestedField(1, "d", StringType(), required=False),
        NestedField(2, "amount", LongType(), required=False),
    )
    spec = PartitionSpec(PartitionField(source_id=1, field_id=1000, transform=IdentityTransform(), name="d"))
    table = catalog.create_table("default.events", schema=schema, partition_spec=spec)
    arrow_schema = pa.schema([("d", pa.string()), ("amount", pa.int64())])
    table.append(pa.table({"d": [d for d in DAYS for _ in range(2)], "amount": list(range(10))}, schema=arrow_schema))
    query = "SELECT d, sum(amount) AS total, count(*) AS n FROM events GROUP BY d"
    client.sql(f"CREATE MATERIALIZED VIEW ev PARTITION BY d AS {query}")
    assert partitions(client, "ev") == set(DAYS)
    vmap = versions(client, "ev")
    assert vmap[("default.events", f"d={DAYS[0]}")] == str(table.current_snapshot().snapshot_id)  # type: ignore[union-attr]

    table = catalog.load_table("default.events")
    table.append(pa.table({"d": [DAYS[3]], "amount": [1000]}, schema=arrow_schema))
    run = client.refresh("ev")
    assert (run.mode, run.partitions_done) == ("PCT", 1)
    assert rewritten(client, "ev", run.run_id) == {DAYS[3]}
    assert_mv_matches(client, "ev", query)
    assert client.refresh("ev").state == "SKIPPED"
