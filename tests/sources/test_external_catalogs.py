"""External Iceberg catalogs end to end with Spark: a pyiceberg SQL catalog (SQLite, and
PostgreSQL) written by pyiceberg as an outside writer would, an MV over ``lake.db.events``
partitioned by ``days(ts)``, PCT of one changed day, and bad input."""

from __future__ import annotations

import re
import sqlite3
from datetime import datetime
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pytest
from pyiceberg.catalog.sql import SqlCatalog
from pyiceberg.partitioning import PartitionField, PartitionSpec
from pyiceberg.schema import Schema
from pyiceberg.transforms import BucketTransform, DayTransform
from pyiceberg.types import LongType, NestedField, StringType, TimestampType

from sparkmv.demo.iceberg_deletes import delete_rows
from sparkmv.errors import AnalysisError, ObjectExistsError, ObjectNotFoundError, SparkMvError
from sparkmv.names import ObjectName
from sparkmv.storage.iceberg import RUN_ID_PROPERTY, IcebergStore
from tests.helpers import rows_of

SCHEMA = Schema(
    NestedField(1, "ts", TimestampType(), required=False),
    NestedField(2, "k", StringType(), required=False),
    NestedField(3, "amount", LongType(), required=False),
)
ARROW = pa.schema([("ts", pa.timestamp("us")), ("k", pa.string()), ("amount", pa.int64())])
MONTHLY = (
    "SELECT date_trunc('month', ts) AS month, k, sum(amount) AS total, count(*) AS n "
    "FROM lake.db.events GROUP BY date_trunc('month', ts), k"
)


def batch(rows: list[tuple[str, str, int]]) -> pa.Table:
    return pa.Table.from_pylist(
        [{"ts": datetime.fromisoformat(t), "k": k, "amount": a} for t, k, a in rows], schema=ARROW
    )


def outside_catalog(uri: str, warehouse: Path) -> SqlCatalog:
    """The catalog as another engine would use it (its own pyiceberg connection)."""
    warehouse.mkdir(parents=True, exist_ok=True)
    return SqlCatalog("lake", uri=uri, warehouse=warehouse.as_uri())


def make_events(cat: SqlCatalog, transform: Any = None) -> Any:
    cat.create_namespace_if_not_exists("db")
    spec = PartitionSpec(PartitionField(1, 1000, transform or DayTransform(), "ts_part"))
    table = cat.create_table(("db", "events"), schema=SCHEMA, partition_spec=spec)
    table.append(
        batch(
            [
                ("2024-01-05 10:00:00", "a", 1),
                ("2024-01-05 23:59:59", "b", 2),
                ("2024-01-20 01:00:00", "a", 3),
                ("2024-02-03 12:00:00", "a", 4),
                ("2024-03-01 00:00:00", "b", 5),
            ]
        )
    )
    return table


def catalog_sql(uri: str, warehouse: Path) -> str:
    return (
        'CREATE EXTERNAL CATALOG lake PROPERTIES ("type" = "iceberg", "iceberg.catalog.type" = "sql", '
        f'"uri" = "{uri}", "warehouse" = "{warehouse.as_uri()}")'
    )


def recomputed(spark: Any, table: Any, query: str) -> list[tuple[Any, ...]]:
    """``query`` over what pyiceberg reads of the table now (deletes applied), without sparkmv."""
    table.refresh()
    spark.createDataFrame(table.scan().to_arrow()).createOrReplaceTempView("events_now")
    return rows_of(spark.sql(query.replace("lake.db.events", "events_now")))


def mv_rows(client: Any, mv: str) -> list[tuple[Any, ...]]:
    return rows_of(client.table(mv).select("month", "k", "total", "n"))


def rewritten(client: Any, mv: str, run_id: int) -> set[str | None]:
    table = client.runtime.iceberg.load(ObjectName.parse(mv))
    snaps = {s.snapshot_id for s in table.snapshots() if s.summary and s.summary.get(RUN_ID_PROPERTY) == str(run_id)}
    return {p.value for p in IcebergStore.partitions(table) if p.last_updated_snapshot_id in snaps}


def refresh(client: Any, mv: str) -> Any:
    run = client.execute(f"REFRESH MATERIALIZED VIEW {mv}").run
    assert run is not None and run.state == "SUCCESS", run
    return run


