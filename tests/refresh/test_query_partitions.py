"""One regression test per class of failure of partitioned MVs: an MV equals its query for every
partition type and shape. Each test checks the exact MV partitions a run rewrote (Iceberg
partition metadata and the snapshot summary's ``changed-partition-count``) and the MV's
contents against its query recomputed from scratch."""

from __future__ import annotations

import shutil
from datetime import date, timedelta
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from sparkmv.errors import AnalysisError, InactiveError, InvalidPropertyError
from sparkmv.names import ObjectName
from sparkmv.storage.iceberg import IcebergStore
from tests.helpers import assert_mv_matches, write_partition
from tests.refresh.test_pct_spark import partitions, rewritten, run_snapshots


def changed_count(client: Any, mv: str, run_id: int) -> int:
    """``changed-partition-count`` of the run's last snapshot."""
    summary = run_snapshots(client, mv, run_id)[-1].summary
    assert summary is not None
    return int(summary.get("changed-partition-count") or 0)


def kind(client: Any, mv: str) -> str | None:
    """Kind of the MV's partition values, from its Iceberg partition column type."""
    return IcebergStore.partition_kind(client.runtime.iceberg.load(ObjectName.parse(mv)))


def write_rows(root: Path, directory: str, rows: dict[str, list[Any]], file: str = "part-0.parquet") -> None:
    path = root / directory
    path.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.table(rows), path / file)


# -- class 1: typed partition values (timestamps, nested MVs) ------------------------------------------
WEEKLY = "SELECT date_trunc('WEEK', dt) AS wk, count(*) AS c FROM t GROUP BY 1"
NESTED = "SELECT wk, sum(c) AS c FROM m1 GROUP BY wk"


def test_week_timestamp_partitions_feed_a_nested_mv(client: Any, tmp_path: Path) -> None:
    root = tmp_path / "t"
    for day in ("2024-01-01", "2024-01-03", "2024-01-08", "2024-01-10"):
        write_partition(root, "dt", day, {"k": [1, 2]})
    client.sql(f"CREATE EXTERNAL TABLE t USING parquet LOCATION '{root}'")
    client.sql(f"CREATE MATERIALIZED VIEW m1 PARTITION BY wk AS {WEEKLY}")
    weeks = {"2024-01-01 00:00:00", "2024-01-08 00:00:00"}
    assert partitions(client, "m1") == weeks
    # date_trunc of a DATE is stored without time zone; the kind says which.
    assert kind(client, "m1") == "timestamp"
    assert client.sql("SELECT sum(c) AS s FROM m1").collect()[0]["s"] == 8
    client.sql(f"CREATE MATERIALIZED VIEW m2 PARTITION BY wk AS {NESTED}")
    assert partitions(client, "m2") == weeks
    assert client.sql("SELECT sum(c) AS s FROM m2").collect()[0]["s"] == 8
    assert_mv_matches(client, "m1", WEEKLY)
    assert_mv_matches(client, "m2", NESTED)

    # A new file in one day of the second week: exactly that week, in m1 and then in m2.
    write_partition(root, "dt", "2024-01-10", {"k": [3]}, "part-1.parquet")
    run = client.refresh("m1")
    assert (run.state, run.mode) == ("SUCCESS", "PCT")
    assert rewritten(client, "m1", run.run_id) == {"2024-01-08 00:00:00"}
    assert changed_count(client, "m1", run.run_id) == 1
    run = client.refresh("m2")
    assert (run.state, run.mode) == ("SUCCESS", "PCT")
    assert rewritten(client, "m2", run.run_id) == {"2024-01-08 00:00:00"}
    assert changed_count(client, "m2", run.run_id) == 1
    assert_mv_matches(client, "m1", WEEKLY)
    assert_mv_matches(client, "m2", NESTED)
    assert client.refresh("m2").reason == "up to date"