def _pct_one_day(client: Any, spark: Any, uri: str, warehouse: Path) -> Any:
    cat = outside_catalog(uri, warehouse)
    events = make_events(cat)
    assert "created external catalog 'lake' (sql)" in (client.execute(catalog_sql(uri, warehouse)).message or "")
    client.execute("CREATE MATERIALIZED VIEW monthly PARTITION BY month AS " + MONTHLY)
    assert mv_rows(client, "monthly") == recomputed(spark, events, MONTHLY)

    # An outside writer appends to one day of February: only the February MV partition.
    cat.load_table(("db", "events")).append(batch([("2024-02-03 18:00:00", "c", 100)]))
    explain = client.execute("EXPLAIN REFRESH MATERIALIZED VIEW monthly").message or ""
    assert "mode: PCT" in explain, explain
    run = refresh(client, "monthly")
    assert (run.mode, run.partitions_done) == ("PCT", 1)
    assert rewritten(client, "monthly", run.run_id) == {"2024-02-01 00:00:00"}
    assert mv_rows(client, "monthly") == recomputed(spark, events, MONTHLY)
    return cat


def test_pct_of_one_changed_day_sqlite(make_client: Any, spark: Any, tmp_path: Path) -> None:
    client = make_client()
    cat = _pct_one_day(client, spark, f"sqlite:///{tmp_path}/lake.db", tmp_path / "lakewh")
    rows = client.execute("SHOW CATALOGS").rows
    assert rows is not None and [r[:3] for r in rows.rows] == [("lake", "iceberg", "sql")]
    # Nothing changed since: the next refresh has nothing to do.
    run = client.execute("REFRESH MATERIALIZED VIEW monthly").run
    assert run is not None and run.partitions_done == 0
    with pytest.raises(AnalysisError, match="cannot drop catalog 'lake': materialized view 'monthly' reads"):
        client.execute("DROP CATALOG lake")
    client.execute("DROP MATERIALIZED VIEW monthly")
    assert client.execute("DROP CATALOG lake").message == "dropped catalog 'lake'"
    assert cat.table_exists(("db", "events"))  # never the catalog's tables
    rows = client.execute("SHOW CATALOGS").rows
    assert rows is not None and rows.rows == []


@pytest.mark.postgres
def test_pct_of_one_changed_day_postgres(make_client: Any, spark: Any, tmp_path: Path, pg_url: str) -> None:
    client = make_client()
    _pct_one_day(client, spark, pg_url, tmp_path / "lakewh")


def test_bad_input_registers_nothing(make_client: Any, tmp_path: Path) -> None:
    client = make_client()
    uri = f"sqlite:///{tmp_path}/lake.db"
    make_events(outside_catalog(uri, tmp_path / "lakewh"))

    def catalogs() -> list[Any]:
        rows = client.execute("SHOW CATALOGS").rows
        assert rows is not None
        return rows.rows

    unknown = "catalog 'x': unknown iceberg.catalog.type 'nessie'; use one of sql, rest, hive, glue"
    with pytest.raises(SparkMvError, match=re.escape(unknown)):
        client.execute('CREATE EXTERNAL CATALOG x PROPERTIES ("type" = "iceberg", "iceberg.catalog.type" = "nessie")')
    with pytest.raises(SparkMvError, match="catalog 'x': unsupported catalog type 'hive'"):
        client.execute('CREATE EXTERNAL CATALOG x PROPERTIES ("type" = "hive")')
    empty = tmp_path / "not_a_catalog.db"
    with pytest.raises(SparkMvError, match=r"catalog 'x' is unreachable: .*no such table"):
        client.execute(catalog_sql(f"sqlite:///{empty}", tmp_path / "w").replace("lake", "x", 1))
    with sqlite3.connect(empty) as conn:  # nothing was created in it
        assert conn.execute("SELECT count(*) FROM sqlite_master").fetchone() == (0,)
    with pytest.raises(SparkMvError, match="catalog 'x' is unreachable"):
        client.execute(
            'CREATE EXTERNAL CATALOG x PROPERTIES ("type" = "iceberg", "iceberg.catalog.type" = "rest", '
            '"uri" = "http://127.0.0.1:9")'
        )
    secret = (
        "catalog 'x': property 'password' looks like a secret; give it as an environment variable "
        "reference 'env:NAME', never in clear text"
    )
    with pytest.raises(SparkMvError, match=re.escape(secret)):
        client.execute(
            'CREATE EXTERNAL CATALOG x PROPERTIES ("type" = "iceberg", "iceberg.catalog.type" = "sql", '
            f'"uri" = "{uri}", "password" = "hunter2")'
        )
    assert catalogs() == []
    client.execute(catalog_sql(uri, tmp_path / "lakewh"))
    with pytest.raises(ObjectExistsError, match="catalog 'lake' already exists"):
        client.execute(catalog_sql(uri, tmp_path / "lakewh"))
    with pytest.raises(ObjectNotFoundError, match="catalog 'nope' does not exist"):
        client.execute("DROP CATALOG nope")
    for query, message in [
        ("SELECT * FROM lake.db.nope", "table 'lake.db.nope' does not exist in catalog 'lake'"),
        ("SELECT * FROM other.db.events", "catalog 'other' of table 'other.db.events' does not exist"),
        ("SELECT * FROM a.lake.db.events", "has too many parts"),
    ]:
        with pytest.raises(SparkMvError, match=message):
            client.execute("CREATE MATERIALIZED VIEW m AS " + query)
        assert client.execute("SHOW MATERIALIZED VIEWS").rows.rows == []  # type: ignore[union-attr]


def test_bucket_partitioned_table_is_no_reference_table(make_client: Any, spark: Any, tmp_path: Path) -> None:
    client = make_client()
    uri = f"sqlite:///{tmp_path}/lake.db"
    cat = outside_catalog(uri, tmp_path / "lakewh")
    events = make_events(cat, BucketTransform(4))
    client.execute(catalog_sql(uri, tmp_path / "lakewh"))
    client.execute("CREATE MATERIALIZED VIEW monthly PARTITION BY month AS " + MONTHLY)
    cat.load_table(("db", "events")).append(batch([("2024-02-03 18:00:00", "c", 100)]))
    explain = client.execute("EXPLAIN REFRESH MATERIALIZED VIEW monthly").message or ""
    assert "is partitioned by bucket[4](ts): not a transform partition change tracking can map" in explain, explain
    refresh(client, "monthly")
    assert mv_rows(client, "monthly") == recomputed(spark, events, MONTHLY)


def test_position_deletes_read_through_pyiceberg(make_client: Any, spark: Any, tmp_path: Path) -> None:
    client = make_client()
    uri, warehouse = f"sqlite:///{tmp_path}/lake.db", tmp_path / "lakewh"
    cat = outside_catalog(uri, warehouse)
    events = make_events(cat)
    client.execute(catalog_sql(uri, warehouse))
    client.execute("CREATE MATERIALIZED VIEW monthly PARTITION BY month AS " + MONTHLY)

    # An outside row-level delete (merge-on-read): position delete files on 2024-01-05 and 2024-03-01.
    assert delete_rows(cat.load_table(("db", "events")), lambda rows: pc.equal(rows["k"], "b")) == 2
    events.refresh()
    run = refresh(client, "monthly")
    assert (run.mode, run.partitions_done) == ("PCT", 2)
    # January is rewritten; March held only deleted rows, so its MV partition is gone.
    assert rewritten(client, "monthly", run.run_id) == {"2024-01-01 00:00:00"}
    mv = client.runtime.iceberg.load(ObjectName.parse("monthly"))
    assert {p.value for p in IcebergStore.partitions(mv)} == {"2024-01-01 00:00:00", "2024-02-01 00:00:00"}
    assert mv_rows(client, "monthly") == recomputed(spark, events, MONTHLY)

    # Past the catalog's sparkmv.max-delete-files the refresh fails, naming table and count.
    # The SQL catalog keeps tables per catalog name: "strict" reads the tables pyiceberg wrote as "lake".
    extra = ', "iceberg.catalog.name" = "lake", "sparkmv.max-delete-files" = "1")'
    client.execute(catalog_sql(uri, warehouse).replace("lake", "strict", 1).removesuffix(")") + extra)
    created = client.execute(
        "CREATE MATERIALIZED VIEW strict_mv AS SELECT k, sum(amount) AS s FROM strict.db.events GROUP BY k"
    )
    assert created.run is not None and created.run.state == "FAILED"
    assert (
        f"base table 'strict.db.events' has 2 delete files at snapshot {events.current_snapshot().snapshot_id}, "
        "more than "
        "sparkmv.max-delete-files = 1 of catalog 'strict'"
    ) in (created.run.error or "")


def test_incremental_refresh_reads_the_appended_files(make_client: Any, spark: Any, tmp_path: Path) -> None:
    client = make_client()
    uri, warehouse = f"sqlite:///{tmp_path}/lake.db", tmp_path / "lakewh"
    cat = outside_catalog(uri, warehouse)
    events = make_events(cat)
    client.execute(catalog_sql(uri, warehouse))
    totals = "SELECT k, sum(amount) AS total, count(*) AS n FROM lake.db.events GROUP BY k"
    client.execute("CREATE MATERIALIZED VIEW totals PROPERTIES ('refresh_mode' = 'INCREMENTAL') AS " + totals)
    cat.load_table(("db", "events")).append(batch([("2024-02-03 18:00:00", "a", 100), ("2024-04-01 00:00:00", "c", 7)]))
    st = client.sql("SELECT stale_partitions, is_fresh FROM sparkmv.materialized_views WHERE name = 'totals'")
    assert [tuple(r) for r in st.collect()] == [(2, False)]  # two base partitions (days) changed
    run = refresh(client, "totals")
    assert run.mode == "INCREMENTAL"
    assert rows_of(client.table("totals").select("k", "total", "n")) == recomputed(spark, events, totals)