def test_day_partitions_over_a_timestamp_partitioned_base(client: Any, tmp_path: Path) -> None:
    root = tmp_path / "ev"
    stamps = ["2024-01-01 10:00:00", "2024-01-01 18:30:00", "2024-01-02 07:15:00"]
    for ts in stamps:
        write_rows(root, "ts=" + ts.replace(":", "%3A"), {"k": [1, 2, 3]})
    client.sql(f"CREATE EXTERNAL TABLE ev USING parquet LOCATION '{root}'")
    query = "SELECT date_trunc('DAY', ts) AS d, count(*) AS c FROM ev GROUP BY 1"
    # DuckDB infers the URL-encoded timestamp directories as text: the oracle casts them.
    duck = "SELECT date_trunc('day', CAST(ts AS TIMESTAMP)) AS d, count(*) AS c FROM ev GROUP BY 1"
    client.sql(f"CREATE MATERIALIZED VIEW daily_ev PARTITION BY d AS {query}")
    assert partitions(client, "daily_ev") == {"2024-01-01 00:00:00", "2024-01-02 00:00:00"}
    assert kind(client, "daily_ev") == "timestamptz"  # the user's column is zoned (Spark TIMESTAMP)

    write_rows(root, "ts=2024-01-01 18%3A30%3A00", {"k": [4]}, "part-1.parquet")
    run = client.refresh("daily_ev")
    assert (run.state, run.mode) == ("SUCCESS", "PCT")
    assert rewritten(client, "daily_ev", run.run_id) == {"2024-01-01 00:00:00"}
    assert changed_count(client, "daily_ev", run.run_id) == 1
    assert_mv_matches(client, "daily_ev", query, duck)
    # A base partition vanishes: its day is recomputed from what remains.
    shutil.rmtree(root / "ts=2024-01-02 07%3A15%3A00")
    run = client.refresh("daily_ev")
    assert run.state == "SUCCESS" and partitions(client, "daily_ev") == {"2024-01-01 00:00:00"}
    assert_mv_matches(client, "daily_ev", query, duck)


# -- class 2: the partition set comes from the query --------------------------------------------------
UNION = (
    "SELECT d, sum(x) AS s, count(*) AS n FROM (SELECT d, amount AS x FROM f UNION ALL SELECT d, x FROM u) GROUP BY d"
)


def test_rows_only_from_a_non_reference_table_are_kept(client: Any, tmp_path: Path) -> None:
    fact, other = tmp_path / "f", tmp_path / "u"
    for day in ("2024-01-01", "2024-01-02"):
        write_partition(fact, "d", day, {"amount": [1, 2]})
    other.mkdir()
    u_rows = {"x": [10, 20, 30], "d": [None, date(2024, 1, 1), date(2030, 1, 1)]}
    pq.write_table(pa.table(u_rows), other / "part-0.parquet")
    client.sql(f"CREATE EXTERNAL TABLE f USING parquet LOCATION '{fact}'")
    client.sql(f"CREATE EXTERNAL TABLE u USING parquet LOCATION '{other}'")
    # PCT explicitly: AUTO may find FULL as cheap here, and the test is about PCT's rest chunk.
    client.sql(f"CREATE MATERIALIZED VIEW un PARTITION BY d PROPERTIES ('refresh_mode' = 'PCT') AS {UNION}")
    everything = {None, "2024-01-01", "2024-01-02", "2030-01-01"}
    assert partitions(client, "un") == everything  # FULL: NULL and 2030 come only from u
    assert_mv_matches(client, "un", UNION)

    # The reference table changes: only its partition, the rest is not recomputed.
    write_partition(fact, "d", "2024-01-02", {"amount": [5]}, "part-1.parquet")
    run = client.refresh("un")
    assert (run.mode, rewritten(client, "un", run.run_id)) == ("PCT", {"2024-01-02"})
    assert changed_count(client, "un", run.run_id) == 1
    assert_mv_matches(client, "un", UNION)

    # The non-reference table changes: every partition, including those only it feeds.
    u_rows = {"x": [11, 31, 41], "d": [None, date(2030, 1, 1), date(2031, 1, 1)]}
    pq.write_table(pa.table(u_rows), other / "part-0.parquet")
    run = client.refresh("un")
    assert run.mode == "PCT" and run.state == "SUCCESS"
    assert partitions(client, "un") == {None, "2024-01-01", "2024-01-02", "2030-01-01", "2031-01-01"}
    assert rewritten(client, "un", run.run_id) == {None, "2024-01-01", "2024-01-02", "2030-01-01", "2031-01-01"}
    assert_mv_matches(client, "un", UNION)
    forced = client.refresh("un", force=True)
    assert forced.state == "SUCCESS"
    assert_mv_matches(client, "un", UNION)


# -- class 3: retention evaluated by Spark, multi-level base partitions ----------------------------------
def test_retention_condition_by_spark_over_two_level_base(client: Any, tmp_path: Path) -> None:
    root = tmp_path / "b"
    today = date.today()
    recent, old = today - timedelta(days=3), date(2000, 1, 1)
    for region in ("eu", "us"):
        for day in (recent, old):
            write_rows(root, f"region={region}/dt={day.isoformat()}", {"k": [1, 2]})
    client.sql(f"CREATE EXTERNAL TABLE b USING parquet LOCATION '{root}'")
    query = "SELECT dt, count(*) AS n FROM b GROUP BY dt"
    condition = "dt >= current_date() - interval 1 month"

    with pytest.raises(InvalidPropertyError) as bad:
        client.sql(
            "CREATE MATERIALIZED VIEW kept PARTITION BY dt "
            f"PROPERTIES ('partition_retention_condition' = 'no_such_fn(dt) > 1') AS {query}"
        )
    assert str(bad.value).startswith(
        "property 'partition_retention_condition' 'no_such_fn(dt) > 1' cannot be evaluated: [UNRESOLVED_ROUTINE]"
    )
    assert not client.runtime.iceberg.exists(ObjectName.parse("kept"))
    client.sql(
        f"CREATE MATERIALIZED VIEW kept PARTITION BY dt PROPERTIES ('partition_retention_condition' = "
        f"'{condition.replace(chr(39), chr(39) * 2)}') AS {query}"
    )
    assert partitions(client, "kept") == {recent.isoformat()}  # FULL applies retention too
    expected = f"SELECT * FROM ({query}) WHERE {condition}"
    assert_mv_matches(client, "kept", expected)

    # Two partition levels: a change in one region's day refreshes that day only.
    write_rows(root, f"region=us/dt={recent.isoformat()}", {"k": [9]}, "part-1.parquet")
    write_rows(root, f"region=us/dt={old.isoformat()}", {"k": [9]}, "part-1.parquet")
    run = client.refresh("kept")
    assert (run.mode, rewritten(client, "kept", run.run_id)) == ("PCT", {recent.isoformat()})
    assert changed_count(client, "kept", run.run_id) == 1
    assert_mv_matches(client, "kept", expected)

    # ALTER with a condition that is not SQL: refused, nothing changed.
    rt = client.runtime

    def stored_properties() -> dict[str, str]:
        with rt.catalog.transaction() as s:
            return dict(rt.catalog.objects.get(s, ObjectName.parse("kept")).properties or {})

    before = stored_properties()
    with pytest.raises(InvalidPropertyError) as bad:
        client.sql("ALTER MATERIALIZED VIEW kept SET PROPERTIES ('partition_retention_condition' = 'dt >=')")
    assert "property 'partition_retention_condition' 'dt >=' cannot be evaluated: [PARSE_SYNTAX_ERROR]" in str(
        bad.value
    )
    assert stored_properties() == before == {"partition_retention_condition": condition}


# -- class 4: inactivity propagates down the MV graph --------------------------------------------------
def test_inactivity_cascades_and_reactivation_is_top_down(client: Any, tmp_path: Path) -> None:
    root = tmp_path / "base"
    write_partition(root, "d", "2024-01-01", {"k": [1, 2]})
    client.sql(f"CREATE EXTERNAL TABLE base USING parquet LOCATION '{root}'")
    client.sql("CREATE MATERIALIZED VIEW lvl1 PARTITION BY d AS SELECT d, count(*) AS n FROM base GROUP BY d")
    client.sql("CREATE MATERIALIZED VIEW lvl2 PARTITION BY d AS SELECT d, sum(n) AS n FROM lvl1 GROUP BY d")

    client.sql("DROP TABLE base")
    rows = {r["name"]: r for r in client.sql("SELECT * FROM sparkmv.materialized_views").collect()}
    assert not rows["lvl1"]["is_active"] and not rows["lvl2"]["is_active"]
    assert rows["lvl1"]["inactive_reason"] == "base table 'base' was dropped"
    assert rows["lvl2"]["inactive_reason"] == (
        "input materialized view 'lvl1' is inactive: base table 'base' was dropped"
    )
    with pytest.raises(InactiveError):
        client.refresh("lvl2")

    client.sql(f"CREATE EXTERNAL TABLE base USING parquet LOCATION '{root}'")
    with pytest.raises(AnalysisError) as refused:
        client.sql("ALTER MATERIALIZED VIEW lvl2 ACTIVE")
    assert str(refused.value) == (
        "cannot activate 'lvl2': its input materialized view 'lvl1' "
        "(base table 'base' was dropped) is inactive; activate that one first"
    )
    client.sql("ALTER MATERIALIZED VIEW lvl1 ACTIVE")
    client.sql("ALTER MATERIALIZED VIEW lvl2 ACTIVE")
    assert client.refresh("lvl1").state == "SUCCESS"
    assert client.refresh("lvl2").state == "SUCCESS"
    assert_mv_matches(client, "lvl2", "SELECT d, sum(n) AS n FROM lvl1 GROUP BY d")

    # A refresh never reads an inactive input, even when the reader is (still) active.
    rt = client.runtime
    with rt.catalog.transaction() as s:
        row = rt.catalog.objects.get(s, ObjectName.parse("lvl1"))
        rt.catalog.objects.set_fields(s, row.id, is_active=False, inactive_reason="test")
    write_partition(root, "d", "2024-01-02", {"k": [3]})
    run = client.refresh("lvl2")
    assert (run.state, run.error) == (
        "FAILED",
        "MV 'lvl2' reads inactive materialized view 'lvl1' (test); "
        "reactivate it first (ALTER MATERIALIZED VIEW ... ACTIVE)",
    )


# -- class 5: lineage through equi-join equivalence ------------------------------------------------------
JOINED = (
    "SELECT t5.province, count(*) AS n, sum(t1.amount) AS total "
    "FROM t1 JOIN t5 ON t1.province = t5.province GROUP BY t5.province"
)


def test_join_equivalence_makes_a_reference_table(client: Any, tmp_path: Path) -> None:
    t1, t5 = tmp_path / "t1", tmp_path / "t5"
    for province in ("on", "qc", "bc"):
        write_partition(t1, "province", province, {"amount": [1, 2, 3]})
    t5.mkdir()
    pq.write_table(pa.table({"province": ["on", "qc", "bc"], "capital": ["t", "q", "v"]}), t5 / "part-0.parquet")
    client.sql(f"CREATE EXTERNAL TABLE t1 USING parquet LOCATION '{t1}'")
    client.sql(f"CREATE EXTERNAL TABLE t5 USING parquet LOCATION '{t5}'")
    client.sql(f"CREATE MATERIALIZED VIEW by_province PARTITION BY province AS {JOINED}")
    assert partitions(client, "by_province") == {"on", "qc", "bc"}

    write_partition(t1, "province", "qc", {"amount": [100]}, "part-1.parquet")
    explain = client.execute("EXPLAIN REFRESH MATERIALIZED VIEW by_province").message or ""
    assert "partition lineage: default.t1: province = province" in explain
    lines = explain.splitlines()
    assert "mode: PCT" in lines and "chunks: 1" in lines
    listed = lines[lines.index("MV partitions to refresh:") + 1 : lines.index("chunks: 1")]
    assert listed == ["  qc: default.t1 partition province=qc changed"]
    assert lines[-1].startswith("  chunk 0: qc (base ")
    run = client.refresh("by_province")
    assert (run.mode, rewritten(client, "by_province", run.run_id)) == ("PCT", {"qc"})
    assert changed_count(client, "by_province", run.run_id) == 1
    assert_mv_matches(client, "by_province", JOINED)
